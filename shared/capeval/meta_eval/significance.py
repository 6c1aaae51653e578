"""Is metric A better than metric B on the same human judgments? Paired tests with seeded, unit-aware resampling.

- correlation benchmarks (τ-b, τ-c, Pearson, Spearman): paired bootstrap (percentile CI of the difference) and
  paired permutation test (PERM-BOTH of Deutsch et al. 2021, as ``mt-metrics-eval``: both metrics z-scored, a
  unit's scores swapped between the metrics with probability ½); Williams' test for Pearson (Steiger 1980).
- pairwise benchmarks (Pascal-50S, Reformulations, FOIL): McNemar's test per draw and category, paired bootstrap
  and permutation of the accuracy difference (mean over draws of the mean over categories).

p-values: :func:`capeval.statistics.p_values.permutation_p` and :func:`~capeval.statistics.p_values.bootstrap_p`
(the draws: :mod:`capeval.statistics.resampling`; comparing captioning *systems*: :mod:`capeval.statistics.systems`).

Undefined statistics: where a metric's statistic is undefined on the full sample (a constant column, too few
rows), its value, the difference, the CI and every p-value are NaN, with an ``UndefinedStatisticWarning`` naming
the cause and the cause under ``undefined``. A resample where the statistic is undefined is left out of the CI and
the p-value, and counted (``undefined_resamples``, with a warning). Missing (NaN) inputs are an ``InputError``
naming the column and rows, or with ``nan_policy="omit"`` their rows are dropped (``omitted``: how many).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

from capeval.core.errors import InputError
from capeval.functional.correlation import (
    STATISTICS, describe_rows, finite_rows, pairwise_correct, pearson, quiet, undefined_reason, warn_undefined,
)
from capeval.meta_eval.resampled import AccuracyResampler, Resampler
from capeval.statistics.p_values import ALTERNATIVES, bootstrap_p, permutation_p
from capeval.statistics.resampling import (
    bootstrap_counts, percentile_interval, swap_masks, too_few_units, undefined_resamples, unit_codes,
    warn_undefined_resamples,
)

NAN = float("nan")


def paired_columns(columns: Dict[str, Sequence[float]], units: Optional[Sequence], nan_policy: str
                   ) -> Tuple[Dict[str, np.ndarray], Optional[list], np.ndarray]:
    """Finite float columns of one length (the first column's), the units of the rows kept, and the rows omitted
    (:func:`capeval.functional.correlation.finite_rows`)."""
    n = None
    for field, values in columns.items():
        length = len(np.atleast_1d(np.asarray(values, dtype=object)))
        if n is not None and length != n:
            raise InputError(f"{field}: {length} values, expected {n} (one per judgment row)")
        n = length
    kept, omitted = finite_rows(columns, nan_policy)
    if units is not None and len(units) != n:
        raise InputError(f"units: {len(units)} entries for {n} rows (one unit label per row)")
    if units is not None and len(omitted):
        drop = set(omitted.tolist())
        units = [u for k, u in enumerate(units) if k not in drop]
    return kept, units, omitted


def undefined_of(values: Dict[str, np.ndarray], human: np.ndarray) -> Dict[str, str]:
    """``{name: why its correlation with people is undefined}`` for the metrics where it is."""
    reasons = {name: undefined_reason(x, human) for name, x in values.items()}
    return {name: reason for name, reason in reasons.items() if reason is not None}


def _check_options(statistic: Optional[str], alternative: str, resamples: int) -> None:
    if statistic is not None and statistic not in STATISTICS:
        raise InputError(f"statistic: unknown {statistic!r}; use one of {sorted(STATISTICS)}")
    if alternative not in ALTERNATIVES:
        raise InputError(f"alternative: {alternative!r} is not one of {ALTERNATIVES}")
    if resamples < 1:
        raise InputError(f"resamples: need at least 1, got {resamples}")


def _inputs(metric_a, metric_b, human, statistic, alternative, resamples, units=None, nan_policy="raise"):
    _check_options(statistic, alternative, resamples)
    kept, units, omitted = paired_columns({"human": human, "metric_a": metric_a, "metric_b": metric_b}, units,
                                          nan_policy)
    return kept["metric_a"], kept["metric_b"], kept["human"], units, len(omitted)


def _undefined_comparison(a: np.ndarray, b: np.ndarray, human: np.ndarray, statistic: str) -> Optional[Dict]:
    """Where A's or B's statistic is undefined: NaN values, delta and p-values with the cause (and a warning)."""
    undefined = undefined_of({"metric_a": a, "metric_b": b}, human)
    if not undefined:
        return None
    by_reason: Dict[str, list] = {}
    for name, reason in undefined.items():
        by_reason.setdefault(reason, []).append(name)
    cause = "; ".join(f"{' and '.join(names)}: {reason}" for reason, names in by_reason.items())
    warn_undefined(f"the {statistic} difference", cause, stacklevel=4)
    value_a, value_b = (NAN if name in undefined else quiet(STATISTICS[statistic], x, human)
                        for name, x in (("metric_a", a), ("metric_b", b)))
    return {"value_a": value_a, "value_b": value_b, "delta": NAN, "p_value": NAN, "undefined": cause}


def _unresampled(a: np.ndarray, b: np.ndarray, human: np.ndarray, statistic: str, n_units: int) -> Optional[Dict]:
    """Where there are too few units to resample: the values and their difference, NaN p-values, the cause."""
    reason = too_few_units(n_units, f"the p-value of the {statistic} difference")
    if reason is None:
        return None
    value_a, value_b = STATISTICS[statistic](a, human), STATISTICS[statistic](b, human)
    return {"value_a": value_a, "value_b": value_b, "delta": value_a - value_b, "p_value": NAN, "undefined": reason}


def paired_bootstrap(metric_a, metric_b, human, *, statistic: str = "kendall_tau_c",
                     units: Optional[Sequence] = None, resamples: int = 1000, seed: int = 0,
                     confidence: float = 0.95, alternative: str = "two-sided", nan_policy: str = "raise") -> Dict:
    """Bootstrap of ``statistic(A) − statistic(B)``: the same units (``units``: one label per row, rows with the
    same label drawn together; default every row) are drawn for both metrics."""
    a, b, human, units, omitted = _inputs(metric_a, metric_b, human, statistic, alternative, resamples, units,
                                          nan_policy)
    codes, n_units = unit_codes(units, len(human))
    common = {"test": "paired bootstrap", "statistic": statistic, "confidence": confidence, "alternative": alternative,
              "resamples": resamples, "units": n_units, "seed": seed, "omitted": omitted}
    undefined = _undefined_comparison(a, b, human, statistic) or _unresampled(a, b, human, statistic, n_units)
    if undefined:
        return {**common, **undefined, "ci": [NAN, NAN], "undefined_resamples": 0}
    resampler = Resampler(human, codes, n_units, statistic)
    prepared_a, prepared_b = resampler.prepare(a), resampler.prepare(b)
    deltas = np.concatenate([resampler.bootstrap(prepared_a, c) - resampler.bootstrap(prepared_b, c)
                             for c in bootstrap_counts(n_units, resamples, seed)])
    value_a, value_b = STATISTICS[statistic](a, human), STATISTICS[statistic](b, human)
    low, high = percentile_interval(deltas, confidence)
    return {**common, "value_a": value_a, "value_b": value_b, "delta": value_a - value_b,
            "ci": [float(low), float(high)], "p_value": bootstrap_p(deltas, alternative),
            "undefined_resamples": undefined_resamples(deltas)}


def paired_permutation(metric_a, metric_b, human, *, statistic: str = "kendall_tau_c",
                       units: Optional[Sequence] = None, resamples: int = 1000, seed: int = 0,
                       alternative: str = "two-sided", nan_policy: str = "raise") -> Dict:
    """PERM-BOTH permutation test of ``statistic(A) − statistic(B)``: both metrics z-scored, each unit's rows
    swapped between A and B with probability ½ (all rows of a unit together); the observed difference the
    permutations are compared with is the z-scored metrics' (``delta`` reports the raw scores')."""
    a, b, human, units, omitted = _inputs(metric_a, metric_b, human, statistic, alternative, resamples, units,
                                          nan_policy)
    codes, n_units = unit_codes(units, len(human))
    common = {"test": "paired permutation", "statistic": statistic, "alternative": alternative,
              "resamples": resamples, "units": n_units, "seed": seed, "omitted": omitted}
    undefined = _undefined_comparison(a, b, human, statistic) or _unresampled(a, b, human, statistic, n_units)
    if undefined:
        return {**common, **undefined, "undefined_resamples": 0}
    resampler = Resampler(human, codes, n_units, statistic)
    prepared_a, prepared_b = resampler.prepare(a), resampler.prepare(b)
    cross = resampler.cross(prepared_a, prepared_b)
    null = np.concatenate([resampler.permuted(prepared_a, prepared_b, cross, s)
                           - resampler.permuted(prepared_a, prepared_b, cross, 1 - s)
                           for s in swap_masks(n_units, resamples, seed)])
    value_a, value_b = STATISTICS[statistic](a, human), STATISTICS[statistic](b, human)
    observed = resampler.observed(prepared_a, prepared_b, cross)
    warn_undefined_resamples(null, "the permuted difference")
    return {**common, "value_a": value_a, "value_b": value_b, "delta": value_a - value_b,
            "p_value": permutation_p(null, observed, alternative), "undefined_resamples": undefined_resamples(null)}


def williams_test(r_a: float, r_b: float, r_ab: float, n: int, *, alternative: str = "greater") -> Dict:
    """Williams' t for two dependent correlations sharing the human scores (Steiger 1980, eq. 7; Graham & Baldwin
    2014): ``r_a``, ``r_b`` = each metric's Pearson r with people, ``r_ab`` = the metrics' r with each other.
    An undefined correlation, or a t of 0/0 (e.g. two metrics that are linear in each other), gives NaN t and p."""
    if alternative not in ALTERNATIVES:
        raise InputError(f"alternative: {alternative!r} is not one of {ALTERNATIVES}")
    if n <= 3:
        raise InputError(f"n: Williams' test needs more than 3 rows, got {n}")
    out = {"test": "williams", "df": n - 3, "alternative": alternative}
    if np.isnan([r_a, r_b, r_ab]).any():
        warn_undefined("Williams' t", "a correlation it needs is undefined (NaN)")
        return {**out, "t": NAN, "p_value": NAN}
    determinant = 1 - r_a ** 2 - r_b ** 2 - r_ab ** 2 + 2 * r_a * r_b * r_ab
    mean = (r_a + r_b) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (r_a - r_b) * np.sqrt((n - 1) * (1 + r_ab)) / np.sqrt(
            2 * (n - 1) / (n - 3) * determinant + mean ** 2 * (1 - r_ab) ** 3)
    if not np.isfinite(t):
        warn_undefined("Williams' t", f"its denominator is 0 (r_a={r_a:.6g}, r_b={r_b:.6g}, r_ab={r_ab:.6g}: "
                                      f"the metrics are linear in each other or in the human scores)")
        return {**out, "t": NAN, "p_value": NAN}
    p = {"greater": stats.t.sf(t, n - 3), "less": stats.t.cdf(t, n - 3),
         "two-sided": 2 * stats.t.sf(abs(t), n - 3)}[alternative]
    return {**out, "t": float(t), "p_value": float(min(1.0, p))}


def williams(metric_a, metric_b, human, *, alternative: str = "two-sided", nan_policy: str = "raise") -> Dict:
    """Williams' test of Pearson(A, human) − Pearson(B, human) over the rows (which it takes as independent)."""
    a, b, human, _, omitted = _inputs(metric_a, metric_b, human, None, alternative, 1, None, nan_policy)
    r_a, r_b, r_ab = pearson(a, human), pearson(b, human), quiet(pearson, a, b)
    return {**williams_test(r_a, r_b, r_ab, len(human), alternative=alternative), "value_a": r_a, "value_b": r_b,
            "r_ab": r_ab, "delta": r_a - r_b, "omitted": omitted}


