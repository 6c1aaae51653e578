"""CLIP-S family formulas (Hessel et al. 2021; Sarto et al. 2023) on precomputed embeddings."""

from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np
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


def _official_unit(x, dtype) -> np.ndarray:
    """The official ``x / np.sqrt(np.sum(x**2, axis=1, keepdims=True))`` in numpy ``dtype`` (each op rounded to it)."""
    x = np.asarray(x, dtype=dtype)
    return x / np.sqrt(np.sum(x ** 2, axis=1, keepdims=True))


def official_clip_score(image_emb, text_emb, w: float, *, dtype) -> Tuple[np.ndarray, np.ndarray]:
    """The official CLIPScore / PAC-S scoring of paired feature rows, op for op in numpy ``dtype`` (float16 for the
    official GPU CLIPScore, whose CLIP returns fp16 features; float32 for PAC-S, which casts CLIP to fp32): normalise
    each row, ``w * clip(sum(image * text), 0)``. Returns the scores and the normalised text rows (the official code
    hands those on to the reference side)."""
    texts = _official_unit(text_emb, dtype)
    return w * np.clip(np.sum(_official_unit(image_emb, dtype) * texts, axis=1), 0, None), texts


def official_max_reference_similarity(cand_unit: np.ndarray, ref_emb, ref_owner: Sequence[int]) -> np.ndarray:
    """The official reference side in ``cand_unit``'s dtype: the already normalised candidates are normalised again
    (as the official code does), then for each candidate i ``max(cand_i · refs_i^T)`` with numpy's ``dot``."""
    cands = _official_unit(cand_unit, cand_unit.dtype)
    refs = _official_unit(ref_emb, cand_unit.dtype)
    owner = np.asarray(list(ref_owner))
    if len(np.unique(owner)) != len(cands):
        raise ValueError("every candidate needs at least one reference")
    return np.array([np.max(cand.dot(refs[owner == i].transpose())) for i, cand in enumerate(cands)],
                    dtype=cand_unit.dtype)


def official_ref_clip_score(clip_s: np.ndarray, ref_sim: np.ndarray) -> np.ndarray:
    """The official ``2 * a * b / (a + b)`` in the inputs' dtype; 0 where ``a + b == 0`` (officially NaN)."""
    denom = clip_s + ref_sim
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom == 0, np.zeros_like(denom), 2 * clip_s * ref_sim / denom)
