"""The images where two systems disagree most: for a pair of systems and a metric, the images ranked by the
absolute difference of their per-image scores (ties: image order). Images where either score is missing are
left out of that ranking (nothing to compare)."""

from __future__ import annotations

import math
from itertools import combinations
from typing import List, Mapping, Optional, Sequence, Tuple


def system_pairs(systems: Sequence[str], baseline: Optional[str]) -> List[Tuple[str, str]]:
    """Every pair once, as (a, b) with differences a − b: each system against the baseline first (the baseline
    second), then the other pairs in the document's order."""
    versus = [(s, baseline) for s in systems if baseline is not None and s != baseline]
    others = [(a, b) for a, b in combinations(systems, 2) if baseline not in (a, b)]
    return versus + others


def differences(images: Sequence[Mapping], a: str, b: str, key: str) -> List[Optional[float]]:
    """Per image: score(a) − score(b) on ``key``; None where either is missing (None or not finite)."""
    out = []
    for image in images:
        first, second = image["scores"][a].get(key), image["scores"][b].get(key)
        defined = all(isinstance(v, (int, float)) and math.isfinite(v) for v in (first, second))
        out.append(first - second if defined else None)
    return out


def ranked(deltas: Sequence[Optional[float]], top: int) -> List[int]:
    """Indices of the ``top`` largest absolute differences (ties: lower index first)."""
    present = [i for i, d in enumerate(deltas) if d is not None]
    return sorted(present, key=lambda i: (-abs(deltas[i]), i))[:top]
