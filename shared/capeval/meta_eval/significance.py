"""Is metric A better than metric B on the same human judgments? Paired tests with seeded, unit-aware resampling.

- correlation benchmarks (τ-b, τ-c, Pearson, Spearman): paired bootstrap (percentile CI of the difference) and
  paired permutation test (PERM-BOTH of Deutsch et al. 2021, as ``mt-metrics-eval``: both metrics z-scored, a
  unit's scores swapped between the metrics with probability ½); Williams' test for Pearson (Steiger 1980).
- pairwise benchmarks (Pascal-50S, Reformulations, FOIL): McNemar's test per draw and category, paired bootstrap
  and permutation of the accuracy difference (mean over draws of the mean over categories).

p-values: permutation ``P(δ* ≥ δ)`` (``greater``), ``P(δ* ≤ δ)`` (``less``), ``P(|δ*| ≥ |δ|)`` (two-sided), counted
as ``mt-metrics-eval`` does (hits / resamples); bootstrap ``P(δ* ≤ 0)`` for ``greater`` (Koehn 2004),
``P(δ* ≥ 0)`` for ``less``, twice the smaller of the two for two-sided.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np
from scipy import stats

from capeval.core.errors import InputError
from capeval.functional.correlation import STATISTICS, pairwise_correct, pearson
from capeval.meta_eval.resampled import AccuracyResampler, Resampler
from capeval.meta_eval.resampling import bootstrap_counts, swap_masks, unit_codes

ALTERNATIVES = ("two-sided", "greater", "less")


def as_scores(values, field: str, n: Optional[int] = None) -> np.ndarray:
    """A 1-D float array with finite values, else ``InputError`` naming the field and the first bad index."""
    try:
        array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{field}: expected a list of numbers ({exc})") from exc
    if array.ndim != 1:
        raise InputError(f"{field}: expected a flat list of numbers, got shape {array.shape}")
    if n is not None and len(array) != n:
        raise InputError(f"{field}: {len(array)} values, expected {n} (one per judgment row)")
    bad = np.flatnonzero(~np.isfinite(array))
    if len(bad):
        raise InputError(f"{field}[{bad[0]}]: {array[bad[0]]} is not a finite number")
    return array


def _check_options(statistic: Optional[str], alternative: str, resamples: int) -> None:
    if statistic is not None and statistic not in STATISTICS:
        raise InputError(f"statistic: unknown {statistic!r}; use one of {sorted(STATISTICS)}")
    if alternative not in ALTERNATIVES:
        raise InputError(f"alternative: {alternative!r} is not one of {ALTERNATIVES}")
    if resamples < 1:
        raise InputError(f"resamples: need at least 1, got {resamples}")


def permutation_p(null: np.ndarray, delta: float, alternative: str) -> float:
    if alternative == "greater":
        return float(np.mean(null >= delta))
    if alternative == "less":
        return float(np.mean(null <= delta))
    return float(np.mean(np.abs(null) >= abs(delta)))


def bootstrap_p(deltas: np.ndarray, alternative: str) -> float:
    at_most, at_least = float(np.mean(deltas <= 0)), float(np.mean(deltas >= 0))
    if alternative == "greater":
        return at_most
    if alternative == "less":
        return at_least
    return min(1.0, 2 * min(at_most, at_least))


def percentile_interval(values: np.ndarray, confidence: float):
    tail = (1 - confidence) / 2
    low, high = np.nanquantile(values, [tail, 1 - tail], axis=0)
    return low, high


def _inputs(metric_a, metric_b, human, statistic, alternative, resamples):
    _check_options(statistic, alternative, resamples)
    human = as_scores(human, "human")
    return as_scores(metric_a, "metric_a", len(human)), as_scores(metric_b, "metric_b", len(human)), human


def paired_bootstrap(metric_a, metric_b, human, *, statistic: str = "kendall_tau_c",
                     units: Optional[Sequence] = None, resamples: int = 1000, seed: int = 0,
                     confidence: float = 0.95, alternative: str = "two-sided") -> Dict:
    """Bootstrap of ``statistic(A) − statistic(B)``: the same units (``units``: one label per row, rows with the
    same label drawn together; default every row) are drawn for both metrics."""
    a, b, human = _inputs(metric_a, metric_b, human, statistic, alternative, resamples)
    codes, n_units = unit_codes(units, len(human))
    resampler = Resampler(human, codes, n_units, statistic)
    prepared_a, prepared_b = resampler.prepare(a), resampler.prepare(b)
    deltas = np.concatenate([resampler.bootstrap(prepared_a, c) - resampler.bootstrap(prepared_b, c)
                             for c in bootstrap_counts(n_units, resamples, seed)])
    value_a, value_b = STATISTICS[statistic](a, human), STATISTICS[statistic](b, human)
    low, high = percentile_interval(deltas, confidence)
    return {"test": "paired bootstrap", "statistic": statistic, "value_a": value_a, "value_b": value_b,
            "delta": value_a - value_b, "ci": [float(low), float(high)], "confidence": confidence,
            "p_value": bootstrap_p(deltas, alternative), "alternative": alternative, "resamples": resamples,
            "units": n_units, "seed": seed}


def paired_permutation(metric_a, metric_b, human, *, statistic: str = "kendall_tau_c",
                       units: Optional[Sequence] = None, resamples: int = 1000, seed: int = 0,
                       alternative: str = "two-sided") -> Dict:
    """PERM-BOTH permutation test of ``statistic(A) − statistic(B)``: both metrics z-scored, each unit's rows
    swapped between A and B with probability ½ (all rows of a unit together); the observed difference the
    permutations are compared with is the z-scored metrics' (``delta`` reports the raw scores')."""
    a, b, human = _inputs(metric_a, metric_b, human, statistic, alternative, resamples)
    codes, n_units = unit_codes(units, len(human))
    resampler = Resampler(human, codes, n_units, statistic)
    prepared_a, prepared_b = resampler.prepare(a), resampler.prepare(b)
    cross = resampler.cross(prepared_a, prepared_b)
    null = np.concatenate([resampler.permuted(prepared_a, prepared_b, cross, s)
                           - resampler.permuted(prepared_a, prepared_b, cross, 1 - s)
                           for s in swap_masks(n_units, resamples, seed)])
    value_a, value_b = STATISTICS[statistic](a, human), STATISTICS[statistic](b, human)
    observed = resampler.observed(prepared_a, prepared_b, cross)
    return {"test": "paired permutation", "statistic": statistic, "value_a": value_a, "value_b": value_b,
            "delta": value_a - value_b, "p_value": permutation_p(null, observed, alternative),
            "alternative": alternative, "resamples": resamples, "units": n_units, "seed": seed}


def williams_test(r_a: float, r_b: float, r_ab: float, n: int, *, alternative: str = "greater") -> Dict:
    """Williams' t for two dependent correlations sharing the human scores (Steiger 1980, eq. 7; Graham & Baldwin
    2014): ``r_a``, ``r_b`` = each metric's Pearson r with people, ``r_ab`` = the metrics' r with each other."""
    if alternative not in ALTERNATIVES:
        raise InputError(f"alternative: {alternative!r} is not one of {ALTERNATIVES}")
    if n <= 3:
        raise InputError(f"n: Williams' test needs more than 3 rows, got {n}")
    determinant = 1 - r_a ** 2 - r_b ** 2 - r_ab ** 2 + 2 * r_a * r_b * r_ab
    mean = (r_a + r_b) / 2
    t = (r_a - r_b) * np.sqrt((n - 1) * (1 + r_ab)) / np.sqrt(
        2 * (n - 1) / (n - 3) * determinant + mean ** 2 * (1 - r_ab) ** 3)
    p = {"greater": stats.t.sf(t, n - 3), "less": stats.t.cdf(t, n - 3),
         "two-sided": 2 * stats.t.sf(abs(t), n - 3)}[alternative]
    return {"test": "williams", "t": float(t), "df": n - 3, "p_value": float(min(1.0, p)), "alternative": alternative}


def williams(metric_a, metric_b, human, *, alternative: str = "two-sided") -> Dict:
    """Williams' test of Pearson(A, human) − Pearson(B, human) over the rows (which it takes as independent)."""
    a, b, human = _inputs(metric_a, metric_b, human, None, alternative, 1)
    r_a, r_b, r_ab = pearson(a, human), pearson(b, human), pearson(a, b)
    return {**williams_test(r_a, r_b, r_ab, len(human), alternative=alternative), "value_a": r_a, "value_b": r_b,
            "r_ab": r_ab, "delta": r_a - r_b}


