"""Several captioning systems scored on the same images: is B really better than A?

Input: ``{system: {metric: CorpusStatistics}}`` (:mod:`capeval.core.corpus_statistics`), the same images
(units) in the same order for every system and metric. Higher is better unless ``higher_is_better[metric]`` says
otherwise (an error rate, a distance): only the clusters' order depends on it (every test is two-sided).

- **Value and CI**: the metric's corpus value, and a percentile bootstrap interval over images: every resample draws
  the images with replacement and recomputes the corpus value from the summed statistics of the drawn images (BLEU
  and METEOR as on a corpus of those images; mean metrics as the mean).
- **paired-bs** (Koehn 2004, the statistic of sacrebleu ``--paired-bs``): the same resamples for both systems; the
  absolute resampled differences centred on their mean against the absolute observed difference.
- **paired-ar** (randomisation, sacrebleu ``--paired-ar``): each image's statistics are swapped between the two
  systems. With ``p_values="noreen"`` (the default) and at most :data:`EXACT_UNITS` images, every one of the 2ⁿ
  swap patterns is enumerated (the exact sign-flip test, ``p = #(|δ*| ≥ |δ|) / 2ⁿ ≥ 2 / 2ⁿ``); above that, ``R``
  swap patterns are drawn (each unit swapped with probability ½).
- **Counting** (``p_values``): ``"noreen"`` counts the resamples that tie the observed difference, as Noreen (1989)
  and Riezler & Maxwell (2005) define the tests: ``p = (#(stat* ≥ stat) + 1) / (R + 1)``, valid at any number of
  images. ``"sacrebleu"`` is sacrebleu 2's formula, ``(#(stat* > stat) + 1) / (R + 1)``, for comparing with
  published MT numbers: its strict ``>`` never counts the ties (the unswapped draw always ties), so it is
  anti-conservative on few images; with it, a pair whose difference is the same on every resample has no p-value
  (sacrebleu would report its floor ``1/(R + 1)``).
- One seed gives every draw (:mod:`capeval.statistics.resampling`): the same resamples and swaps for every metric,
  system and pair (the bootstrap draws equal sacrebleu's ``default_rng(seed).choice``; its AR draws booleans from
  another stream).
- **Multiple comparisons**: each test's p-values over every metric × pair of systems are one family, adjusted with
  ``correction`` (Holm by default, :func:`capeval.statistics.corrections.adjust`); a difference is ``significant`` when
  both tests' adjusted p-values are at most ``alpha``: the bootstrap, biased on few images, never marks a
  difference alone. ``significance`` states the smallest p-value each test can give (n, R) and the family size;
  when their adjusted floor exceeds ``alpha`` no difference can be marked, and a warning says so. When no test ran
  (one system, fewer than 2 images, every difference undefined) the family size is 0 and ``smallest_p`` and
  ``smallest_adjusted_p`` are ``None``: every p-value given is a probability, or NaN where its test did not run.
- **Clusters** per metric (:func:`capeval.statistics.clusters.significance_clusters`): systems sorted best first
  (by value, in the metric's direction); a system opens a new rank when a system of the current rank is
  significantly better.

Undefined (NaN with the cause under ``undefined`` and an ``UndefinedStatisticWarning``; no finite CI or p-value,
no rank): a value that is not finite; every CI and p-value with fewer than 2 images. Refused: fewer resamples than a
percentile interval at ``confidence`` needs (:func:`minimum_resamples`).
"""

from __future__ import annotations

import math
import warnings
from itertools import combinations
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from capeval.core.corpus_statistics import CorpusStatistics
from capeval.core.errors import InputError
from capeval.functional.correlation import warn_undefined
from capeval.statistics.clusters import significance_clusters
from capeval.statistics.corrections import CORRECTIONS, adjust
from capeval.statistics.p_values import (
    exact_randomization_p, noreen_bootstrap_p, noreen_randomization_p, sacrebleu_bootstrap_p, sacrebleu_randomization_p,
)
from capeval.statistics.resampling import (
    bootstrap_counts, percentile_interval, sign_patterns, swap_masks, too_few_units, undefined_resamples,
    warn_undefined_resamples,
)

NAN = float("nan")
TESTS = ("paired-bs", "paired-ar")
P_VALUES = ("noreen", "sacrebleu")
EXACT_UNITS = 16  # up to this many images the randomization test enumerates all 2ⁿ swap patterns
SHOWN_UNITS = 5
SPREAD_RTOL = 1e-9  # resampled differences within this of each other (relative): the same on every resample


