"""CLIP-S / RefCLIP-S and PAC-S / RefPAC-S (one class, different weights and ``w``)."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Annotated, Optional, Tuple

import numpy as np

from capeval import functional as F
from capeval.backbones.clip import OPENAI_FP16, ClipBackbone, check_shared_backbone
from capeval.core.caches import DEFAULT_CACHE_BYTES
from capeval.core.constants import CLIPSCORE_PREFIX
from capeval.core.errors import InputError
from capeval.core.inputs import ValidInputs
from capeval.core.keys import ScoreKey
from capeval.core.option_types import BatchSize, Bytes, Device, Dtype, OneOf, PathLike, Precision, Workers
from capeval.core.scoring import Scorer, check_precision, summarize
from capeval.core.truncation import warn_truncated


class TorchmetricsAggregateWarning(UserWarning):
    """``definition="torchmetrics"``: a negative cosine makes the corpus value differ from torchmetrics'."""


class ClipScorer(Scorer):
    """``w * max(cos(image, "A photo depicts " + caption), 0)`` and, with references, the harmonic mean
    with ``max_j cos(caption, reference_j)`` (official RefCLIPScore semantics; the prefix is applied to
    candidates and references alike).

    ``precision="official"`` reproduces the official pipeline's numerics: ``official_fp16=True`` (CLIPScore, whose
    published numbers come from OpenAI CLIP on CUDA) runs OpenAI's mixed fp16 CLIP (``precision="openai-fp16"`` of
    :class:`ClipBackbone`) and scores in fp16 numpy; ``official_fp16=False`` (PAC-S, which casts CLIP to fp32) runs
    fp32 and scores in fp32 numpy, with the official operation order in both.

    ``definition="torchmetrics"`` (CLIP-S only): ``100 * max(cos(image, caption), 0)``, no prompt, as torchmetrics'
    ``CLIPScore`` (:data:`DEFINITIONS`); it has no reference-based variant.
    """

    images, references = "required", "optional"
    # the keys of both registered scorers (clip_s, pac_s), printed ×100 as the papers print them
    key_metadata = {"clip_s": ScoreKey("CLIP-S", 100.0), "refclip_s": ScoreKey("RefCLIP-S", 100.0),
                    "pac_s": ScoreKey("PAC-S", 100.0), "refpac_s": ScoreKey("RefPAC-S", 100.0)}

    def __init__(self, weights: Optional[str] = "openai-clip-vit-b-32", *, w: float = 2.5, name: str = "clip_s",
                 prefix: str = CLIPSCORE_PREFIX, device: str = "auto", dtype=None, precision: Optional[str] = None,
                 official_fp16: bool = True, batch_size: int = 64, cache_dir=None, persist_dir=None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, preprocess_workers: int = 0,
                 clip_backbone: Optional[ClipBackbone] = None, definition: str = "paper"):
        if definition not in DEFINITIONS:
            raise InputError(f"definition must be one of {tuple(DEFINITIONS)}, not {definition!r}")
        if definition != "paper" and precision is not None:
            raise InputError(f"precision={precision!r} reproduces the paper's numerics: it needs definition='paper'")
        w, prefix = DEFINITIONS[definition] or (w, prefix)
        official = check_precision(precision, dtype, metric=name)
        self.w = w
        self.name = name
        self.prefix = prefix
        self.definition = definition
        if definition == "torchmetrics" and name in self.key_metadata:  # scores ×100 already: printed as computed
            self.key_metadata = {name: dataclasses.replace(self.key_metadata[name], scale=1.0)}
        self.official_dtype = (np.float16 if official_fp16 else np.float32) if official else None
        backbone_precision = OPENAI_FP16 if self.official_dtype is np.float16 else "uniform"
        if clip_backbone is not None:  # weights=None: score with whatever weights the given backbone holds
            self.backbone = check_shared_backbone(clip_backbone, weights, cache_dir=cache_dir,
                                                  precision=backbone_precision, preprocess_workers=preprocess_workers)
        else:
            self.backbone = ClipBackbone(weights, device=device, dtype=dtype, precision=backbone_precision,
                                         batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir,
                                         cache_bytes=cache_bytes, preprocess_workers=preprocess_workers)

    def provenance_parts(self) -> Tuple[object, ...]:
        return (self, self.backbone)

    def score_keys(self, inputs: ValidInputs) -> Tuple[str, ...]:
        return (self.name,) if inputs.references is None else (self.name, f"ref{self.name}")

    def _score(self, inputs: ValidInputs) -> dict:
        predictions, pil_images, refs = inputs.predictions, inputs.images, inputs.references
        if refs is not None and self.definition != "paper":
            raise InputError(f"references: definition={self.definition!r} has no reference-based score (torchmetrics "
                             f"has no RefCLIPScore): score without references, or use definition='paper'")
        image_emb = self.backbone.encode_images(pil_images)
        texts = [self.prefix + text for text in [*predictions, *(r for sample in refs or [] for r in sample)]]
        # one call for candidates and references: their texts share the length buckets (less padding)
        text_emb = self.backbone.encode_texts(texts)
        cand_emb, ref_emb = text_emb[:len(predictions)], text_emb[len(predictions):]
        if self.official_dtype is not None:
            scores, cand_unit = F.official_clip_score(image_emb.numpy(), cand_emb.numpy(), self.w,
                                                      dtype=self.official_dtype)
        else:
            scores = F.clip_score(image_emb, cand_emb, self.w)
        if self.definition == "torchmetrics":
            warn_torchmetrics_aggregate(image_emb, cand_emb, scores)
        per_sample = {self.name: scores.tolist()}
        if refs is not None:
            owner = [i for i, sample in enumerate(refs) for _ in sample]
            if self.official_dtype is not None:
                ref_sim = F.official_max_reference_similarity(cand_unit, ref_emb.numpy(), owner)
                per_sample[f"ref{self.name}"] = F.official_ref_clip_score(scores, ref_sim).tolist()
            else:
                ref_sim = F.max_reference_similarity(cand_emb, ref_emb, owner)
                per_sample[f"ref{self.name}"] = F.ref_clip_score(scores, ref_sim).tolist()
        result = summarize(per_sample)
        result["truncated_texts"] = truncated = self.backbone.truncation.count(texts)
        warn_truncated([self.backbone.truncation.describe(truncated, len(texts)) if truncated else ""])
        return result


