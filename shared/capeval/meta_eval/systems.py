"""Several captioning systems scored on the same images: is B really better than A?

Input: ``{system: {metric: CorpusStatistics}}`` (:mod:`capeval.functional.corpus_statistics`), the same images
(units) in the same order for every system and metric. For each metric, higher is better.

- **Value and CI**: the metric's corpus value, and a percentile bootstrap interval over images: every resample draws
  the images with replacement and recomputes the corpus value from the summed statistics of the drawn images (BLEU
  and METEOR as on a corpus of those images; mean metrics as the mean).
- **paired-bs** (sacrebleu ``--paired-bs``, Koehn 2004 as Moses'): the same resamples for both systems;
  ``p = (#(|δ*| − mean|δ*| > |δ|) + 1) / (R + 1)``.
- **paired-ar** (sacrebleu ``--paired-ar``, approximate randomisation as multeval): each image's statistics are
  swapped between the two systems with probability ½; ``p = (#(|δ*| > |δ|) + 1) / (R + 1)``. Both tests two-sided.
- One seed gives every draw (:mod:`capeval.meta_eval.resampling`): the same resamples and swaps for every metric,
  system and pair (the bootstrap draws equal sacrebleu's ``default_rng(seed).choice``; its AR draws booleans from
  another stream).
- **Multiple comparisons**: each test's p-values over every metric × pair of systems are one family, adjusted with
  ``correction`` (Holm by default, :func:`capeval.meta_eval.clusters.adjust`); a difference is ``significant`` when
  both tests' adjusted p-values are at most ``alpha``.
- **Clusters** per metric (:func:`capeval.meta_eval.clusters.assign_ranks`): systems sorted by value; a system
  opens a new rank when a system of the current rank is significantly better.

Undefined (NaN with the cause under ``undefined`` and an ``UndefinedStatisticWarning``; no finite CI or p-value,
no rank): a value that is not finite; every CI and p-value with fewer than 2 images; the p-values of a pair whose
difference is the same on every resample (identical systems; a mean metric whose per-image difference is constant),
where sacrebleu would report its floor ``1/(R + 1)``.
"""

from __future__ import annotations

import math
import warnings
from itertools import combinations
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from capeval.core.errors import InputError
from capeval.functional.corpus_statistics import CorpusStatistics
from capeval.functional.correlation import warn_undefined
from capeval.meta_eval.clusters import CORRECTIONS, adjust, assign_ranks
from capeval.meta_eval.resampling import bootstrap_counts, swap_masks
from capeval.meta_eval.significance import (
    percentile_interval, sacrebleu_bootstrap_p, sacrebleu_randomization_p, too_few_units, undefined_resamples,
    warn_undefined_resamples,
)

NAN = float("nan")
TESTS = ("paired-bs", "paired-ar")
SHOWN_UNITS = 5
SPREAD_RTOL = 1e-9  # resampled differences within this of each other (relative): the same on every resample


def compare_systems(statistics: Mapping[str, Mapping[str, CorpusStatistics]], *, baseline: Optional[str] = None,
                    resamples: int = 1000, seed: int = 12345, confidence: float = 0.95, alpha: float = 0.05,
                    correction: str = "holm") -> Dict:
    """Values, bootstrap CIs, paired-bs and paired-ar tests of every pair of systems on every metric, the family's
    adjusted p-values and the significance clusters (see the module docstring).

    ``comparisons`` lists every pair (system order; with ``baseline``, the baseline first, so its pairs read
    ``system_a = baseline``) for every metric; ``delta = value(system_b) − value(system_a)`` with ``delta_ci`` the
    percentile interval of the resampled differences. ``undefined[metric][system or "a vs b"]``: the cause."""
    names, keys, n_units = _check(statistics, baseline, resamples, confidence, alpha, correction)
    order = ([baseline] if baseline is not None else []) + [s for s in names if s != baseline]
    pairs = list(combinations(range(len(order)), 2))
    table = {key: [statistics[name][key] for name in order] for key in keys}
    values = {key: np.array([_value(s) for s in table[key]]) for key in keys}
    undefined: Dict[str, Dict[str, str]] = {key: {} for key in keys}
    for key in keys:
        for name, value in zip(order, values[key]):
            if not np.isfinite(value):
                undefined[key][name] = _undefined(f"{key} of {name}", "the corpus value is not finite (nothing to "
                                                  "count on these images)")
    unresampled = too_few_units(n_units, "every CI and p-value")
    boot = {key: np.full((resamples, len(order)), NAN) for key in keys}
    null = {key: np.full((resamples, len(pairs)), NAN) for key in keys}
    if unresampled is None:
        _resample(table, boot, null, pairs, n_units, resamples, seed)
    systems = {name: {} for name in names}
    for key in keys:
        for k, name in enumerate(order):
            systems[name][key] = _system_entry(values[key][k], boot[key][:, k], confidence, f"{key} of {name}",
                                               undefined[key].get(name) or unresampled)
    comparisons = [_comparison(order, key, i, j, values[key], boot[key], null[key][:, p], confidence, undefined[key],
                               unresampled)
                   for p, (i, j) in enumerate(pairs) for key in keys]
    floor = _adjust(comparisons, correction, alpha, resamples)
    return {"systems": systems, "comparisons": comparisons,
            "clusters": {key: _clusters(order, values[key], comparisons, key, undefined[key]) for key in keys},
            "undefined": {key: causes for key, causes in undefined.items() if causes},
            "significance": {"resamples": resamples, "seed": seed, "confidence": confidence, "alpha": alpha,
                             "correction": correction, "tests": list(TESTS), "units": "images", "n_units": n_units,
                             "family": "every metric × pair of systems, each test adjusted on its own",
                             "significant": "both tests' adjusted p-values at most alpha", "baseline": baseline,
                             "smallest_adjusted_p": floor}}


