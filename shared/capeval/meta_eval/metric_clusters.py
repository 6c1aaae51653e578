"""Several metrics on one human-judgment benchmark: bootstrap CIs, all pairwise one-sided tests, and WMT-style
significance clusters (:mod:`capeval.statistics.clusters`): metrics sorted by their agreement with people, higher
first; a metric opens a new rank when some metric of the current rank is significantly better than it.

Multiple comparisons: the ``m(m−1)/2`` one-sided p-values of a benchmark are one family, adjusted with
``correction`` (:func:`capeval.statistics.corrections.adjust`): ``"holm"`` (default), so the chance of any false
"better" in the table is at most ``alpha``; ``"bonferroni"``; ``"none"`` is WMT's practice (each test at ``alpha``).

A metric whose statistic is undefined on the benchmark (constant scores; every metric where the human scores are
constant) gets no rank: it is listed under ``undefined`` with the cause, its value and CI are NaN, and it takes no
part in the tests (nor in the family the correction counts).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from capeval.core.errors import InputError
from capeval.functional.correlation import STATISTICS, warn_undefined
from capeval.meta_eval.resampled import AccuracyResampler, Resampler
from capeval.meta_eval.significance import correct_table, paired_columns, undefined_of
from capeval.statistics.clusters import assign_ranks, best_first
from capeval.statistics.corrections import adjust
from capeval.statistics.p_values import bootstrap_p, permutation_p
from capeval.statistics.resampling import bootstrap_counts, percentile_interval, swap_masks, too_few_units, unit_codes

TESTS = ("permutation", "bootstrap")


def _cluster(names: List[str], values: np.ndarray, pair_p, alpha: float, correction: str) -> Dict:
    order = best_first(values)
    pairs = [(i, j) for i in range(len(order)) for j in range(i + 1, len(order))]
    raw = np.array([pair_p(order[i], order[j]) for i, j in pairs])
    adjusted = adjust(raw, correction)
    significant = np.zeros((len(names), len(names)), bool)
    for (i, j), p in zip(pairs, adjusted):
        significant[i, j] = p <= alpha
    ranks = assign_ranks(significant)
    return {"order": [names[k] for k in order], "ranks": {names[k]: r for k, r in zip(order, ranks)},
            "p_values": {f"{names[order[i]]} > {names[order[j]]}": float(p) for (i, j), p in zip(pairs, raw)},
            "p_adjusted": {f"{names[order[i]]} > {names[order[j]]}": float(p) for (i, j), p in zip(pairs, adjusted)},
            "alpha": alpha, "correction": correction}


def _check(test: str, alpha: float, resamples: int) -> None:
    if test not in TESTS:
        raise InputError(f"test: {test!r} is not one of {TESTS}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha: {alpha} is not in (0, 1)")
    if resamples < 1:
        raise InputError(f"resamples: need at least 1, got {resamples}")


def _bootstrap_values(resampler: Resampler, scores: np.ndarray, n_units: int, resamples: int, seed: int) -> np.ndarray:
    """One metric's statistic over the seeded resamples (the same draws for every metric: the seed regenerates them)."""
    prepared = resampler.prepare(scores)
    return np.concatenate([resampler.bootstrap(prepared, c) for c in bootstrap_counts(n_units, resamples, seed)])


