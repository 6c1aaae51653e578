"""Polos (Wada et al. 2024) formulas: the layer-normalised scalar mix and the 10-part feature vector.

The official scalar mix normalises each hidden layer with the mean and *population* variance of its entries over
all non-pad tokens and all dimensions, ``(h − μ) / sqrt(σ² + 1e-12)``, pooling the statistics over the whole
batch. ``per_sentence=True`` pools them per sentence instead (equal to the official code at batch size 1).
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

LAYER_NORM_EPSILON = 1e-12
DROPPED_WEIGHT = -1e20  # the official scalar-mix dropout sets a dropped layer's logit to this value


def layer_norm_statistics(hidden: torch.Tensor, mask: torch.Tensor, *, per_sentence: bool):
    """Mean and population variance of ``hidden`` (B, T, D) over the non-pad tokens (``mask`` (B, T)) and all
    dimensions: per sentence (shapes (B, 1, 1)) or over the whole batch (shapes (1, 1, 1))."""
    m = mask.to(hidden.dtype).unsqueeze(-1)
    dims = (1, 2) if per_sentence else (0, 1, 2)
    count = m.sum(dim=dims, keepdim=True) * hidden.shape[-1]
    mean = (hidden * m).sum(dim=dims, keepdim=True) / count
    variance = (((hidden * m - mean) * m) ** 2).sum(dim=dims, keepdim=True) / count
    return mean, variance


def pooled_statistics(mean: torch.Tensor, variance: torch.Tensor, count: torch.Tensor, group: torch.Tensor,
                      num_groups: int):
    """Statistics of the union of sentences from their own: per-sentence ``mean``/``variance`` (N, ...) over
    ``count`` (N,) entries, pooled within each ``group`` (N,) id → (num_groups, ...) mean and population variance."""
    shape = (num_groups,) + tuple(mean.shape[1:])
    weight = count.to(mean.dtype).reshape((-1,) + (1,) * (mean.dim() - 1)).expand_as(mean)
    index = group.reshape((-1,) + (1,) * (mean.dim() - 1)).expand_as(mean)
    total = torch.zeros(shape, dtype=mean.dtype).scatter_add(0, index, weight)
    pooled_mean = torch.zeros(shape, dtype=mean.dtype).scatter_add(0, index, weight * mean) / total
    second_moment = torch.zeros(shape, dtype=mean.dtype).scatter_add(0, index, weight * (variance + mean ** 2)) / total
    return pooled_mean, (second_moment - pooled_mean ** 2).clamp_min(0)


def normalise(hidden: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    return (hidden - mean) / torch.sqrt(variance + LAYER_NORM_EPSILON)


def mix_weights(scalar_parameters: torch.Tensor, dropped: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``softmax(w)``; layers flagged in ``dropped`` (training-time scalar-mix dropout) get weight 0."""
    if dropped is not None:
        scalar_parameters = torch.where(dropped, torch.full_like(scalar_parameters, DROPPED_WEIGHT), scalar_parameters)
    return torch.softmax(scalar_parameters, dim=0)


def scalar_mix(hidden_states: Sequence[torch.Tensor], mask: torch.Tensor, weights: torch.Tensor,
               gamma: torch.Tensor, *, per_sentence: bool = True) -> torch.Tensor:
    """``gamma * Σ_k softmax(w)_k (h_k − μ_k) / sqrt(σ²_k + 1e-12)`` over (B, T, D) hidden states."""
    mixed = 0
    for w, hidden in zip(mix_weights(weights), hidden_states):
        mixed = mixed + w * normalise(hidden, *layer_norm_statistics(hidden, mask, per_sentence=per_sentence))
    return gamma * mixed


def polos_features(ref_se, cand_se, image, cand_clip, ref_clip) -> torch.Tensor:
    """The official feature order (768·4 + 512·6 = 6144 dims for the official encoders):
    ``[r_se, c_se, |c_se−r_se|, c_se⊙r_se, img, c_clip, |img−c_clip|, img⊙c_clip, |r_clip−c_clip|, r_clip⊙c_clip]``."""
    return torch.cat([
        ref_se, cand_se, (cand_se - ref_se).abs(), cand_se * ref_se,
        image, cand_clip, (image - cand_clip).abs(), image * cand_clip,
        (ref_clip - cand_clip).abs(), ref_clip * cand_clip,
    ], dim=-1)
