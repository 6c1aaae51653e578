"""HICE-S / RefHICE-S formulas (Zeng et al., ACM MM 2024, equations 2–11) on embeddings.

All similarities are cosine similarities rescaled as in CLIP-S, ``w · max(cos, 0)`` (``w`` is a parameter:
2.5 for image–text, 1 for text–text by default, as RefCLIP-S leaves its text side unscaled).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from capeval.functional.similarity import harmonic_mean as _tensor_harmonic_mean
from capeval.functional.similarity import normalize


def rescaled_similarity(a: torch.Tensor, b: torch.Tensor, w: float) -> torch.Tensor:
    """``w · max(cos(a_i, b_j), 0)`` for every pair: [M, d] × [N, d] → [M, N]."""
    return w * torch.clamp(normalize(a) @ normalize(b).T, min=0)


def harmonic_mean(*values: float) -> float:
    """Harmonic mean of non-negative numbers; 0 when any of them is 0."""
    return float(_tensor_harmonic_mean(*[torch.tensor(float(v), dtype=torch.float64) for v in values]))


@dataclass(frozen=True)
class LocalMatch:
    """Local precision/recall between candidate units (phrases) and target units (regions or reference phrases).

    ``precision_per_unit[n]`` = max over targets of the rescaled similarity of candidate unit n;
    ``recall_per_target[m]`` = max over candidate units for target m; ``best_unit[m]`` is the index of that best
    candidate unit. ``precision``/``recall`` are their means, ``score`` their harmonic mean: the paper's local terms
    (eqs. 4–9: lITC for phrases × regions, lTTC for phrases × reference phrases).
    """

    precision_per_unit: torch.Tensor
    recall_per_target: torch.Tensor
    best_unit: torch.Tensor
    precision: float
    recall: float
    score: float


def local_match(units: torch.Tensor, targets: torch.Tensor, w: float) -> LocalMatch:
    """Max-matching precision over ``units`` [N, d] and recall over ``targets`` [M, d] (N, M ≥ 1)."""
    if len(units) == 0 or len(targets) == 0:
        raise ValueError("local matching needs at least one unit and one target")
    similarity = rescaled_similarity(units, targets, w)  # [N, M]
    precision_per_unit = similarity.max(dim=1).values
    recall_per_target, best_unit = similarity.max(dim=0)
    precision = float(precision_per_unit.mean())
    recall = float(recall_per_target.mean())
    return LocalMatch(precision_per_unit, recall_per_target, best_unit, precision, recall,
                      harmonic_mean(precision, recall))


def global_itc(image: torch.Tensor, caption: torch.Tensor, w: float = 2.5) -> float:
    """Global image–text compatibility (eq. 2): ``w · max(cos(image, caption), 0)``."""
    return float(rescaled_similarity(image[None], caption[None], w)[0, 0])


def global_ttc(caption: torch.Tensor, references: torch.Tensor, w: float = 1.0) -> float:
    """Global text–text compatibility (eq. 3): max over references of ``w · max(cos, 0)``."""
    return float(rescaled_similarity(caption[None], references, w).max())


def hice(global_itc_value: float, local_itc_value: Optional[float]) -> float:
    """HICE-S (eq. 10) = hMean(gITC, lITC); with no local term (no phrases) the global term alone."""
    if local_itc_value is None:
        return global_itc_value
    return harmonic_mean(global_itc_value, local_itc_value)


def ref_hice(global_itc_value: float, local_itc_value: Optional[float], global_ttc_value: float,
             local_ttc_value: Optional[float]) -> float:
    """RefHICE-S (eq. 11) = hMean(gITC, lITC, gTTC, lTTC); local terms that are ``None`` are left out."""
    values = [v for v in (global_itc_value, local_itc_value, global_ttc_value, local_ttc_value) if v is not None]
    return harmonic_mean(*values)
