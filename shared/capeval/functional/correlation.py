"""Meta-evaluation statistics: Kendall τ-b/τ-c, Pearson, Spearman, seeded bootstrap intervals, pairwise accuracy."""

from __future__ import annotations

from typing import Callable, Dict, Sequence, Tuple

import numpy as np
from scipy import stats


def kendall_tau(metric: Sequence[float], human: Sequence[float], variant: str = "c") -> float:
    """Kendall's τ (variant "b" or "c", both handle ties) between metric and human scores."""
    return float(stats.kendalltau(metric, human, variant=variant).statistic)


def pearson(metric: Sequence[float], human: Sequence[float]) -> float:
    return float(stats.pearsonr(metric, human).statistic)


def spearman(metric: Sequence[float], human: Sequence[float]) -> float:
    return float(stats.spearmanr(metric, human).statistic)


STATISTICS: Dict[str, Callable[[Sequence[float], Sequence[float]], float]] = {
    "kendall_tau_b": lambda m, h: kendall_tau(m, h, "b"),
    "kendall_tau_c": lambda m, h: kendall_tau(m, h, "c"),
    "pearson": pearson,
    "spearman": spearman,
}


def bootstrap_interval(statistic: Callable, metric: Sequence[float], human: Sequence[float], *,
                       resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> Tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over resampled (metric, human) rows (seeded)."""
    metric, human = np.asarray(metric, dtype=float), np.asarray(human, dtype=float)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        idx = rng.integers(0, len(metric), len(metric))
        values.append(statistic(metric[idx], human[idx]))
    alpha = (1 - confidence) / 2
    low, high = np.nanquantile(values, [alpha, 1 - alpha])
    return float(low), float(high)


def pairwise_correct(metric_a: Sequence[float], metric_b: Sequence[float], human_prefers_a: Sequence[bool], *,
                     ties: str = "wrong") -> np.ndarray:
    """Per pair, 1 where the metric orders the two captions as people did, else 0.

    ``ties="wrong"`` is the literature's strict rule (a metric tie never counts); ``ties="half"`` counts it ½.
    """
    if ties not in ("wrong", "half"):
        raise ValueError("ties must be 'wrong' or 'half'")
    a, b = np.asarray(metric_a, dtype=float), np.asarray(metric_b, dtype=float)
    prefers_a = np.asarray(human_prefers_a, dtype=bool)
    correct = np.where(prefers_a, a > b, b > a).astype(float)
    if ties == "half":
        correct[a == b] = 0.5
    return correct


def pairwise_accuracy(metric_a: Sequence[float], metric_b: Sequence[float], human_prefers_a: Sequence[bool], *,
                      ties: str = "wrong") -> float:
    """Share of pairs where the metric orders the two captions as people did (:func:`pairwise_correct`)."""
    return float(pairwise_correct(metric_a, metric_b, human_prefers_a, ties=ties).mean())
