"""Small pure functions on embeddings and scores (no model loading, no I/O).

The CLIP-S / PAC-S formulas of :mod:`capeval.functional.similarity` are importable from here; they load torch on
first use, so the text metrics' modules of this package import without it."""

import importlib

__all__ = ["clip_score", "harmonic_mean", "max_reference_similarity", "normalize", "official_clip_score",
           "official_max_reference_similarity", "official_ref_clip_score", "ref_clip_score"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("capeval.functional.similarity"), name)
    raise AttributeError(f"module 'capeval.functional' has no attribute {name!r}")
