"""VCRScore feature formulas (Ruiz et al. 2024) on strings and precomputed embeddings.

Feature (1), word precision, works on whitespace-split word *sets*, case-sensitive, exactly as the official code
(which labels it "recall"); feature (3), MCIP RefCLIP-S, clips the reference side at 0 (unlike RefCLIPScore).
"""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence

import torch

from capeval.functional.similarity import clip_score, max_reference_similarity, ref_clip_score


def word_pool(references: Sequence[str], *detected: Iterable[str]) -> str:
    """The official pool: all references joined with spaces, then the names of every detector's objects.

    Multi-word names ("traffic light") become separate words once the pool is split.
    """
    parts: List[str] = [" ".join(references)]
    parts += [" ".join(names) for names in detected]
    return " ".join(parts)


def word_precision(candidate: str, pool: str) -> float:
    """``100 · |C ∩ P| / |C|`` with C, P the sets of whitespace-separated words (case-sensitive, punctuation kept).

    A candidate without words scores 0 (the official code divides by zero).
    """
    words = set(candidate.split())
    if not words:
        return 0.0
    return 100.0 * len(words & set(pool.split())) / len(words)


def limit_references(references: Sequence[str], max_references: Optional[int]) -> List[str]:
    """The first ``max_references`` references (all when ``None``); the official code is written for three."""
    references = list(references)
    return references if max_references is None else references[:max_references]


def mcip_refclip_s(image_emb: torch.Tensor, cand_emb: torch.Tensor, ref_emb: torch.Tensor,
                   ref_owner: Sequence[int], w: float = 2.5) -> torch.Tensor:
    """VCRScore's RefCLIP-S: ``c = w·max(cos(image, cand), 0)``, ``r = max(0, max_j cos(cand, ref_j))``,
    ``2cr/(c+r)``; 0 where ``c = 0`` or ``r = 0``, as the official ``1/((1/c + 1/r)/2)`` gives in torch (``1/0 = inf``).
    Embeddings need not be normalised.
    """
    c = clip_score(image_emb, cand_emb, w)
    r = max_reference_similarity(cand_emb, ref_emb, ref_owner).clamp(min=0)
    return ref_clip_score(c, r)
