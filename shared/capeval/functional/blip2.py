"""BLIP-2 image-text contrastive (ITC) score on precomputed Q-Former features (Li et al. 2023)."""

from __future__ import annotations

import torch

from capeval.functional.similarity import normalize


def blip2_itc_score(query_features: torch.Tensor, text_features: torch.Tensor) -> torch.Tensor:
    """Per pair ``max_q cos(query_features[i, q], text_features[i])``: the raw cosine, no temperature.

    ``query_features`` is ``(n, num_queries, d)`` (``vision_proj`` of the Q-Former query outputs) and
    ``text_features`` is ``(n, d)`` (``text_proj`` of the text [CLS] output); rows are paired.
    """
    cos = torch.einsum("nqd,nd->nq", normalize(query_features), normalize(text_features))
    return cos.max(dim=1).values
