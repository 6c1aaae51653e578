"""Meta-evaluation statistics: Kendall τ-b/τ-c, Pearson, Spearman, seeded bootstrap intervals, pairwise accuracy.

A statistic that is undefined on its input (fewer than 2 rows, a constant column: every pair tied) is NaN with an
:class:`UndefinedStatisticWarning` naming the cause, never a number. Missing (NaN) or infinite inputs are refused
with an ``InputError`` naming the column and the rows; :func:`finite_rows` drops missing rows where a caller asks
for it (``nan_policy="omit"``) and says which.
"""

from __future__ import annotations

import warnings
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from capeval.core.errors import InputError

NAN_POLICIES = ("raise", "omit")
SHOWN_ROWS = 5  # row indices an error message lists before the count


class UndefinedStatisticWarning(RuntimeWarning):
    """A statistic is undefined on its input (constant column, too few rows): it is reported as NaN."""


def warn_undefined(what: str, reason: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{what} is undefined: {reason}; reported as NaN", UndefinedStatisticWarning,
                  stacklevel=stacklevel)


def describe_rows(rows: Sequence[int], total: int) -> str:
    """``rows 3, 7, 9 (3 of 120 rows)``: the first few indices and the count."""
    shown = ", ".join(str(int(r)) for r in rows[:SHOWN_ROWS])
    more = ", ..." if len(rows) > SHOWN_ROWS else ""
    return f"row{'s' if len(rows) > 1 else ''} {shown}{more} ({len(rows)} of {total} rows)"


def _column(values, name: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=float)  # None (a null judgment) becomes NaN: missing
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: expected a list of numbers ({exc})") from exc
    if array.ndim != 1:
        raise InputError(f"{name}: expected a flat list of numbers, got shape {array.shape}")
    infinite = np.flatnonzero(np.isinf(array))
    if len(infinite):
        raise InputError(f"{name}: infinite value at {describe_rows(infinite, len(array))}")
    return array