def correct_pairs(score_a, score_b, prefers_a, *, ties: str = "wrong") -> np.ndarray:
    """Per pair, whether the metric orders the two captions as people did (the rule of
    :func:`capeval.functional.correlation.pairwise_correct`: a metric tie is wrong, or ½ with ``ties="half"``)."""
    if ties not in ("wrong", "half"):
        raise InputError(f"ties: {ties!r} is not 'wrong' or 'half'")
    return pairwise_correct(score_a, score_b, prefers_a, ties=ties)


def mcnemar(correct_a, correct_b, *, exact: bool = True) -> Dict:
    """McNemar's test on paired right/wrong outcomes: exact binomial on the discordant pairs (default), or χ² with
    continuity correction (``exact=False``), as ``statsmodels.stats.contingency_tables.mcnemar``."""
    a, b = np.asarray(correct_a) >= 1, np.asarray(correct_b) >= 1
    only_a, only_b = int(np.sum(a & ~b)), int(np.sum(b & ~a))
    discordant = only_a + only_b
    if exact:
        statistic = min(only_a, only_b)
        p = 1.0 if discordant == 0 else min(1.0, 2 * stats.binom.cdf(statistic, discordant, 0.5))
    else:
        statistic = (abs(only_a - only_b) - 1) ** 2 / discordant if discordant else 0.0
        p = float(stats.chi2.sf(statistic, 1)) if discordant else 1.0
    return {"test": "mcnemar", "a_only": only_a, "b_only": only_b, "statistic": float(statistic),
            "p_value": float(p), "exact": exact}