def check_options(resamples: int, confidence: float = 0.95, alpha: float = 0.05, correction: str = "holm") -> None:
    """The comparison's own options, checkable before anything is scored."""
    if resamples < 1:
        raise InputError(f"resamples: need at least 1, got {resamples}")
    for field, value in (("confidence", confidence), ("alpha", alpha)):
        if not 0 < value < 1:
            raise InputError(f"{field}: {value} is not in (0, 1)")
    if correction not in CORRECTIONS:
        raise InputError(f"correction: {correction!r} is not one of {CORRECTIONS}")


def _check(statistics, baseline, resamples: int, confidence: float, alpha: float,
           correction: str) -> Tuple[List[str], List[str], int]:
    check_options(resamples, confidence, alpha, correction)
    names = list(statistics)
    if not names:
        raise InputError("statistics: no system given")
    if baseline is not None and baseline not in statistics:
        raise InputError(f"baseline: {baseline!r} is not one of the systems {names}")
    keys = list(statistics[names[0]])
    if not keys:
        raise InputError(f"statistics[{names[0]!r}]: no metric given")
    n_units = None
    for name in names:
        _check_keys(name, list(statistics[name]), names[0], keys)
        for key in keys:
            n_units = _check_statistics(f"statistics[{name!r}][{key!r}]", statistics[name][key], n_units)
    return names, keys, n_units or 0


def _check_keys(name: str, own: List[str], first: str, keys: List[str]) -> None:
    missing, extra = [k for k in keys if k not in own], [k for k in own if k not in keys]
    if missing or extra:
        problem = "; ".join(f"{what} {found}" for what, found in (("missing", missing), ("extra", extra)) if found)
        raise InputError(f"statistics[{name!r}]: metrics differ from {first!r}'s: {problem}")


def _check_statistics(field: str, stats, n_units: Optional[int]) -> int:
    if not isinstance(stats, CorpusStatistics):
        raise InputError(f"{field}: expected a CorpusStatistics, got {type(stats).__name__}")
    per_unit = np.asarray(stats.per_unit)
    if per_unit.ndim != 2:
        raise InputError(f"{field}: per-unit statistics of shape {per_unit.shape}, expected (units, k)")
    if n_units is not None and len(per_unit) != n_units:
        raise InputError(f"{field}: {len(per_unit)} units, expected {n_units} (every system and metric on the same "
                         f"images)")
    bad = np.flatnonzero(~np.isfinite(per_unit).all(axis=1))
    if len(bad):
        shown = ", ".join(str(int(u)) for u in bad[:SHOWN_UNITS]) + (", ..." if len(bad) > SHOWN_UNITS else "")
        raise InputError(f"{field}: non-finite statistics at units {shown} ({len(bad)} of {len(per_unit)} units)")
    return len(per_unit)


def _value(stats: CorpusStatistics) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        return stats.value()


def _undefined(what: str, cause: str) -> str:
    warn_undefined(what, cause, stacklevel=5)
    return cause


def _resample(table, boot, null, pairs, n_units: int, resamples: int, seed: int) -> None:
    """Fill ``boot[key][r, system]`` (bootstrap values) and ``null[key][r, pair]`` (|δ| of the swapped pair) from
    one stream of draws each, shared by every metric, system and pair."""
    with np.errstate(invalid="ignore", divide="ignore"):
        start = 0
        for counts in bootstrap_counts(n_units, resamples, seed, desc="bootstrap (systems)"):
            rows = slice(start, start + len(counts))
            for key, column in table.items():
                for k, stats in enumerate(column):
                    boot[key][rows, k] = stats.resampled(counts)
            start += len(counts)
        start = 0
        for swaps in swap_masks(n_units, resamples, seed, desc="randomization (systems)"):
            rows = slice(start, start + len(swaps))
            for key, column in table.items():
                for p, (i, j) in enumerate(pairs):
                    mine, theirs = column[i].swapped(column[j], swaps)
                    null[key][rows, p] = np.abs(theirs - mine)
            start += len(swaps)


