"""Polos (Wada et al. 2024) formulas: the layer-normalised scalar mix and the 10-part feature vector."""

from __future__ import annotations

from typing import Sequence

import torch


def layer_norm_statistics(hidden: torch.Tensor, mask: torch.Tensor, *, per_sentence: bool):
    """Mean and variance of one layer over the non-pad tokens and all dimensions.

    ``per_sentence=False`` pools the whole batch (the official code: a score then depends on its batch);
    ``per_sentence=True`` gives each sentence its own statistics (equal to the official code at batch size 1).
    """
    m = mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    dims = (1, 2) if per_sentence else (0, 1, 2)
    count = m.sum(dim=dims, keepdim=True) * hidden.shape[-1]
    mean = (hidden * m).sum(dim=dims, keepdim=True) / count
    variance = (((hidden * m - mean) * m) ** 2).sum(dim=dims, keepdim=True) / count
    return mean, variance


def scalar_mix(hidden_states: Sequence[torch.Tensor], mask: torch.Tensor, weights: torch.Tensor,
               gamma: torch.Tensor, *, per_sentence: bool = True) -> torch.Tensor:
    """``gamma * Σ_k softmax(w)_k (h_k − μ_k) / sqrt(σ²_k + 1e-12)``."""
    normed = torch.softmax(weights, dim=0)
    mixed = 0
    for w, hidden in zip(normed, hidden_states):
        mean, variance = layer_norm_statistics(hidden, mask, per_sentence=per_sentence)
        mixed = mixed + w * (hidden - mean) / torch.sqrt(variance + 1e-12)
    return gamma * mixed


def polos_features(ref_se, cand_se, image, cand_clip, ref_clip) -> torch.Tensor:
    """The official feature order: text (SimCSE) parts, then image–candidate, then reference–candidate (CLIP)."""
    return torch.cat([
        ref_se, cand_se, (cand_se - ref_se).abs(), cand_se * ref_se,
        image, cand_clip, (image - cand_clip).abs(), image * cand_clip,
        (ref_clip - cand_clip).abs(), ref_clip * cand_clip,
    ], dim=-1)