def correlation_clusters(scores: Mapping[str, Sequence[float]], human, *, statistic: str,
                         units: Optional[Sequence] = None, test: str = "permutation", resamples: int = 1000,
                         seed: int = 0, confidence: float = 0.95, alpha: float = 0.05,
                         correction: str = "holm", nan_policy: str = "raise") -> Dict:
    """Value, bootstrap CI and cluster rank of each metric, from one-sided paired tests of every pair (higher vs
    lower): the permutation test (PERM-BOTH, WMT's) or the paired bootstrap. One seed for every draw.

    ``nan_policy="omit"`` drops every row where the human score or any metric's score is missing (``omitted``)."""
    _check(test, alpha, resamples)
    if statistic not in STATISTICS:
        raise InputError(f"statistic: unknown {statistic!r}; use one of {sorted(STATISTICS)}")
    names = list(scores)
    if len(names) < 1:
        raise InputError("scores: no metric given")
    fields = {f"scores[{m!r}]": m for m in names}
    kept, units, omitted = paired_columns({"human": human, **{f: scores[m] for f, m in fields.items()}}, units,
                                          nan_policy)
    human = kept.pop("human")
    arrays = {fields[f]: x for f, x in kept.items()}
    undefined = undefined_of(arrays, human)
    for metric, reason in undefined.items():
        warn_undefined(f"{statistic} of {metric}", reason)
    ranked = [m for m in names if m not in undefined]
    codes, n_units = unit_codes(units, len(human))
    resampler = Resampler(human, codes, n_units, statistic)
    values = np.array([STATISTICS[statistic](arrays[m], human) for m in ranked])
    unresampled = too_few_units(n_units, "the CIs and p-values") if ranked else None
    boot = np.stack([_bootstrap_values(resampler, arrays[m], n_units, resamples, seed) for m in ranked], 1) \
        if ranked and not unresampled else np.full((resamples, len(ranked)), np.nan)

    def pair_p(i: int, j: int) -> float:
        if unresampled:
            return float("nan")
        if test == "bootstrap":
            return bootstrap_p(boot[:, i] - boot[:, j], "greater")
        a, b = resampler.prepare(arrays[ranked[i]]), resampler.prepare(arrays[ranked[j]])  # one pair at a time
        cross = resampler.cross(a, b)
        null = np.concatenate([resampler.permuted(a, b, cross, s) - resampler.permuted(a, b, cross, 1 - s)
                               for s in swap_masks(n_units, resamples, seed)])
        return permutation_p(null, resampler.observed(a, b, cross), "greater")

    low, high = percentile_interval(boot, confidence, f"{statistic}")
    ci = {m: [float(lo), float(hi)] for m, lo, hi in zip(ranked, low, high)}
    out = _cluster(ranked, values, pair_p, alpha, correction)
    return {"statistic": statistic,
            "values": {m: float(values[ranked.index(m)]) if m in ci else float("nan") for m in names},
            "ci": {m: ci.get(m, [float("nan"), float("nan")]) for m in names}, **out, "undefined": undefined,
            "test": test, "resamples": resamples, "seed": seed, "units": n_units, "confidence": confidence,
            "omitted": len(omitted)}


def accuracy_clusters(correct: Mapping[str, np.ndarray], *, categories: Optional[Sequence] = None,
                      units: Optional[Sequence] = None, test: str = "permutation", resamples: int = 1000,
                      seed: int = 0, confidence: float = 0.95, alpha: float = 0.05, correction: str = "holm") -> Dict:
    """As :func:`correlation_clusters` for pairwise accuracy: ``correct[metric]`` is draws × pairs."""
    _check(test, alpha, resamples)
    names = list(correct)
    if len(names) < 1:
        raise InputError("correct: no metric given")
    arrays = [correct_table(correct[m], f"correct[{m!r}]") for m in names]
    n = arrays[0].shape[1]
    if any(a.shape != arrays[0].shape for a in arrays):
        raise InputError(f"correct: every metric needs the same draws × pairs shape {arrays[0].shape}")
    categories = ["all"] * n if categories is None else list(categories)
    codes, n_units = unit_codes(units, n)
    resampler = AccuracyResampler(categories, codes, n_units)
    sums = [resampler.sums(a) for a in arrays]
    values = np.array([resampler.value(s, np.ones((1, n_units)))[0] for s in sums])
    unresampled = too_few_units(n_units, "the CIs and p-values")
    boot = np.full((resamples, len(names)), np.nan) if unresampled else np.concatenate(
        [np.stack([resampler.value(s, c) for s in sums], 1) for c in bootstrap_counts(n_units, resamples, seed)])

    def pair_p(i: int, j: int) -> float:
        if unresampled:
            return float("nan")
        if test == "bootstrap":
            return bootstrap_p(boot[:, i] - boot[:, j], "greater")
        null = np.concatenate([resampler.permuted(sums[i], sums[j], s) - resampler.permuted(sums[i], sums[j], 1 - s)
                               for s in swap_masks(n_units, resamples, seed)])
        return permutation_p(null, values[i] - values[j], "greater")

    low, high = percentile_interval(boot, confidence)
    out = _cluster(names, values, pair_p, alpha, correction)
    return {"statistic": "pairwise_accuracy", "values": dict(zip(names, values.tolist())),
            "ci": {m: [float(lo), float(hi)] for m, lo, hi in zip(names, low, high)}, **out, "undefined": {},
            "test": test, "resamples": resamples, "seed": seed, "units": n_units, "confidence": confidence,
            "omitted": 0}