def _system_entry(value: float, resampled: np.ndarray, confidence: float, what: str, cause: Optional[str]) -> Dict:
    if cause is not None:
        return {"value": float(value), "ci": [NAN, NAN]}
    low, high = percentile_interval(resampled, confidence, what)
    return {"value": float(value), "ci": [float(low), float(high)]}


def _same_everywhere(deltas: np.ndarray) -> bool:
    finite = deltas[np.isfinite(deltas)]
    return len(finite) > 0 and np.ptp(finite) <= SPREAD_RTOL * np.abs(finite).max()


def _comparison(order, key: str, i: int, j: int, values: np.ndarray, boot: np.ndarray, null: np.ndarray,
                confidence: float, undefined: Dict[str, str], unresampled: Optional[str]) -> Dict:
    a, b = order[i], order[j]
    label = f"{a} vs {b}"
    delta = float(values[j] - values[i])
    deltas = boot[:, j] - boot[:, i]
    entry = {"system_a": a, "system_b": b, "metric": key, "delta": delta}
    cause = "; ".join(f"{s}: {undefined[s]}" for s in (a, b) if s in undefined) or unresampled
    if cause is None and _same_everywhere(deltas):
        cause = _undefined(f"the {key} p-values of {label}", "the difference is the same on every resample "
                           "(identical systems, or the same per-image difference everywhere): no variation to test "
                           "it against")
        undefined[label] = cause
        low, high = percentile_interval(deltas, confidence)
        return {**entry, "delta_ci": [float(low), float(high)], **_no_test(cause)}
    if cause is not None:
        if unresampled is not None:
            undefined[label] = cause
        return {**entry, "delta": delta if unresampled else NAN, "delta_ci": [NAN, NAN], **_no_test(cause)}
    low, high = percentile_interval(deltas, confidence, f"the {key} difference of {label}")
    warn_undefined_resamples(null, f"the {key} randomization of {label}")
    return {**entry, "delta_ci": [float(low), float(high)], "p_bootstrap": sacrebleu_bootstrap_p(deltas, delta),
            "p_randomization": sacrebleu_randomization_p(null, delta),
            "undefined_resamples": {"paired-bs": undefined_resamples(deltas), "paired-ar": undefined_resamples(null)},
            "undefined": None}


def _no_test(cause: str) -> Dict:
    return {"p_bootstrap": NAN, "p_randomization": NAN, "undefined_resamples": {"paired-bs": 0, "paired-ar": 0},
            "undefined": cause}


def _adjust(comparisons: List[Dict], correction: str, alpha: float, resamples: int) -> float:
    """Adjust each test's defined p-values as one family (undefined ones take no part), then mark significance.
    Returns the smallest adjusted p-value the resamples allow (``1/(R + 1)`` adjusted over the family), with a
    warning where it exceeds ``alpha``: then no difference can be significant, however large."""
    family = sum(not np.isnan(c["p_bootstrap"]) for c in comparisons)
    floor = float(adjust(np.full(max(1, family), 1 / (resamples + 1)), correction).min())
    if family and floor > alpha:
        warnings.warn(f"{resamples} resamples cannot show any of {family} differences significant at alpha={alpha} "
                      f"after {correction} correction (smallest adjusted p = {floor:.3g}); use at least "
                      f"{math.ceil(family / alpha) - 1} resamples", UserWarning, stacklevel=3)
    for test in ("bootstrap", "randomization"):
        raw = np.array([c[f"p_{test}"] for c in comparisons], dtype=float)
        adjusted = np.full(len(raw), NAN)
        defined = np.flatnonzero(~np.isnan(raw))
        adjusted[defined] = adjust(raw[defined], correction)
        for c, p in zip(comparisons, adjusted):
            c[f"p_{test}_adjusted"] = float(p)
    for c in comparisons:
        c["significant"] = bool(c["p_bootstrap_adjusted"] <= alpha and c["p_randomization_adjusted"] <= alpha)
    return floor


def _clusters(order: List[str], values: np.ndarray, comparisons: List[Dict], key: str,
              undefined: Dict[str, str]) -> Dict[str, int]:
    ranked = sorted((k for k, name in enumerate(order) if name not in undefined), key=lambda k: -values[k])
    significant = {frozenset((c["system_a"], c["system_b"])) for c in comparisons
                   if c["metric"] == key and c["significant"]}
    names = [order[k] for k in ranked]
    matrix = np.array([[frozenset((x, y)) in significant for y in names] for x in names], dtype=bool).reshape(
        len(names), len(names))
    return dict(zip(names, assign_ranks(matrix)))