def compare_systems(statistics: Mapping[str, Mapping[str, CorpusStatistics]], *, baseline: Optional[str] = None,
                    resamples: int = 1000, seed: int = 12345, confidence: float = 0.95, alpha: float = 0.05,
                    correction: str = "holm", p_values: str = "noreen",
                    undefined: Optional[Mapping[str, Mapping[str, str]]] = None,
                    higher_is_better: Optional[Mapping[str, bool]] = None) -> Dict:
    """Values, bootstrap CIs, paired-bs and paired-ar tests of every pair of systems on every metric, the family's
    adjusted p-values and the significance clusters (see the module docstring).

    ``comparisons`` lists every pair (system order; with ``baseline``, the baseline first, so its pairs read
    ``system_a = baseline``) for every metric; ``delta = value(system_b) − value(system_a)`` with ``delta_ci`` the
    percentile interval of the resampled differences. ``undefined[metric][system or "a vs b"]``: the cause; given,
    ``undefined[metric][system]`` names values the caller knows are undefined (a mean over images where the metric
    is NaN), with their cause: their statistics are not checked, and they get no CI, comparison or rank.
    ``higher_is_better[metric]``: the metric's direction, which orders its clusters (True for a metric not named)."""
    given = {key: dict(causes) for key, causes in (undefined or {}).items()}
    names, keys, n_units = _check(statistics, baseline, resamples, confidence, alpha, correction, p_values, given)
    better = _directions(higher_is_better or {}, keys)
    exact = p_values == "noreen" and n_units <= EXACT_UNITS
    order = ([baseline] if baseline is not None else []) + [s for s in names if s != baseline]
    pairs = list(combinations(range(len(order)), 2))
    table = {key: [statistics[name][key] for name in order] for key in keys}
    values = {key: np.array([_value(s) for s in table[key]]) for key in keys}
    undefined: Dict[str, Dict[str, str]] = {key: {} for key in keys}
    for key in keys:
        for k, name in enumerate(order):
            if name in given.get(key, {}):
                undefined[key][name] = _undefined(f"{key} of {name}", given[key][name])
                values[key][k] = NAN
            elif not np.isfinite(values[key][k]):
                undefined[key][name] = _undefined(f"{key} of {name}", "the corpus value is not finite (nothing to "
                                                  "count on these images)")
    unresampled = too_few_units(n_units, "every CI and p-value")
    boot = {key: np.full((resamples, len(order)), NAN) for key in keys}
    draws = 1 << (n_units - 1) if exact and unresampled is None else resamples
    null = {key: np.full((draws, len(pairs)), NAN) for key in keys}
    if unresampled is None:
        _resample(table, boot, null, pairs, n_units, resamples, seed, exact)
    systems = {name: {} for name in names}
    for key in keys:
        for k, name in enumerate(order):
            systems[name][key] = _system_entry(values[key][k], boot[key][:, k], confidence, f"{key} of {name}",
                                               undefined[key].get(name) or unresampled)
    tests = _Tests(p_values, exact)
    comparisons = [_comparison(order, key, i, j, values[key], boot[key], null[key][:, p], confidence, undefined[key],
                               unresampled, tests)
                   for p, (i, j) in enumerate(pairs) for key in keys]
    family = sum(not np.isnan(c["p_bootstrap"]) for c in comparisons)
    smallest = _smallest_p(n_units, resamples, exact) if family else None
    floor = _adjust(comparisons, correction, alpha, smallest, family, n_units, resamples)
    return {"systems": systems, "comparisons": comparisons,
            "clusters": {key: _clusters(order, values[key], comparisons, key, undefined[key], better[key])
                         for key in keys},
            "undefined": {key: causes for key, causes in undefined.items() if causes},
            "significance": {"resamples": resamples, "seed": seed, "confidence": confidence, "alpha": alpha,
                             "correction": correction, "tests": list(TESTS), "units": "images", "n_units": n_units,
                             "p_values": p_values, "randomization": "exact" if exact else "sampled",
                             "family": "every metric × pair of systems, each test adjusted on its own",
                             "family_size": family, "significant": "both tests' adjusted p-values at most alpha",
                             "baseline": baseline, "smallest_p": smallest, "smallest_adjusted_p": floor}}