def correct_pairs(score_a, score_b, prefers_a, *, ties: str = "wrong") -> np.ndarray:
    """Per pair, whether the metric orders the two captions as people did (the rule of
    :func:`capeval.functional.correlation.pairwise_correct`: a metric tie is wrong, or ½ with ``ties="half"``)."""
    if ties not in ("wrong", "half"):
        raise InputError(f"ties: {ties!r} is not 'wrong' or 'half'")
    return pairwise_correct(score_a, score_b, prefers_a, ties=ties)


def correct_table(values, field: str) -> np.ndarray:
    """draws × pairs outcomes (1 right, 0 wrong, ½ a tie counted half); anything else (NaN: a pair no metric score
    ordered) is an ``InputError`` naming the pairs, and so is a table without pairs."""
    table = np.atleast_2d(np.asarray(values, dtype=float))
    if table.ndim != 2 or table.shape[1] == 0:
        raise InputError(f"{field}: expected draws x pairs outcomes with at least one pair, got shape {table.shape}")
    bad = np.flatnonzero(~np.isin(table, (0.0, 0.5, 1.0)).all(axis=0))
    if len(bad):
        raise InputError(f"{field}: outcomes must be 0, 0.5 or 1; not so for the pair columns at "
                         f"{describe_rows(bad, table.shape[1])}, e.g. {table[:, bad[0]].tolist()}")
    return table


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
    ca, cb = correct_table(correct_a, "correct_a"), correct_table(correct_b, "correct_b")
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
    reason = too_few_units(n_units, "the p-value of the accuracy difference")
    if reason is not None:
        return {"value_a": value_a, "value_b": value_b, "delta": value_a - value_b, "ci": [NAN, NAN],
                "confidence": confidence, "p_bootstrap": NAN, "p_permutation": NAN, "alternative": alternative,
                "undefined": reason}
    deltas = np.concatenate([resampler.value(sums_a, c) - resampler.value(sums_b, c)
                             for c in bootstrap_counts(n_units, resamples, seed)])
    null = np.concatenate([resampler.permuted(sums_a, sums_b, s) - resampler.permuted(sums_a, sums_b, 1 - s)
                           for s in swap_masks(n_units, resamples, seed)])
    low, high = percentile_interval(deltas, confidence)
    return {"value_a": value_a, "value_b": value_b, "delta": value_a - value_b, "ci": [float(low), float(high)],
            "confidence": confidence, "p_bootstrap": bootstrap_p(deltas, alternative),
            "p_permutation": permutation_p(null, value_a - value_b, alternative), "alternative": alternative}
