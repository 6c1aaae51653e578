"""Scorers loaded together share their backbones: one :class:`~capeval.backbones.clip.ClipBackbone` per distinct CLIP
weights and settings, lent to every scorer whose registry entry says it can borrow one (``shares``). EnsembEval
builds its components this way, and so does a metric suite (:mod:`capeval.suite`): RefCLIP-S and Polos then share
OpenAI CLIP ViT-B/32, its load, its forwards and its feature caches, while PAC-S keeps its own weights.

The FACTUAL scene-graph parser needs no lending: every scorer that parses takes the process's live parser of its
weights and settings (:func:`capeval.backbones.scene_graph_parser.shared_scene_graph_parser`), so scorers loaded
here, or anywhere else in the process, share its load and generate each distinct text once."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

from capeval.core.constants import CLIP_FILES
from capeval.core.hub import resolve
from capeval.core.scoring import Scorer, ScorerSpec, scorers

# the options a shared CLIP backbone is built with (a scorer's own value, else the defaults')
CLIP_SETTINGS = ("device", "dtype", "batch_size", "cache_dir", "persist_dir", "cache_bytes", "preprocess_workers")


class SharedBackbones:
    """Loads registered scorers with ``defaults`` (runtime and cache options, given to each scorer that accepts them;
    a scorer's own options win) and one shared CLIP backbone per distinct weights and settings; ``specs``: the
    registry as the caller read it (a suite's plan; default: read now)."""

    def __init__(self, defaults: Optional[Mapping[str, Any]] = None,
                 specs: Optional[Mapping[str, ScorerSpec]] = None):
        self.defaults = dict(defaults or {})
        self.specs = scorers() if specs is None else specs
        self.clip_backbones: Dict[tuple, Any] = {}  # (CLIP weights directory, settings) -> ClipBackbone

    def options_for(self, name: str, options: Mapping[str, Any]) -> Dict[str, Any]:
        """The options scorer ``name`` is loaded with: the defaults it accepts, ``options``, and the backbones it
        borrows (none for a scorer given a ``precision``: its precision is its family's to map to a backbone)."""
        spec = self.specs[name]
        built = {**{k: v for k, v in self.defaults.items() if k in spec.options}, **options}
        if "clip_backbone" in spec.shares and "clip_backbone" not in options and built.get("precision") is None:
            built["clip_backbone"] = self.clip_backbone(spec.shared_weights(built), built)
        return built

    def load(self, name: str, options: Optional[Mapping[str, Any]] = None) -> Scorer:
        """``load_scorer(name, ...)`` with :meth:`options_for` (provenance and hashcode as when loaded alone)."""
        return self.specs[name].load(**self.options_for(name, dict(options or {})))

    def clip_backbone(self, weights: str, options: Mapping[str, Any]):
        """One :class:`ClipBackbone` per distinct CLIP weights (the directory they resolve to) and settings
        (:data:`CLIP_SETTINGS`): scorers with the same CLIP and settings share it, a scorer's own settings are
        honoured."""
        from capeval.backbones.clip import ClipBackbone

        settings = {k: options.get(k, self.defaults.get(k)) for k in CLIP_SETTINGS}
        directory = resolve(weights, list(CLIP_FILES), cache_dir=settings["cache_dir"]).resolve()
        key = (str(directory), *(str(settings[k]) for k in CLIP_SETTINGS if k != "cache_dir"))
        if key not in self.clip_backbones:
            self.clip_backbones[key] = ClipBackbone(weights, **{k: v for k, v in settings.items() if v is not None})
        return self.clip_backbones[key]
