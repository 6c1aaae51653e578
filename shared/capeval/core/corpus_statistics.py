"""A corpus-level value as a function of per-unit statistics summed over the units (images), so that a bootstrap
resample or a paired swap of units recomputes the value exactly as the metric computes it on the whole corpus:
BLEU from summed n-gram matches and lengths, METEOR from its summed alignment statistics, a mean from (score, 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np


@dataclass(frozen=True)
class CorpusStatistics:
    """``per_unit[u]``: unit u's statistics (k columns); ``combine(sums)`` maps summed statistics of shape
    ``(r, k)`` to ``r`` corpus values (vectorised over resamples)."""

    per_unit: np.ndarray
    combine: Callable[[np.ndarray], np.ndarray]

    def value(self) -> float:
        """The corpus value over every unit once."""
        return float(self.combine(self.per_unit.sum(axis=0, keepdims=True))[0])

    def resampled(self, counts: np.ndarray) -> np.ndarray:
        """Values on bootstrap resamples: ``counts[r, u]`` = how often unit u is drawn in resample r."""
        return self.combine(counts @ self.per_unit)

    def swapped(self, other: "CorpusStatistics", swaps: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Values of (self, other) when the units marked in ``swaps[r, u]`` trade their statistics (approximate
        randomisation of two systems on the same units). The sums move by the swapped units' differences, so a
        swap of units with identical statistics leaves both values bitwise as they are."""
        moved = swaps.astype(self.per_unit.dtype) @ (other.per_unit - self.per_unit)
        mine = self.per_unit.sum(axis=0) + moved
        theirs = other.per_unit.sum(axis=0) - moved
        return self.combine(mine), self.combine(theirs)


def _ratio(sums: np.ndarray) -> np.ndarray:
    return sums[:, 0] / sums[:, 1]


def mean_statistics(scores: Sequence[float]) -> CorpusStatistics:
    """A metric whose corpus value is the mean of its per-unit scores."""
    scores = np.asarray(scores, dtype=np.float64)
    return CorpusStatistics(np.column_stack([scores, np.ones_like(scores)]), _ratio)


def defined_mean_statistics(scores: Sequence[float]) -> CorpusStatistics:
    """A metric whose corpus value is the mean over the units where it is defined (NaN units count for nothing: a
    resample of undefined units only is itself undefined, 0/0)."""
    scores = np.asarray(scores, dtype=np.float64)
    defined = ~np.isnan(scores)
    return CorpusStatistics(np.column_stack([np.where(defined, scores, 0.0), defined.astype(np.float64)]), _ratio)


@dataclass(frozen=True)
class KeyScores:
    """One score key of one system over a corpus: the corpus value as the metric reports it, the per-sample values
    and the statistics a resample recomputes the corpus value from; ``details``: per-sample records a metric
    reports beside its values (one dict per sample: SPICE's tuple categories, CAPTURE's matched, missed and invented
    elements, :attr:`capeval.core.scoring.Scorer.detail_keys`), else ``None``."""

    corpus: float
    per_sample: List[float]
    statistics: CorpusStatistics
    details: Optional[List[Dict]] = None


def per_sample_mean(values: Sequence[float], *, over_defined: bool = False) -> KeyScores:
    """A per-sample key summarised as a scorer averages it: the corpus value ``float(np.mean(...))`` of the values
    (NaN in, NaN out) with :func:`mean_statistics`, or, ``over_defined``, the mean over the defined (non-NaN) values
    with :func:`defined_mean_statistics`."""
    values = [float(v) for v in values]
    kept = [v for v in values if v == v] if over_defined else values
    corpus = float(np.mean(kept)) if kept else float("nan")
    statistics = defined_mean_statistics(values) if over_defined else mean_statistics(values)
    return KeyScores(corpus, values, statistics)