def finite_rows(columns: Mapping[str, Sequence[float]], nan_policy: str = "raise"
                ) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """Equal-length float columns without missing values, and the indices of the rows dropped.

    ``nan_policy="raise"``: a missing value (NaN or None) is an ``InputError`` naming the column and its rows;
    ``"omit"``: every row with a missing value in any column is dropped (the returned indices say which).
    An infinite value is always an error."""
    if nan_policy not in NAN_POLICIES:
        raise InputError(f"nan_policy: {nan_policy!r} is not one of {NAN_POLICIES}")
    arrays = {name: _column(values, name) for name, values in columns.items()}
    lengths = {name: len(a) for name, a in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise InputError(f"columns differ in length: {lengths} (one value per row)")
    n = next(iter(lengths.values()), 0)
    missing = np.zeros(n, dtype=bool)
    for name, array in arrays.items():
        rows = np.flatnonzero(np.isnan(array))
        if len(rows) and nan_policy == "raise":
            raise InputError(f"{name}: missing value (NaN) at {describe_rows(rows, n)}; pass nan_policy='omit' to "
                             f"drop those rows (the number dropped is reported)")
        missing[rows] = True
    return {name: a[~missing] for name, a in arrays.items()}, np.flatnonzero(missing)


def undefined_reason(metric: np.ndarray, human: np.ndarray) -> Optional[str]:
    """Why a correlation of ``metric`` with ``human`` is undefined (too few rows, a constant column), else None."""
    if len(metric) < 2:
        return f"{len(metric)} row(s); a correlation needs at least 2"
    for name, column in (("metric", metric), ("human", human)):
        if np.all(column == column[0]):
            return f"the {name} scores are constant ({column[0]:g} on all {len(column)} rows: every pair tied)"
    return None


def _pair(metric, human) -> Tuple[np.ndarray, np.ndarray]:
    columns, _ = finite_rows({"metric": metric, "human": human})
    return columns["metric"], columns["human"]


def _correlation(name: str, compute: Callable, metric, human) -> float:
    metric, human = _pair(metric, human)
    reason = undefined_reason(metric, human)
    if reason is not None:
        warn_undefined(name, reason, stacklevel=4)
        return float("nan")
    return float(compute(metric, human).statistic)


def kendall_tau(metric: Sequence[float], human: Sequence[float], variant: str = "c") -> float:
    """Kendall's τ (variant "b" or "c", both handle ties) between metric and human scores."""
    from scipy import stats  # (scipy.stats: about 1 s to import; the suite's comparison uses none of it)

    return _correlation(f"Kendall tau-{variant}", lambda m, h: stats.kendalltau(m, h, variant=variant), metric,
                        human)


def pearson(metric: Sequence[float], human: Sequence[float]) -> float:
    from scipy import stats

    return _correlation("Pearson r", stats.pearsonr, metric, human)


def spearman(metric: Sequence[float], human: Sequence[float]) -> float:
    from scipy import stats

    return _correlation("Spearman rho", stats.spearmanr, metric, human)


STATISTICS: Dict[str, Callable[[Sequence[float], Sequence[float]], float]] = {
    "kendall_tau_b": lambda m, h: kendall_tau(m, h, "b"),
    "kendall_tau_c": lambda m, h: kendall_tau(m, h, "c"),
    "pearson": pearson,
    "spearman": spearman,
}


def quiet(statistic: Callable, *args) -> float:
    """``statistic(*args)`` without its :class:`UndefinedStatisticWarning` (a resample's NaN is counted instead)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedStatisticWarning)
        return statistic(*args)


def resampled_interval(values: np.ndarray, confidence: float, what: str = "the statistic"):
    """Percentile interval of resampled values over the resamples where the statistic is defined; the resamples
    where it is not (e.g. a draw with a constant column) are named in a warning, all of them: (NaN, NaN)."""
    values = np.asarray(values, dtype=float)
    if values.ndim > 1 and values.shape[1] == 0:  # no statistic to bound
        return np.empty(0), np.empty(0)
    undefined = int(np.isnan(values).sum(axis=0).max()) if values.size else 0
    tail = (1 - confidence) / 2
    if undefined == len(values):
        warn_undefined(f"the interval of {what}", "undefined in every resample")
        nan = np.full(values.shape[1:], np.nan)
        return nan, nan.copy()
    if undefined:
        warnings.warn(f"{what} is undefined in {undefined} of {len(values)} resamples (a resample with a constant "
                      f"column); the interval is over the other resamples", UndefinedStatisticWarning, stacklevel=3)
    low, high = np.nanquantile(values, [tail, 1 - tail], axis=0)
    return low, high


def bootstrap_interval(statistic: Callable, metric: Sequence[float], human: Sequence[float], *,
                       resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> Tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over resampled (metric, human) rows (seeded); (NaN, NaN)
    where the statistic of the full sample is undefined, or with fewer than 2 rows."""
    metric, human = np.asarray(metric, dtype=float), np.asarray(human, dtype=float)
    if np.isnan(quiet(statistic, metric, human)):
        return float("nan"), float("nan")
    if len(metric) < 2:
        warn_undefined("the bootstrap interval", f"{len(metric)} row(s): every resample would be the sample itself")
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        idx = rng.integers(0, len(metric), len(metric))
        values.append(quiet(statistic, metric[idx], human[idx]))
    low, high = resampled_interval(np.array(values), confidence)
    return float(low), float(high)


def pairwise_correct(metric_a: Sequence[float], metric_b: Sequence[float], human_prefers_a: Sequence[bool], *,
                     ties: str = "wrong") -> np.ndarray:
    """Per pair, 1 where the metric orders the two captions as people did, else 0.

    ``ties="wrong"`` is the literature's strict rule (a metric tie never counts); ``ties="half"`` counts it ½.
    A missing (NaN) or infinite score is an ``InputError`` naming its pairs (it would order no pair).
    """
    if ties not in ("wrong", "half"):
        raise ValueError("ties must be 'wrong' or 'half'")
    columns, _ = finite_rows({"metric_a": metric_a, "metric_b": metric_b})
    a, b = columns["metric_a"], columns["metric_b"]
    prefers_a = np.asarray(human_prefers_a, dtype=bool)
    if len(prefers_a) != len(a):
        raise InputError(f"human_prefers_a: {len(prefers_a)} values for {len(a)} pairs")
    correct = np.where(prefers_a, a > b, b > a).astype(float)
    if ties == "half":
        correct[a == b] = 0.5
    return correct


def pairwise_accuracy(metric_a: Sequence[float], metric_b: Sequence[float], human_prefers_a: Sequence[bool], *,
                      ties: str = "wrong") -> float:
    """Share of pairs where the metric orders the two captions as people did (:func:`pairwise_correct`); NaN with
    a warning for no pairs."""
    correct = pairwise_correct(metric_a, metric_b, human_prefers_a, ties=ties)
    if not len(correct):
        warn_undefined("pairwise accuracy", "no pairs")
        return float("nan")
    return float(correct.mean())