def minimum_resamples(confidence: float) -> int:
    """The fewest resamples a percentile interval at ``confidence`` can rest on: each tail, ``(1 − confidence) / 2``
    of the resamples, must hold at least one (40 at 95 %)."""
    return math.ceil(round(2 / (1 - confidence), 9))


def check_options(resamples: int, confidence: float = 0.95, alpha: float = 0.05, correction: str = "holm",
                  p_values: str = "noreen") -> None:
    """The comparison's own options, checkable before anything is scored."""
    for field, value in (("confidence", confidence), ("alpha", alpha)):
        if not 0 < value < 1:
            raise InputError(f"{field}: {value} is not in (0, 1)")
    least = minimum_resamples(confidence)
    if resamples < least:
        raise InputError(f"resamples: {resamples} is too few for a {confidence:.0%} percentile interval (each "
                         f"{(1 - confidence) / 2:.1%} tail needs at least one resample): use at least {least}")
    if correction not in CORRECTIONS:
        raise InputError(f"correction: {correction!r} is not one of {CORRECTIONS}")
    if p_values not in P_VALUES:
        raise InputError(f"p_values: {p_values!r} is not one of {P_VALUES}")


def _check(statistics, baseline, resamples: int, confidence: float, alpha: float, correction: str,
           p_values: str, given: Dict[str, Dict[str, str]]) -> Tuple[List[str], List[str], int]:
    check_options(resamples, confidence, alpha, correction, p_values)
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
            n_units = _check_statistics(f"statistics[{name!r}][{key!r}]", statistics[name][key], n_units,
                                        finite=name not in given.get(key, {}))
    stray = [(key, name) for key, causes in given.items() for name in causes
             if key not in keys or name not in names]
    if stray:
        raise InputError(f"undefined: {stray[0][1]!r} / {stray[0][0]!r} is not a system / metric of statistics")
    return names, keys, n_units or 0


def _directions(higher_is_better: Mapping[str, bool], keys: List[str]) -> Dict[str, bool]:
    """Each metric's direction: ``higher_is_better[key]`` (a bool) where given, else True."""
    for key, value in higher_is_better.items():
        if key not in keys:
            raise InputError(f"higher_is_better: {key!r} is not a metric of statistics {keys}")
        if not isinstance(value, (bool, np.bool_)):
            raise InputError(f"higher_is_better[{key!r}]: expected True or False, got {value!r}")
    return {key: bool(higher_is_better.get(key, True)) for key in keys}


def _check_keys(name: str, own: List[str], first: str, keys: List[str]) -> None:
    missing, extra = [k for k in keys if k not in own], [k for k in own if k not in keys]
    if missing or extra:
        problem = "; ".join(f"{what} {found}" for what, found in (("missing", missing), ("extra", extra)) if found)
        raise InputError(f"statistics[{name!r}]: metrics differ from {first!r}'s: {problem}")


def _check_statistics(field: str, stats, n_units: Optional[int], finite: bool = True) -> int:
    if not isinstance(stats, CorpusStatistics):
        raise InputError(f"{field}: expected a CorpusStatistics, got {type(stats).__name__}")
    per_unit = np.asarray(stats.per_unit)
    if per_unit.ndim != 2:
        raise InputError(f"{field}: per-unit statistics of shape {per_unit.shape}, expected (units, k)")
    if n_units is not None and len(per_unit) != n_units:
        raise InputError(f"{field}: {len(per_unit)} units, expected {n_units} (every system and metric on the same "
                         f"images)")
    bad = np.flatnonzero(~np.isfinite(per_unit).all(axis=1))
    if finite and len(bad):
        shown = ", ".join(str(int(u)) for u in bad[:SHOWN_UNITS]) + (", ..." if len(bad) > SHOWN_UNITS else "")
        raise InputError(f"{field}: non-finite statistics at units {shown} ({len(bad)} of {len(per_unit)} units)")
    return len(per_unit)


def _value(stats: CorpusStatistics) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        return stats.value()


def _undefined(what: str, cause: str) -> str:
    warn_undefined(what, cause, stacklevel=5)
    return cause


