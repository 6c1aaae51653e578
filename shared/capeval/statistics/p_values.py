"""p-values from resampled statistics: how many resamples reach the observed difference.

- ``permutation_p`` / ``bootstrap_p``: one- or two-sided (``alternative``), counted as ``mt-metrics-eval`` counts
  them (hits / resamples): permutation ``P(δ* ≥ δ)`` (``greater``), ``P(δ* ≤ δ)`` (``less``), ``P(|δ*| ≥ |δ|)``;
  bootstrap ``P(δ* ≤ 0)`` for ``greater`` (Koehn 2004), ``P(δ* ≥ 0)`` for ``less``, twice the smaller for two-sided.
- the two-sided Monte Carlo counts of system comparison: sacrebleu's (strict, ties not counted), Noreen's (ties
  counted, ``+ 1`` in numerator and denominator) and the exact sign-flip test over every swap pattern.

Resamples where the statistic is undefined (NaN) take no part.
"""

from __future__ import annotations

import numpy as np

NAN = float("nan")
ALTERNATIVES = ("two-sided", "greater", "less")


def permutation_p(null: np.ndarray, delta: float, alternative: str) -> float:
    null = null[~np.isnan(null)]
    if np.isnan(delta) or not len(null):
        return NAN
    if alternative == "greater":
        return float(np.mean(null >= delta))
    if alternative == "less":
        return float(np.mean(null <= delta))
    return float(np.mean(np.abs(null) >= abs(delta)))


def bootstrap_p(deltas: np.ndarray, alternative: str) -> float:
    deltas = deltas[~np.isnan(deltas)]
    if not len(deltas):
        return NAN
    at_most, at_least = float(np.mean(deltas <= 0)), float(np.mean(deltas >= 0))
    if alternative == "greater":
        return at_most
    if alternative == "less":
        return at_least
    return min(1.0, 2 * min(at_most, at_least))


TIE_RTOL, TIE_ATOL = 1e-9, 1e-12  # a resampled statistic this close to the observed one is a tie (float rounding)


def _exceeding(statistics: np.ndarray, observed: float) -> int:
    """How many ``statistics`` exceed ``observed`` strictly: values within float rounding of it are ties, which
    sacrebleu does not count (a resample that only moves identical units is the observed split)."""
    above = (statistics > observed) & ~np.isclose(statistics, observed, rtol=TIE_RTOL, atol=TIE_ATOL)
    return int(above.sum())


def _at_least(statistics: np.ndarray, observed: float) -> int:
    """How many ``statistics`` are at least ``observed``, ties within float rounding of it included."""
    at_least = (statistics >= observed) | np.isclose(statistics, observed, rtol=TIE_RTOL, atol=TIE_ATOL)
    return int(at_least.sum())


def _monte_carlo_p(statistics: np.ndarray, observed: float, count, *, centred: bool = False, plus_one: bool = True
                   ) -> float:
    """``(count(|stat*| vs |stat|) + 1) / (R + 1)`` over the defined resamples (``centred``: the absolute values
    less their mean, Koehn's bootstrap statistic; ``plus_one=False``: ``count / R``, for a full enumeration)."""
    statistics = np.abs(statistics[~np.isnan(statistics)])
    if np.isnan(observed) or not len(statistics):
        return NAN
    if centred:
        statistics = statistics - statistics.mean()
    return (count(statistics, abs(observed)) + plus_one) / (len(statistics) + plus_one)


def sacrebleu_bootstrap_p(deltas: np.ndarray, delta: float) -> float:
    """sacrebleu ``--paired-bs`` (Koehn 2004 as Moses'): the absolute resampled differences centred on their mean
    against the absolute observed difference, ``(#(|δ*| − mean|δ*| > |δ|) + 1) / (R + 1)``; two-sided."""
    return _monte_carlo_p(deltas, delta, _exceeding, centred=True)


def sacrebleu_randomization_p(null: np.ndarray, delta: float) -> float:
    """sacrebleu ``--paired-ar`` (multeval's approximate randomisation): ``(#(|δ*| > |δ|) + 1) / (R + 1)`` over the
    differences of the swapped pseudo-systems; two-sided."""
    return _monte_carlo_p(null, delta, _exceeding)


def noreen_bootstrap_p(deltas: np.ndarray, delta: float) -> float:
    """Koehn's paired bootstrap statistic as sacrebleu centres it, counted as Noreen (1989) counts a Monte Carlo
    test: ``(#(|δ*| − mean|δ*| ≥ |δ|) + 1) / (R + 1)``, ties included (a system compared with itself gets 1)."""
    return _monte_carlo_p(deltas, delta, _at_least, centred=True)


def noreen_randomization_p(null: np.ndarray, delta: float) -> float:
    """Approximate randomisation over sampled swaps, ties counted (Noreen 1989; Riezler & Maxwell 2005):
    ``(#(|δ*| ≥ |δ|) + 1) / (R + 1)``, a valid p-value at any number of units; two-sided."""
    return _monte_carlo_p(null, delta, _at_least)


def exact_randomization_p(null: np.ndarray, delta: float) -> float:
    """The exact sign-flip (permutation) test: ``null`` holds ``|δ*|`` of every swap pattern (each pattern and its
    complement once: :func:`capeval.statistics.resampling.sign_patterns`), ``p = #(|δ*| ≥ |δ|) / patterns``; the
    observed split is one of them, so ``p ≥ 2 / 2ⁿ``."""
    return _monte_carlo_p(null, delta, _at_least, plus_one=False)
