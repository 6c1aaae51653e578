"""CLIP-S / RefCLIP-S and PAC-S / RefPAC-S (one class, different weights and ``w``)."""

from __future__ import annotations

from typing import Optional, Sequence

from capeval import functional as F
from capeval.clip import ClipBackbone
from capeval.inputs import check_captions, check_lengths, check_references, load_images
from capeval.scoring import summarize

CLIPSCORE_PREFIX = "A photo depicts "


class ClipScorer:
    """``w * max(cos(image, "A photo depicts " + caption), 0)`` and, with references, the harmonic mean
    with ``max_j cos(caption, reference_j)`` (official RefCLIPScore semantics; the prefix is applied to
    candidates and references alike).
    """

    def __init__(self, weights: str = "openai-clip-vit-b-32", *, w: float = 2.5, name: str = "clip_s",
                 prefix: str = CLIPSCORE_PREFIX, device: str = "auto", dtype=None, batch_size: int = 64,
                 cache_dir=None, persist_dir=None, backbone: Optional[ClipBackbone] = None):
        self.w = w
        self.name = name
        self.prefix = prefix
        self.backbone = backbone or ClipBackbone(weights, device=device, dtype=dtype, batch_size=batch_size,
                                                 cache_dir=cache_dir, persist_dir=persist_dir)

    def score(self, predictions: Sequence[str], images: Sequence, references: Optional[Sequence] = None) -> dict:
        predictions = check_captions(predictions)
        n = check_lengths(predictions=predictions, images=images)
        refs = check_references(references, n) if references is not None else None
        pil_images = load_images(images)
        before = self.backbone.truncated_texts
        image_emb = self.backbone.encode_images(pil_images)
        cand_emb = self.backbone.encode_texts([self.prefix + p for p in predictions])
        scores = F.clip_score(image_emb, cand_emb, self.w)
        per_sample = {self.name: scores.tolist()}
        if refs is not None:
            flat = [self.prefix + r for sample in refs for r in sample]
            owner = [i for i, sample in enumerate(refs) for _ in sample]
            ref_sim = F.max_reference_similarity(cand_emb, self.backbone.encode_texts(flat), owner)
            per_sample[f"ref{self.name}"] = F.ref_clip_score(scores, ref_sim).tolist()
        result = summarize(per_sample)
        result["truncated_texts"] = self.backbone.truncated_texts - before
        return result