def compare_accuracy(correct_a, correct_b, *, categories: Optional[Sequence] = None,
                     units: Optional[Sequence] = None, resamples: int = 1000, seed: int = 0,
                     confidence: float = 0.95, alternative: str = "two-sided", exact: bool = True) -> Dict:
    """Pairwise accuracy of A vs B: ``correct_*`` are draws × pairs (or one draw); the value is the mean over draws
    of the mean over categories. McNemar per draw for each category and over all pairs; paired bootstrap (CI, p)
    and permutation (p) of the difference over units (all of a unit's pairs and draws together), overall and, with
    several categories, for each category (``per_category``: the same tests on its pairs alone)."""
    _check_options(None, alternative, resamples)
    ca, cb = np.atleast_2d(np.asarray(correct_a, float)), np.atleast_2d(np.asarray(correct_b, float))
    if ca.shape != cb.shape:
        raise InputError(f"correct_b: shape {cb.shape} differs from correct_a's {ca.shape}")
    n = ca.shape[1]
    if categories is not None and "all" in set(map(str, categories)):
        raise InputError("categories: 'all' is the name of the overall group; rename that category")
    categories = np.asarray(["all"] * n if categories is None else list(categories), dtype=object).astype(str)
    if len(categories) != n:
        raise InputError(f"categories: {len(categories)} labels for {n} pairs")
    codes, n_units = unit_codes(units, n)
    options = dict(resamples=resamples, seed=seed, confidence=confidence, alternative=alternative)
    groups = {"all": np.ones(n, bool), **{c: categories == c for c in sorted(set(categories)) if c != "all"}}
    per_category = {name: _accuracy_difference(ca[:, rows], cb[:, rows], categories[rows], codes[rows], **options)
                    for name, rows in groups.items() if name != "all"} if len(groups) > 2 else {}
    return {**_accuracy_difference(ca, cb, categories, codes, **options), "per_category": per_category,
            "mcnemar": {name: [mcnemar(da[rows], db[rows], exact=exact) for da, db in zip(ca, cb)]
                        for name, rows in groups.items()},
            "resamples": resamples, "units": n_units, "seed": seed}


def _accuracy_difference(ca: np.ndarray, cb: np.ndarray, categories: np.ndarray, codes: np.ndarray, *,
                         resamples: int, seed: int, confidence: float, alternative: str) -> Dict:
    """Values, difference, bootstrap CI and p, and permutation p of draws × pairs outcomes over their units."""
    codes, n_units = unit_codes(codes.tolist(), len(codes))
    resampler = AccuracyResampler(categories, codes, n_units)
    sums_a, sums_b = resampler.sums(ca), resampler.sums(cb)
    ones = np.ones((1, n_units))
    value_a, value_b = float(resampler.value(sums_a, ones)[0]), float(resampler.value(sums_b, ones)[0])
    deltas = np.concatenate([resampler.value(sums_a, c) - resampler.value(sums_b, c)
                             for c in bootstrap_counts(n_units, resamples, seed)])
    null = np.concatenate([resampler.permuted(sums_a, sums_b, s) - resampler.permuted(sums_a, sums_b, 1 - s)
                           for s in swap_masks(n_units, resamples, seed)])
    low, high = percentile_interval(deltas, confidence)
    return {"value_a": value_a, "value_b": value_b, "delta": value_a - value_b, "ci": [float(low), float(high)],
            "confidence": confidence, "p_bootstrap": bootstrap_p(deltas, alternative),
            "p_permutation": permutation_p(null, value_a - value_b, alternative), "alternative": alternative}
