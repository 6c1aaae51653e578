"""Multiple-testing corrections: the p-values of one family of tests, adjusted so that the chance of any false
"significant" in the family is at most ``alpha``.

- ``"holm"``: Holm's (1979) step-down method (the default everywhere in capeval);
- ``"bonferroni"``: each p-value times the family size;
- ``"none"``: unchanged (WMT's practice: each test at ``alpha``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from capeval.core.errors import InputError

CORRECTIONS = ("holm", "bonferroni", "none")


def adjust(pvalues: Sequence[float], correction: str = "holm") -> np.ndarray:
    """Family-wise adjusted p-values (Holm 1979 step-down, Bonferroni, or unchanged)."""
    if correction not in CORRECTIONS:
        raise InputError(f"correction: {correction!r} is not one of {CORRECTIONS}")
    p = np.asarray(pvalues, dtype=float)
    if correction == "none" or p.size == 0:
        return p.copy()
    if correction == "bonferroni":
        return np.minimum(1.0, p * p.size)
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, p[order] * (p.size - np.arange(p.size))))
    out = np.empty_like(p)
    out[order] = stepped
    return out