def warn_torchmetrics_aggregate(image_emb, cand_emb, scores) -> None:
    """Where some image–caption cosine is negative, say that the corpus value (the mean of the per-sample
    ``100·max(cos, 0)``) is not torchmetrics' ``CLIPScore.compute()`` (``max(mean(100·cos), 0)``), giving both."""
    unclamped = 100.0 * (F.normalize(image_emb) * F.normalize(cand_emb)).sum(-1)
    negative = int((unclamped < 0).sum())
    if negative:
        ours, theirs = float(scores.mean()), max(float(unclamped.mean()), 0.0)
        warnings.warn(f"clip_s definition='torchmetrics': {negative} of {len(scores)} samples have a negative "
                      f"image-caption cosine and score 0 each (as torchmetrics gives them one at a time); the mean "
                      f"here is {ours:.4f}, torchmetrics' CLIPScore.compute() over them: {theirs:.4f} (it clamps "
                      "the mean of the unclamped scores instead)", TorchmetricsAggregateWarning, stacklevel=4)


CLIP_S_WEIGHTS, PAC_S_WEIGHTS = "openai-clip-vit-b-32", "pacs-clip-vit-b-32"
# definition → (w, prompt) replacing the scorer's own; "paper": the scorer's (CLIP-S 2.5 and "A photo depicts ")
DEFINITIONS = {"paper": None, "torchmetrics": (100.0, "")}


def clip_s(weights: str = CLIP_S_WEIGHTS, *, device: Device = "auto", dtype: Optional[Dtype] = None,
           precision: Precision = None, batch_size: BatchSize = 64, cache_dir: Optional[PathLike] = None,
           persist_dir: Optional[PathLike] = None, cache_bytes: Bytes = DEFAULT_CACHE_BYTES,
           preprocess_workers: Workers = 0, clip_backbone: Optional[ClipBackbone] = None,
           definition: Annotated[str, OneOf(DEFINITIONS)] = "paper") -> ClipScorer:
    """CLIP-S (w = 2.5) and, with references, RefCLIP-S. ``precision="official"``: the official GPU numerics (OpenAI's
    mixed fp16 CLIP, fp16 scoring), those of the published numbers. ``preprocess_workers``: the official image
    preprocessing in that many worker processes (same pixels; for many-core hosts feeding a GPU).
    ``definition``: ``"paper"`` (Hessel et al. 2021) or ``"torchmetrics"`` (100·max(cos, 0), no prompt)."""
    return ClipScorer(weights, w=2.5, name="clip_s", device=device, dtype=dtype, precision=precision,
                      official_fp16=True, batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir,
                      cache_bytes=cache_bytes, preprocess_workers=preprocess_workers, clip_backbone=clip_backbone,
                      definition=definition)


def pac_s(weights: str = PAC_S_WEIGHTS, *, device: Device = "auto", dtype: Optional[Dtype] = None,
          precision: Precision = None, batch_size: BatchSize = 64, cache_dir: Optional[PathLike] = None,
          persist_dir: Optional[PathLike] = None, cache_bytes: Bytes = DEFAULT_CACHE_BYTES,
          preprocess_workers: Workers = 0, clip_backbone: Optional[ClipBackbone] = None) -> ClipScorer:
    """PAC-S (w = 2.0) and, with references, RefPAC-S. ``precision="official"``: the official numerics (the official
    code casts CLIP to fp32 and scores in fp32 numpy)."""
    return ClipScorer(weights, w=2.0, name="pac_s", device=device, dtype=dtype, precision=precision,
                      official_fp16=False, batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir,
                      cache_bytes=cache_bytes, preprocess_workers=preprocess_workers, clip_backbone=clip_backbone)
