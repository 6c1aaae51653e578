"""HICE-S / RefHICE-S: Alpha-CLIP global and region–phrase scores, with a per-phrase / per-region report."""

from __future__ import annotations

import time
import typing
from collections import defaultdict
from typing import Annotated, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from capeval.backbones.alpha_clip import MASK_ALIGNMENTS, AlphaClip
from capeval.backbones.sam import MAX_CACHED_IMAGES, MAX_CACHED_MASKS_BYTES, RegionSettings, SegmentEverything
from capeval.core.caches import DEFAULT_CACHE_BYTES
from capeval.core.constants import CLIPSCORE_PREFIX
from capeval.core.inputs import ValidInputs, load_images, parse_references
from capeval.core.keys import ScoreKey
from capeval.core.option_types import (AtLeast, BatchSize, Bytes, Device, Dtype, OneOf, PathLike, Satisfies,
                                       value_problem)
from capeval.core.scoring import Scorer, summarize
from capeval.core.truncation import warn_truncated
from capeval.functional import hice as H
from capeval.hice_s.phrases import PARSERS, PhraseExtractor

EMPTY_PHRASE_POLICIES = ("global", "zero")


def region_settings_problem(settings: Mapping) -> Optional[str]:
    """Why a mapping of region settings is not one (``None``: it is): each key a :class:`RegionSettings` field, each
    value of that field's type."""
    fields = typing.get_type_hints(RegionSettings)
    for key, value in settings.items():
        if key not in fields:
            return f"unknown region setting {key!r}; known: {', '.join(fields)}"
        problem = value_problem(fields[key], value)
        if problem:
            return f"{key}={value!r}: {problem}"
    return None


RegionSettingsMapping = Annotated[Mapping[str, Any], Satisfies(region_settings_problem,
                                                                "a mapping of RegionSettings fields to values")]


