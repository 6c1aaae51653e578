"""Image round-trip formulas (Huang et al. 2024): similarity of the original image's features with the
features of images generated from the caption, averaged over the images generated per caption."""

from __future__ import annotations

from typing import Callable, Dict

import torch


def cosine_similarity(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine of paired rows (broadcast over leading dimensions), in float32."""
    a, b = a.float(), b.float()
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


def negative_l2_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``-||a - b||`` of paired rows (broadcast over leading dimensions) on the raw features, in float32."""
    return -(a.float() - b.float()).norm(dim=-1)


SIMILARITIES: Dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "cosine": cosine_similarity,
    "negative_l2": negative_l2_distance,
}


def roundtrip_score(original: torch.Tensor, generated: torch.Tensor, similarity: str = "cosine") -> torch.Tensor:
    """Per caption, the mean similarity between its original image and each image generated from it.

    ``original``: (n, d) features; ``generated``: (n, k, d) features of k generated images per caption.
    """
    if similarity not in SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}; use one of {sorted(SIMILARITIES)}")
    if generated.dim() != 3 or original.dim() != 2 or generated.shape[0] != original.shape[0] \
            or generated.shape[2] != original.shape[1]:
        raise ValueError(f"expected original (n, d) and generated (n, k, d), got {tuple(original.shape)} "
                         f"and {tuple(generated.shape)}")
    return SIMILARITIES[similarity](original[:, None, :], generated).mean(-1)