def _resample(table, boot, null, pairs, n_units: int, resamples: int, seed: int, exact: bool) -> None:
    """Fill ``boot[key][r, system]`` (bootstrap values) and ``null[key][r, pair]`` (|δ| of the swapped pair) from
    one stream of draws each (``exact``: every swap pattern instead of drawn swaps), shared by every metric, system
    and pair."""
    with np.errstate(invalid="ignore", divide="ignore"):
        start = 0
        for counts in bootstrap_counts(n_units, resamples, seed, desc="bootstrap (systems)"):
            rows = slice(start, start + len(counts))
            for key, column in table.items():
                for k, stats in enumerate(column):
                    boot[key][rows, k] = stats.resampled(counts)
            start += len(counts)
        start = 0
        patterns = sign_patterns(n_units) if exact else swap_masks(n_units, resamples, seed,
                                                                   desc="randomization (systems)")
        for swaps in patterns:
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


class _Tests:
    """The two tests' p-value functions under a counting rule."""

    def __init__(self, p_values: str, exact: bool):
        self.sacrebleu = p_values == "sacrebleu"
        self.bootstrap = sacrebleu_bootstrap_p if self.sacrebleu else noreen_bootstrap_p
        self.randomization = (sacrebleu_randomization_p if self.sacrebleu else
                              exact_randomization_p if exact else noreen_randomization_p)


def _comparison(order, key: str, i: int, j: int, values: np.ndarray, boot: np.ndarray, null: np.ndarray,
                confidence: float, undefined: Dict[str, str], unresampled: Optional[str], tests: _Tests) -> Dict:
    a, b = order[i], order[j]
    label = f"{a} vs {b}"
    delta = float(values[j] - values[i])
    deltas = boot[:, j] - boot[:, i]
    entry = {"system_a": a, "system_b": b, "metric": key, "delta": delta}
    cause = "; ".join(f"{s}: {undefined[s]}" for s in (a, b) if s in undefined) or unresampled
    if cause is None and tests.sacrebleu and _same_everywhere(deltas):
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
    return {**entry, "delta_ci": [float(low), float(high)], "p_bootstrap": tests.bootstrap(deltas, delta),
            "p_randomization": tests.randomization(null, delta),
            "undefined_resamples": {"paired-bs": undefined_resamples(deltas), "paired-ar": undefined_resamples(null)},
            "undefined": None}


def _no_test(cause: str) -> Dict:
    return {"p_bootstrap": NAN, "p_randomization": NAN, "undefined_resamples": {"paired-bs": 0, "paired-ar": 0},
            "undefined": cause}


def _smallest_p(n_units: int, resamples: int, exact: bool) -> Dict[str, float]:
    """The smallest p-value each test can give on ``n_units`` images (at least 2) with ``resamples`` draws."""
    return {"paired-bs": 1 / (resamples + 1), "paired-ar": 2 / 2 ** n_units if exact else 1 / (resamples + 1)}


def _adjust(comparisons: List[Dict], correction: str, alpha: float, smallest: Optional[Dict[str, float]],
            family: int, n_units: int, resamples: int) -> Optional[float]:
    """Adjust each test's defined p-values as one family of ``family`` tests (undefined ones take no part), then
    mark significance. Returns the smallest adjusted p-value a mark can rest on (the larger of the two tests'
    ``smallest`` p-values, adjusted over the family; ``None`` when no test ran), with a warning where it exceeds
    ``alpha``: then no difference can be significant, however large."""
    floor = None if smallest is None else float(adjust(np.full(family, max(smallest.values())), correction).min())
    if floor is not None and floor > alpha:
        if smallest["paired-ar"] > smallest["paired-bs"]:
            remedy = (f"on {n_units} images the exact randomization test cannot go below p = "
                      f"{smallest['paired-ar']:.3g} (2 of 2^{n_units} swap patterns): more images are needed")
        else:
            remedy = f"use at least {math.ceil(family / alpha) - 1} resamples"
        warnings.warn(f"{resamples} resamples cannot show any of {family} differences significant at alpha={alpha} "
                      f"after {correction} correction on {n_units} images (smallest adjusted p = {floor:.3g}); "
                      f"{remedy}", UserWarning, stacklevel=3)
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
              undefined: Dict[str, str], higher_is_better: bool) -> Dict[str, int]:
    significant = {frozenset((c["system_a"], c["system_b"])) for c in comparisons
                   if c["metric"] == key and c["significant"]}
    defined = {name: values[k] for k, name in enumerate(order) if name not in undefined}
    return significance_clusters(defined, lambda x, y: frozenset((x, y)) in significant,
                                 higher_is_better=higher_is_better)
