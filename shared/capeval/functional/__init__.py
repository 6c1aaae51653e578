"""Small pure functions on embeddings and scores (no model loading, no I/O)."""

from capeval.functional.similarity import (
    clip_score,
    harmonic_mean,
    max_reference_similarity,
    normalize,
    official_clip_score,
    official_max_reference_similarity,
    official_ref_clip_score,
    ref_clip_score,
)

__all__ = ["clip_score", "harmonic_mean", "max_reference_similarity", "normalize", "official_clip_score",
           "official_max_reference_similarity", "official_ref_clip_score", "ref_clip_score"]