class HiceScorer(Scorer):
    """HICE-S (reference-free) and, with references, RefHICE-S.

    Per sample: gITC = w·max(cos(Alpha-CLIP(image, whole mask), caption), 0); lITC = hMean(P, R) with P the
    mean over caption phrases of the best region similarity and R the mean over regions of the best phrase
    similarity; with references gTTC (best reference) and lTTC (phrases vs the union of the references'
    phrases). A phrase is *correct* when its precision ≥ ``threshold``; a region is *mentioned* when its
    recall ≥ ``threshold``. Captions without phrases: ``empty_phrases="global"`` drops the local terms
    (HICE = gITC), ``"zero"`` sets them to 0. An image where SAM keeps no region is scored with the whole
    image as its only region. ``phrase_parser`` is a registered parser name ("factual", "spacy") or any
    object with ``extract(captions) -> list of phrase lists``. SAM's masks are cached for at most
    ``max_cached_images`` images and ``max_cached_masks_bytes`` bytes (least recently used leave first, an evicted
    image is segmented again; scores do not change); the FACTUAL parser's cache bound is its
    ``max_cached_captions`` option (``phrase_options``). A parser loaded by name gets ``device`` and ``cache_dir``
    (where the FACTUAL weights are looked up, like Alpha-CLIP's and SAM's); FACTUAL also gets ``cache_bytes`` and
    ``persist_dir`` (its raw outputs are then kept between runs) and is the process's shared
    :class:`~capeval.backbones.scene_graph_parser.SceneGraphParser` of its weights and settings: other metrics
    holding it reuse its generations.

    Truncation is counted per call, per occurrence and whatever the caches hold: ``truncated_texts`` counts the
    captions, references and phrases over Alpha-CLIP's 77 tokens, ``parser_truncated_texts`` the captions and
    references over the phrase parser's input limit (FACTUAL: 64 tokens with its prompt; 0 for spaCy; left out for
    a plugged-in parser without ``count_truncated``). One :class:`~capeval.core.errors.TruncationWarning` per call
    names both.
    """

    name, images, references = "hice_s", "required", "optional"
    mean_over_defined = ("local_itc", "local_ttc")  # undefined for a caption without phrases
    key_metadata = {"hice_s": ScoreKey("HICE-S"), "refhice_s": ScoreKey("RefHICE-S"),  # the paper's notation
                    "global_itc": ScoreKey("gITC"), "local_itc": ScoreKey("lITC"), "global_ttc": ScoreKey("gTTC"),
                    "local_ttc": ScoreKey("lTTC")}

    def __init__(self, weights: str = "alpha-clip-vit-l-14", *, sam: str = "sam-vit-b",
                 phrase_parser: Union[Annotated[str, OneOf(PARSERS)], PhraseExtractor] = "factual", w: float = 2.5,
                 text_w: float = 1.0, threshold: float = 0.5, caption_prefix: str = CLIPSCORE_PREFIX,
                 phrase_prefix: str = "", empty_phrases: Annotated[str, OneOf(EMPTY_PHRASE_POLICIES)] = "global",
                 region_settings: Optional[Union[RegionSettings, RegionSettingsMapping]] = None,
                 mask_alignment: Annotated[str, OneOf(MASK_ALIGNMENTS)] = "official", device: Device = "auto",
                 dtype: Optional[Dtype] = None, batch_size: BatchSize = 64, cache_dir: Optional[PathLike] = None,
                 persist_dir: Optional[PathLike] = None, cache_bytes: Bytes = DEFAULT_CACHE_BYTES,
                 phrase_options: Optional[Mapping[str, Any]] = None,
                 max_cached_images: Annotated[int, AtLeast(0)] = MAX_CACHED_IMAGES,
                 max_cached_masks_bytes: Bytes = MAX_CACHED_MASKS_BYTES):
        if empty_phrases not in EMPTY_PHRASE_POLICIES:
            raise ValueError(f"empty_phrases must be one of {EMPTY_PHRASE_POLICIES}, not {empty_phrases!r}")
        self.w, self.text_w, self.threshold = w, text_w, threshold
        self.caption_prefix, self.phrase_prefix, self.empty_phrases = caption_prefix, phrase_prefix, empty_phrases
        if isinstance(region_settings, dict):
            region_settings = RegionSettings(**region_settings)
        self.backbone = AlphaClip(weights, mask_alignment=mask_alignment, device=device, dtype=dtype,
                                  batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir,
                                  cache_bytes=cache_bytes)
        self.regions = SegmentEverything(sam, settings=region_settings, device=device, cache_dir=cache_dir,
                                         max_cached_images=max_cached_images,
                                         max_cached_masks_bytes=max_cached_masks_bytes)
        if isinstance(phrase_parser, str):
            from capeval.hice_s.phrases import load_phrase_extractor

            own = {"device": device, "cache_dir": cache_dir,
                   **({"cache_bytes": cache_bytes, "persist_dir": persist_dir} if phrase_parser == "factual" else {})}
            phrase_parser = load_phrase_extractor(phrase_parser, **{**own, **(phrase_options or {})})
        self.phrases = phrase_parser
        self.timings: Dict[str, float] = defaultdict(float)

    def _timed(self, stage: str, fn, *args):
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.timings[stage] += time.perf_counter() - start

    def _encode_phrases(self, phrase_lists: Sequence[Sequence[str]]) -> List[torch.Tensor]:
        flat = [self.phrase_prefix + p for phrases in phrase_lists for p in phrases]
        dim = self.backbone.model.text_projection.shape[1]
        embeddings = self.backbone.encode_texts(flat) if flat else torch.zeros(0, dim)
        out, start = [], 0
        for phrases in phrase_lists:
            out.append(embeddings[start:start + len(phrases)])
            start += len(phrases)
        return out

    def _region_features(self, images) -> Dict[str, object]:
        found = self.regions.masks_of(images)
        masks = [m if m else [np.ones((im.height, im.width), bool)] for m, im in zip(found, images)]
        return {"masks": masks, "empty": sum(1 for m in found if not m)}

    def provenance_parts(self) -> Tuple[object, ...]:
        return (self, self.backbone)

    def provenance_extras(self) -> dict:
        """What the phrase extractor records about itself (the spaCy parser: which spaCy model ran)."""
        extras = getattr(self.phrases, "provenance_extras", None)
        return extras() if callable(extras) else {}

    def score_keys(self, inputs: ValidInputs) -> Tuple[str, ...]:
        free = ("global_itc", "hice_s", "local_itc")
        return free if inputs.references is None else (*free, "global_ttc", "local_ttc", "refhice_s")

    def _score(self, inputs: ValidInputs, *, return_report: bool = False) -> dict:
        """``return_report`` (a per-call option of :meth:`score`) adds the per-phrase / per-region report."""
        predictions, pil_images, refs = inputs.predictions, inputs.images, inputs.references
        self.timings.clear()

        regions = self._timed("segmentation", self._region_features, pil_images)
        count_parser_truncated = getattr(self.phrases, "count_truncated", None)
        if count_parser_truncated is None:
            extract = self.phrases.extract
        else:  # the parser reports its truncation; this call warns once for everything

            def extract(captions):
                return self.phrases.extract(captions, warn=False)

        caption_phrases = self._timed("parsing", extract, predictions)
        ref_phrases, flat_refs = None, []
        if refs is not None:
            flat_refs = [r for sample in refs for r in sample]
            parsed = dict(zip(flat_refs, self._timed("parsing", extract, flat_refs)))
            ref_phrases = [list(dict.fromkeys(p for r in sample for p in parsed[r])) for sample in refs]

        def encode():
            image_emb = self.backbone.encode_images(pil_images)
            region_emb = [self.backbone.encode_regions(im, m) for im, m in zip(pil_images, regions["masks"])]
            prefixed_refs = [self.caption_prefix + r for sample in refs or [] for r in sample]
            # captions and references in one call: one length bucketing
            text_emb = self.backbone.encode_texts([self.caption_prefix + p for p in predictions] + prefixed_refs)
            caption_emb = text_emb[:len(predictions)]
            phrase_emb = self._encode_phrases(caption_phrases)
            extra = None
            if refs is not None:
                extra = (text_emb[len(predictions):], self._encode_phrases(ref_phrases))
            return image_emb, region_emb, caption_emb, phrase_emb, extra

        image_emb, region_emb, caption_emb, phrase_emb, extra = self._timed("encoding", encode)
        result = self._timed("scoring", self._combine, predictions, refs, caption_phrases, ref_phrases, regions,
                             image_emb, region_emb, caption_emb, phrase_emb, extra, return_report)
        texts = [self.caption_prefix + p for p in predictions]
        texts += [self.phrase_prefix + p for phrases in caption_phrases for p in phrases]
        if refs is not None:
            texts += [self.caption_prefix + r for sample in refs for r in sample]
            texts += [self.phrase_prefix + p for phrases in ref_phrases for p in phrases]
        result["truncated_texts"] = truncated = self.backbone.truncation.count(texts)
        parts = [self.backbone.truncation.describe(truncated, len(texts), "texts (captions, references and "
                                                   "phrases)") if truncated else ""]
        if count_parser_truncated is not None:
            parsed_texts = [*predictions, *flat_refs]
            result["parser_truncated_texts"] = parser_truncated = int(count_parser_truncated(parsed_texts))
            if parser_truncated:
                limit = getattr(getattr(self.phrases, "truncation", None), "limit", None)
                parts.append(f"{parser_truncated} of {len(parsed_texts)} captions and references exceed the phrase "
                             f"parser's {f'{limit} ' if limit else ''}input tokens")
        warn_truncated(parts)
        result["no_region_images"] = regions["empty"]
        result["timings"] = dict(self.timings)
        return result

    def _combine(self, predictions, refs, caption_phrases, ref_phrases, regions, image_emb, region_emb,
                 caption_emb, phrase_emb, extra, return_report) -> dict:
        per_sample: Dict[str, List[float]] = defaultdict(list)
        reports, no_phrases = [], 0
        ref_owner_start = 0
        for i, caption in enumerate(predictions):
            g_itc = H.global_itc(image_emb[i], caption_emb[i], self.w)
            match = H.local_match(phrase_emb[i], region_emb[i], self.w) if len(caption_phrases[i]) else None
            no_phrases += match is None
            l_itc = self._local_value(match)
            per_sample["global_itc"].append(g_itc)
            per_sample["hice_s"].append(H.hice(g_itc, l_itc))
            if match is not None:
                per_sample["local_precision"].append(match.precision)
                per_sample["local_recall"].append(match.recall)
            per_sample["local_itc"].append(l_itc if l_itc is not None else float("nan"))
            if refs is not None:
                ref_emb, ref_phrase_emb = extra
                k = len(refs[i])
                g_ttc = H.global_ttc(caption_emb[i], ref_emb[ref_owner_start:ref_owner_start + k], self.text_w)
                ref_owner_start += k
                text_match = (H.local_match(phrase_emb[i], ref_phrase_emb[i], self.text_w)
                              if len(caption_phrases[i]) and len(ref_phrases[i]) else None)
                l_ttc = self._local_value(text_match)
                per_sample["global_ttc"].append(g_ttc)
                per_sample["local_ttc"].append(l_ttc if l_ttc is not None else float("nan"))
                per_sample["refhice_s"].append(H.ref_hice(g_itc, l_itc, g_ttc, l_ttc))
            if return_report:
                reports.append(self._report(caption, caption_phrases[i], match, regions["masks"][i]))
        result = summarize({k: v for k, v in per_sample.items() if k not in ("local_precision", "local_recall")})
        for key in self.mean_over_defined:
            if key in result:
                values = [v for v in result[f"{key}_per_sample"] if not np.isnan(v)]
                result[key] = float(np.mean(values)) if values else float("nan")
        result["no_phrase_captions"] = no_phrases
        if return_report:
            result["reports"] = reports
        return result

    def visualize(self, image, caption: str, references: Union[str, Sequence[str], None] = None):
        """A PIL image: regions outlined and tinted by status, the phrases listed with wrong ones marked.
        ``references``: a list of strings or one string (a single reference)."""
        from capeval.hice_s.visualize import draw_hice_report

        (pil_image,) = load_images([image])
        refs = [parse_references(references, 0)] if references else None  # a bare string is one reference
        result = self.score([caption], [pil_image], refs, return_report=True)
        return draw_hice_report(pil_image, result["reports"][0], self.regions.masks(pil_image) or
                                [np.ones((pil_image.height, pil_image.width), bool)])

    def _local_value(self, match: Optional[H.LocalMatch]) -> Optional[float]:
        if match is not None:
            return match.score
        return 0.0 if self.empty_phrases == "zero" else None

    def _report(self, caption: str, phrases: List[str], match: Optional[H.LocalMatch], masks) -> dict:
        regions = []
        for m, mask in enumerate(masks):
            ys, xs = np.nonzero(mask)
            recall = float(match.recall_per_target[m]) if match is not None else 0.0
            regions.append({
                "index": m, "area": int(mask.sum()),
                "bbox": [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1],
                "recall": recall, "mentioned": recall >= self.threshold,
                "best_phrase": phrases[int(match.best_unit[m])] if match is not None else None,
            })
        phrase_rows = [{"phrase": p, "precision": float(match.precision_per_unit[j]),
                        "correct": float(match.precision_per_unit[j]) >= self.threshold}
                       for j, p in enumerate(phrases)]
        return {
            "caption": caption, "phrases": phrase_rows, "regions": regions,
            "wrong_phrases": [row["phrase"] for row in phrase_rows if not row["correct"]],
            "unmentioned_regions": [row["index"] for row in regions if not row["mentioned"]],
        }
