"""EnsembEval's combination rule (Berger et al. 2025): a plain weighted sum of component scores."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def weighted_sum(components: Mapping[str, Sequence[float]], weights: Mapping[str, float]) -> np.ndarray:
    """Per sample ``Σ_m weights[m] * components[m]`` in float64, in the order of ``weights``.

    No intercept and no rescaling of the component values, exactly as the official ensemble.
    """
    missing = [name for name in weights if name not in components]
    if missing:
        raise KeyError(f"component scores missing for {missing}")
    columns = [np.asarray(components[name], dtype=np.float64) for name in weights]
    lengths = {column.shape for column in columns}
    if len(lengths) > 1:
        raise ValueError(f"component score lists differ in length: {sorted(lengths)}")
    total = np.zeros_like(columns[0]) if columns else np.zeros(0)
    for name, column in zip(weights, columns):
        total = total + float(weights[name]) * column
    return total
