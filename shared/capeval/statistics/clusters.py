"""Significance clusters, as WMT reports them (``mt-metrics-eval``'s ``AssignRanks``): the entries (systems, or
metrics) sorted best first; an entry opens a new rank when some entry of the current rank is significantly better
than it, so rank r holds the entries that no entry of rank r significantly outperforms, each outperformed by some
entry ranked above r.

Best first follows the score's direction: with ``higher_is_better=False`` (an error rate, a distance) the lowest
value comes first. Equal values keep their given order.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Sequence

import numpy as np


def best_first(values: Sequence[float], higher_is_better: bool = True) -> List[int]:
    """The indices of ``values``, best value first (a stable sort: equal values keep their order)."""
    if higher_is_better:
        return sorted(range(len(values)), key=lambda k: -values[k])
    return sorted(range(len(values)), key=lambda k: values[k])


def assign_ranks(significant: np.ndarray) -> List[int]:
    """Ranks from ``significant[i, j]`` (i < j, entries sorted best first): i is significantly better than j.
    Entry j opens a new rank when any entry of the current rank beats it (``AssignRanks``)."""
    ranks, rank, start = [], 1, 0
    for j in range(len(significant)):
        if significant[start:j, j].any():
            rank, start = rank + 1, j
        ranks.append(rank)
    return ranks


def significance_clusters(values: Mapping[str, float], significant: Callable[[str, str], bool], *,
                          higher_is_better: bool = True) -> Dict[str, int]:
    """``{name: rank}``, best first: ``values`` by name, ``significant(x, y)``: whether the difference of x and y
    is significant (asked for every pair, the better one first)."""
    names = list(values)
    ranked = [names[k] for k in best_first([values[name] for name in names], higher_is_better)]
    matrix = np.array([[significant(x, y) for y in ranked] for x in ranked], dtype=bool).reshape(len(ranked),
                                                                                               len(ranked))
    return dict(zip(ranked, assign_ranks(matrix)))
