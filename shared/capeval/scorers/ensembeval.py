"""EnsembEval scorer: runs each component once over the whole input, then ``Σ w_m · component_m``.

Components are capeval scorers (see :data:`capeval.models.ensembeval.COMPONENTS`) or user-supplied extras.
Images are decoded once and shared; CLIP-S and Polos share one CLIP ViT-B/32 backbone (and its caches)
when the Polos scorer accepts ``clip_backbone``. CIDEr's IDF comes from the scored corpus (official) unless
``cider_idf`` fixes it (see :mod:`capeval.scorers.fixed_idf_cider`).
"""

from __future__ import annotations

import copy
import inspect
import json
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from capeval.errors import InputError
from capeval.functional.ensemble import weighted_sum
from capeval.inputs import check_captions, check_lengths, check_references, load_images
from capeval.models.ensembeval import COMPONENTS, OFFICIAL_WEIGHTS
from capeval.scoring import scorers, summarize

WEIGHTS_FILE = "ensembeval_weights.json"
CLIP_WEIGHTS = "openai-clip-vit-b-32"  # RefCLIP-S and Polos both use OpenAI CLIP ViT-B/32
_PERSISTING_SCORERS = ("blip2_score", "clip_s", "pac_s")  # accept cache_dir/persist_dir

ExtraComponent = Union[Callable[..., Sequence[float]], Any]  # callable(predictions, images, references) or scorer


def load_weights(ref: Union[str, os.PathLike, Mapping] = "official") -> Dict:
    """Weights spec: ``"official"``, a mapping, a JSON file, a folder holding it, or a hub repo id."""
    if isinstance(ref, Mapping):
        spec = copy.deepcopy(dict(ref))
    elif ref == "official":
        spec = copy.deepcopy(OFFICIAL_WEIGHTS)
    else:
        path = Path(ref)
        if not path.is_file():
            from capeval.hub import resolve

            path = resolve(str(ref), [WEIGHTS_FILE]) / WEIGHTS_FILE
        spec = json.loads(path.read_text())
    weights = spec.get("weights")
    if not isinstance(weights, Mapping) or not weights:
        raise ValueError(f"ensemble weights {ref!r} hold no 'weights' mapping")
    spec["weights"] = {str(k): float(v) for k, v in weights.items()}
    return spec


class EnsembleScorer:
    """EnsembEval with the given weights; returns ``ensembeval`` and every component, per sample and mean."""

    def __init__(self, weights: Union[str, os.PathLike, Mapping] = "official", *, device: str = "auto", dtype=None,
                 batch_size: int = 64, cache_dir=None, persist_dir=None,
                 component_options: Optional[Mapping[str, Mapping]] = None,
                 extra_components: Optional[Mapping[str, ExtraComponent]] = None,
                 cider_idf=None):
        self.spec = load_weights(weights)
        self.weights: Dict[str, float] = self.spec["weights"]
        self.extra_components = dict(extra_components or {})
        unknown = [k for k in self.weights if k not in COMPONENTS and k not in self.extra_components]
        if unknown:
            raise KeyError(f"weights name components {unknown} that are neither capeval components "
                           f"({sorted(COMPONENTS)}) nor given in extra_components")
        runtime = {"device": device, "dtype": dtype, "batch_size": batch_size}
        persist = {"cache_dir": cache_dir, "persist_dir": persist_dir}
        options = {name: dict(opts) for name, opts in (component_options or {}).items()}
        self.groups: Dict[str, List[str]] = {}
        for key in self.weights:
            if key in COMPONENTS and key not in self.extra_components:
                self.groups.setdefault(COMPONENTS[key].scorer, []).append(key)
        share_clip = ("clip_s" in self.groups and "polos" in self.groups and "weights" not in options.get("clip_s", {})
                      and _accepts("polos", "clip_backbone"))
        backbone = None
        if share_clip:
            from capeval.clip import ClipBackbone

            backbone = ClipBackbone(CLIP_WEIGHTS, **runtime, **persist)
        self.scorers = {name: self._build(name, runtime, persist, options.get(name, {}), cider_idf, backbone)
                        for name in self.groups}

    @staticmethod
    def _build(name: str, runtime: Dict, persist: Dict, options: Dict, cider_idf, clip_backbone):
        from capeval.scoring import load_scorer

        if name == "cider" and cider_idf is not None:
            return load_scorer("cider_fixed_idf", idf=cider_idf, **runtime, **options)
        if clip_backbone is not None and name == "clip_s":
            return load_scorer("clip_s", backbone=clip_backbone, **options)
        if clip_backbone is not None and name == "polos":
            return load_scorer("polos", clip_backbone=clip_backbone, **runtime, **options)
        extra = persist if name in _PERSISTING_SCORERS else {}
        return load_scorer(name, **runtime, **extra, **options)

    @property
    def needs_references(self) -> List[str]:
        return [key for keys in self.groups.values() for key in keys if COMPONENTS[key].needs_references]

    @property
    def needs_images(self) -> List[str]:
        return [key for name, keys in self.groups.items() for key in keys if _needs_images(name)]

    def score(self, predictions: Sequence[str], images: Optional[Sequence] = None,
              references: Optional[Sequence] = None) -> dict:
        predictions = check_captions(predictions)
        n = check_lengths(predictions=predictions, images=images)
        refs = check_references(references, n) if references is not None else None
        if refs is None and self.needs_references:
            raise InputError(f"EnsembEval ({self.spec.get('name', 'custom')} weights) needs references for "
                             f"{self.needs_references}")
        if images is None and self.needs_images:
            raise InputError(f"EnsembEval ({self.spec.get('name', 'custom')} weights) needs images for "
                             f"{self.needs_images}")
        pil_images = load_images(images) if images is not None else None
        per_sample: Dict[str, List[float]] = {}
        for name, keys in self.groups.items():
            scorer_images = pil_images if _needs_images(name) else None
            result = self.scorers[name].score(predictions, images=scorer_images, references=refs)
            for key in keys:
                per_sample[key] = result[f"{key}_per_sample"]
        for key, component in self.extra_components.items():
            per_sample[key] = _run_extra(key, component, predictions, pil_images, refs, n)
        return summarize({"ensembeval": weighted_sum(per_sample, self.weights).tolist(), **per_sample})


def _needs_images(scorer_name: str) -> bool:
    spec = scorers().get(scorer_name)
    return bool(spec and spec.needs_images)


def _accepts(scorer_name: str, parameter: str) -> bool:
    """Whether the registered factory of ``scorer_name`` names ``parameter`` explicitly."""
    spec = scorers().get(scorer_name)
    return spec is not None and parameter in inspect.signature(spec.factory).parameters


def _run_extra(key: str, component: ExtraComponent, predictions, images, references, n: int) -> List[float]:
    """A user's metric: a scorer (``.score`` → ``{key}_per_sample`` or its only per-sample list) or a callable."""
    if hasattr(component, "score"):
        result = component.score(predictions, images=images, references=references)
        lists = [k for k in result if k.endswith("_per_sample")]
        if f"{key}_per_sample" in result:
            values = result[f"{key}_per_sample"]
        elif len(lists) == 1:
            values = result[lists[0]]
        else:
            raise KeyError(f"extra component {key!r}: its scorer returns {lists}; name the component after one")
    else:
        values = component(predictions, images, references)
    values = [float(v) for v in values]
    if len(values) != n:
        raise ValueError(f"extra component {key!r} returned {len(values)} scores for {n} captions")
    return values
