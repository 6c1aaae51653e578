"""Inter-annotator agreement: Krippendorff's α (nominal, ordinal, interval, ratio) from a raters × units table.

Where α is undefined (no unit with two ratings, or no variation among the ratings) it is NaN with an
:class:`~capeval.functional.correlation.UndefinedStatisticWarning` naming the cause."""

from __future__ import annotations

from typing import Hashable, Sequence

import numpy as np

from capeval.core.errors import InputError
from capeval.functional.correlation import finite_rows, warn_undefined

LEVELS = ("nominal", "ordinal", "interval", "ratio")


def reliability_table(units: Sequence[Hashable], raters: Sequence[Hashable], values: Sequence[float]) -> np.ndarray:
    """One judgment per row (unit, rater, value) → a raters × units float table, NaN where a rater gave none.

    A rater rating the same unit twice is an error: α counts one value per rater and unit. A missing (NaN) or
    infinite value is an error naming its rows (leave an unrated unit out instead of passing NaN).
    """
    if not len(units) == len(raters) == len(values):
        raise InputError(f"units, raters and values differ in length: {len(units)}, {len(raters)}, {len(values)}")
    values = finite_rows({"values": values})[0]["values"]
    unit_index = {u: i for i, u in enumerate(dict.fromkeys(units))}
    rater_index = {r: i for i, r in enumerate(dict.fromkeys(raters))}
    table = np.full((len(rater_index), len(unit_index)), np.nan)
    for unit, rater, value in zip(units, raters, values):
        i, j = rater_index[rater], unit_index[unit]
        if not np.isnan(table[i, j]):
            raise InputError(f"rater {rater!r} rated unit {unit!r} more than once")
        table[i, j] = float(value)
    return table


def _distance(values: np.ndarray, totals: np.ndarray, level: str) -> np.ndarray:
    """δ²(c, k) between every pair of the distinct values (sorted), given each value's pairable count n_c."""
    c, k = values[:, None], values[None, :]
    if level == "nominal":
        return (c != k).astype(float)
    if level == "interval":
        return (c - k) ** 2
    if level == "ratio":
        total = c + k
        return np.divide((c - k) ** 2, total ** 2, out=np.zeros_like(total), where=total != 0)
    # ordinal: (Σ_{g between c and k} n_g − (n_c + n_k)/2)², ranks given by the sorted distinct values
    cumulative = np.concatenate([[0.0], np.cumsum(totals)])
    i, j = np.meshgrid(np.arange(len(values)), np.arange(len(values)), indexing="ij")
    low, high = np.minimum(i, j), np.maximum(i, j)
    between = cumulative[high + 1] - cumulative[low]
    return (between - (totals[i] + totals[j]) / 2) ** 2


def krippendorff_alpha(table, level: str = "interval") -> float:
    """Krippendorff's α of a raters × units table (NaN = missing); units with fewer than 2 values are not pairable.

    α = 1 − (n − 1) Σ o_ck δ²_ck / Σ n_c n_k δ²_ck over the coincidence matrix o (Krippendorff 2011).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    table = np.asarray(table, dtype=float)
    if table.ndim != 2:
        raise InputError(f"expected a raters x units table, got shape {table.shape}")
    if np.isinf(table).any():
        raise InputError("table: infinite rating (NaN marks a missing one)")
    table = table[:, (~np.isnan(table)).sum(axis=0) >= 2]  # pairable units only
    if table.size == 0:
        warn_undefined("Krippendorff's alpha", "no unit has two or more ratings")
        return float("nan")
    values = np.unique(table[~np.isnan(table)])
    if len(values) < 2:
        warn_undefined("Krippendorff's alpha", f"every rating has the same value ({values[0]:g}): no variation to "
                                               f"agree on")
        return float("nan")
    counts = np.stack([(table == v).sum(axis=0) for v in values], axis=1).astype(float)  # units × values
    per_unit = counts.sum(axis=1)
    weighted = counts / (per_unit - 1)[:, None]
    coincidence = weighted.T @ counts - np.diag(weighted.sum(axis=0))
    totals = coincidence.sum(axis=1)
    delta = _distance(values, totals, level)
    n = totals.sum()
    expected = (totals[:, None] * totals[None, :] * delta).sum()
    return float(1 - (n - 1) * (coincidence * delta).sum() / expected)
