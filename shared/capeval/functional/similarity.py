"""CLIP-S family formulas (Hessel et al. 2021; Sarto et al. 2023) on precomputed embeddings."""

from __future__ import annotations

from typing import Sequence

import torch


def normalize(x: torch.Tensor) -> torch.Tensor:
    """L2-normalise the last dimension (in float32)."""
    x = x.float()
    return x / x.norm(dim=-1, keepdim=True)


def clip_score(image_emb: torch.Tensor, text_emb: torch.Tensor, w: float = 2.5) -> torch.Tensor:
    """Per-pair ``w * max(cos(image, text), 0)``; rows of the two inputs are paired."""
    cos = (normalize(image_emb) * normalize(text_emb)).sum(-1)
    return w * cos.clamp(min=0)


def max_reference_similarity(
    cand_emb: torch.Tensor, ref_emb: torch.Tensor, ref_owner: Sequence[int]
) -> torch.Tensor:
    """For each candidate i, ``max_j cos(cand_i, ref_j)`` over the references j with ``ref_owner[j] == i``.

    Not clipped and not rescaled, as in the official RefCLIPScore. Every candidate needs one reference.
    """
    owner = torch.as_tensor(list(ref_owner), dtype=torch.long, device=cand_emb.device)
    cos = (normalize(cand_emb)[owner] * normalize(ref_emb)).sum(-1)
    out = torch.full((cand_emb.shape[0],), float("-inf"), device=cos.device)
    out = out.scatter_reduce(0, owner, cos, reduce="amax", include_self=True)
    if torch.isinf(out).any():
        raise ValueError("every candidate needs at least one reference")
    return out


def harmonic_mean(*scores: torch.Tensor) -> torch.Tensor:
    """Element-wise harmonic mean ``n / Σ 1/x``; 0 where any input is 0 (its limit), as the paper intends."""
    stacked = torch.stack([s.float() for s in scores])
    zero = (stacked == 0).any(0)
    safe = torch.where(stacked == 0, torch.ones_like(stacked), stacked)
    hm = len(scores) / (1.0 / safe).sum(0)
    return torch.where(zero, torch.zeros_like(hm), hm)


def ref_clip_score(clip_s: torch.Tensor, ref_sim: torch.Tensor) -> torch.Tensor:
    """``2ab/(a+b)`` with a = CLIP-S (already scaled) and b = the reference side, exactly as official.

    Where ``a + b == 0`` (both zero) the official code yields NaN; capeval returns 0 there.
    """
    a, b = clip_s.float(), ref_sim.float()
    denom = a + b
    return torch.where(denom == 0, torch.zeros_like(denom), 2 * a * b / torch.where(denom == 0, torch.ones_like(denom), denom))
