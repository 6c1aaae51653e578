"""EnsembEval scorer: runs each component once over the whole input, then ``Σ w_m · component_m``.

Components are registered capeval scorers (see :data:`capeval.ensembeval.components.COMPONENTS`) or user-supplied
extras. Input is validated and images are decoded once for all components. Components that declare a shareable
CLIP backbone (``clip_backbone``: RefCLIP-S, PAC-S, Polos) get one :class:`ClipBackbone` per distinct set of CLIP
weights (resolved to the same files), so RefCLIP-S and Polos share OpenAI CLIP ViT-B/32, its model load and its
caches, while PAC-S keeps its own weights. CIDEr's IDF comes from the scored corpus (official) unless ``cider_idf``
fixes it (see :mod:`capeval.text.fixed_idf_cider`).
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from pathlib import Path
from typing import Annotated, Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from capeval.backbones.sharing import SharedBackbones
from capeval.core.caches import DEFAULT_CACHE_BYTES
from capeval.core.constants import ENSEMBEVAL_WEIGHTS_FILE as WEIGHTS_FILE
from capeval.core.errors import InputError, TruncationWarning
from capeval.core.hub import resolve
from capeval.core.inputs import ValidInputs
from capeval.core.keys import ScoreKey, score_key
from capeval.core.option_types import BatchSize, Bytes, Device, Dtype, PathLike, Precision, Satisfies, Workers
from capeval.core.scoring import Scorer, check_precision, scorers, summarize
from capeval.core.truncation import warn_truncated
from capeval.core.version import __version__
from capeval.ensembeval.components import COMPONENTS, OFFICIAL_WEIGHTS
from capeval.functional.ensemble import weighted_sum
from capeval.functional.fixed_idf_cider import DocumentFrequencies


def extra_component_problem(component) -> Optional[str]:
    """Why ``component`` is no extra component (``None``: it is one): a scorer (``.score``) or a callable."""
    return None if hasattr(component, "score") or callable(component) else "neither a scorer (.score) nor a callable"


# a scorer (``.score`` → ``{key}_per_sample`` or its only per-sample list) or fn(predictions, images, references)
ExtraComponent = Annotated[object, Satisfies(extra_component_problem, "a scorer (.score) or a callable")]


def component_options_problem(options: Mapping) -> Optional[str]:
    """Why ``options`` are no component options (``None``: they are): each key a registered scorer, each value options
    that scorer takes (:meth:`~capeval.core.scoring.ScorerSpec.check_options`)."""
    registry = scorers()
    for name, given in options.items():
        if name not in registry:
            return f"{name!r} is no registered scorer"
        try:
            registry[name].check_options(given)
        except InputError as error:
            return str(error)
    return None


ComponentOptions = Annotated[Mapping[str, Mapping], Satisfies(component_options_problem,
                                                               "per component scorer, the options it takes")]


def load_weights(ref: Union[str, os.PathLike, Mapping] = "official") -> Dict:
    """Weights spec: ``"official"``, a mapping, a JSON file, a folder holding it, or a hub repo id."""
    if isinstance(ref, Mapping):
        spec = copy.deepcopy(dict(ref))
    elif ref == "official":
        spec = copy.deepcopy(OFFICIAL_WEIGHTS)
    else:
        path = Path(ref)
        if not path.is_file():
            path = resolve(str(ref), [WEIGHTS_FILE]) / WEIGHTS_FILE
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"ensemble weights {path}: not a JSON weights file ({exc})") from None
    weights = spec.get("weights") if isinstance(spec, Mapping) else None
    if not isinstance(weights, Mapping) or not weights:
        raise InputError(f"ensemble weights {ref!r} hold no 'weights' mapping")
    bad = {k: v for k, v in weights.items() if isinstance(v, bool) or not isinstance(v, (int, float))}
    if bad:
        raise InputError(f"ensemble weights {ref!r}: weights must be numbers, got {bad}")
    spec["weights"] = {str(k): float(v) for k, v in weights.items()}
    return spec


class ComponentKeys(Mapping):
    """EnsembEval's key metadata: its own key, and each component's as that component's scorer declares it
    (looked up in the registry on use, so a component's title, scale and direction are stated once)."""

    OWN = {"ensembeval": ScoreKey("EnsembEval")}

    def __getitem__(self, key: str) -> ScoreKey:
        if key in self.OWN:
            return self.OWN[key]
        if key in COMPONENTS:
            return score_key(scorers()[COMPONENTS[key].scorer].scorer_class(), key)
        raise KeyError(key)

    def __iter__(self):
        return iter([*self.OWN, *COMPONENTS])

    def __len__(self) -> int:
        return len(self.OWN) + len(COMPONENTS)


class EnsembleScorer(Scorer):
    """EnsembEval with the given weights; returns ``ensembeval`` and every component, per sample and mean.

    ``precision="official"``: passed to every component with a ``precision`` option (each then reproduces its own
    official pipeline's numerics and loads its own CLIP instead of sharing one).
    ``component_options``: per registered component scorer (e.g. ``{"polos": {"statistics": "batch"}}``), checked
    against what that scorer accepts. ``cache_dir`` / ``persist_dir`` / ``cache_bytes`` reach every component that
    caches; ``preprocess_workers`` every component (and shared CLIP backbone) that preprocesses CLIP images.
    """

    name = "ensembeval"
    key_metadata = ComponentKeys()  # extra_components' keys are the caller's: undeclared

    @staticmethod
    def corpus_level_of(options: Mapping) -> bool:
        """Whether ``EnsembleScorer(**options)`` is corpus-level, known before it loads: its per-sample values depend
        on the scored corpus only through official CIDEr (IDF over the scored references); the other components
        score each sample alone. With ``cider_idf`` (fixed document frequencies) or weights without ``cider`` every
        value is per-sample, so the input may be sharded or streamed."""
        return _official_cider(load_weights(options.get("weights", "official"))["weights"], options.get("cider_idf"))

    @classmethod
    def components(cls, options: Mapping) -> Tuple[str, ...]:
        """In a suite: the scorers its weights' components come from (the suite scores them once, for itself and
        for EnsembEval); it then takes only ``weights``, whose components must be capeval components."""
        stray = sorted(set(options) - {"weights"})
        if stray:
            raise InputError(f"in a suite, ensembeval takes only 'weights' (its components are the suite's own "
                             f"scorers: give their options under their names), not {stray}")
        weights = load_weights(options.get("weights", "official"))["weights"]
        unknown = [key for key in weights if key not in COMPONENTS]
        if unknown:
            raise InputError(f"ensembeval weights name components {unknown} that are not capeval components "
                             f"({sorted(COMPONENTS)})")
        return tuple(dict.fromkeys(COMPONENTS[key].scorer for key in weights))

    @classmethod
    def compose(cls, options: Mapping, component_scores: Mapping[str, Sequence[float]]) -> List[float]:
        """``Σ w_m · component_m`` per sample, from the suite's own component scores."""
        weights = load_weights(options.get("weights", "official"))["weights"]
        return weighted_sum({key: component_scores[key] for key in weights}, weights).tolist()

    @classmethod
    def composed_provenance(cls, options: Mapping, component_metrics: Mapping[str, Mapping]) -> Dict:
        """The weights and each component's hashcode; tiny random weights when any component has them."""
        weights = load_weights(options.get("weights", "official"))["weights"]
        return {"capeval": __version__, "metric": cls.name, "options": {"weights": weights},
                "components": {key: component_metrics[key]["hashcode"] for key in weights}, "weights": [],
                "tiny_random_weights": any(component_metrics[key]["provenance"].get("tiny_random_weights")
                                           for key in weights)}

    def __init__(self, weights: Union[str, os.PathLike, Mapping] = "official", *, device: Device = "auto",
                 dtype: Optional[Dtype] = None, precision: Precision = None, batch_size: BatchSize = 64,
                 cache_dir: Optional[PathLike] = None, persist_dir: Optional[PathLike] = None,
                 cache_bytes: Bytes = DEFAULT_CACHE_BYTES, preprocess_workers: Workers = 0,
                 component_options: Optional[ComponentOptions] = None,
                 extra_components: Optional[Mapping[str, ExtraComponent]] = None,
                 cider_idf: Optional[Union[PathLike, DocumentFrequencies]] = None):
        check_precision(precision, dtype, metric=self.name)
        self.spec = load_weights(weights)
        self.weights: Dict[str, float] = self.spec["weights"]
        self.extra_components = dict(extra_components or {})
        unknown = [k for k in self.weights if k not in COMPONENTS and k not in self.extra_components]
        if unknown:
            raise KeyError(f"weights name components {unknown} that are neither capeval components "
                           f"({sorted(COMPONENTS)}) nor given in extra_components")
        self.groups: Dict[str, List[str]] = {}
        for key in self.weights:
            if key in COMPONENTS and key not in self.extra_components:
                self.groups.setdefault(COMPONENTS[key].scorer, []).append(key)
        options = {name: dict(opts) for name, opts in (component_options or {}).items()}
        stray = sorted(set(options) - set(self.groups))
        if stray:
            raise KeyError(f"component_options for {stray}, which these weights do not use ({sorted(self.groups)})")
        defaults = {"device": device, "dtype": dtype, "batch_size": batch_size, "preprocess_workers": preprocess_workers,
                    "cache_dir": cache_dir, "persist_dir": persist_dir, "cache_bytes": cache_bytes}
        if precision is not None:  # reaches the components with a precision option (CLIP-S, PAC-S, Polos, BLIP2Score)
            defaults["precision"] = precision
        # each component loaded with the defaults it accepts; those with the same CLIP weights and settings share one
        # backbone (capeval.backbones.sharing)
        self.backbones = SharedBackbones(defaults)
        self.scorers = {name: self._build(name, options.get(name, {}), cider_idf) for name in self.groups}
        # per-sample values depend on the corpus only through official CIDEr (IDF over the scored references)
        self.corpus_level = _official_cider(self.groups, cider_idf)
        self.images = "required" if self.needs_images else "optional"
        self.references = "required" if self.needs_references else "optional"

    def _build(self, name: str, options: Dict, cider_idf):
        if name == "cider" and cider_idf is not None:
            name, options = "cider_fixed_idf", {"idf": cider_idf, **options}
        return self.backbones.load(name, options)

    @property
    def clip_backbones(self) -> Dict[tuple, Any]:
        """The shared CLIP backbones, by weights directory and settings."""
        return self.backbones.clip_backbones

    @property
    def needs_references(self) -> List[str]:
        return [key for keys in self.groups.values() for key in keys if COMPONENTS[key].needs_references]

    @property
    def needs_images(self) -> List[str]:
        return [key for name, keys in self.groups.items() for key in keys if scorers()[name].needs_images]

    def validate(self, predictions, images=None, references=None, *, indices=None,
                 empty_caption="error") -> ValidInputs:
        """The shared validation step, after naming the components that need missing images or references."""
        for field, value, needed in (("references", references, self.needs_references),
                                     ("images", images, self.needs_images)):
            if value is None and needed:
                raise InputError(f"EnsembEval ({self.spec.get('name', 'custom')} weights) needs {field} for {needed}")
        return super().validate(predictions, images, references, indices=indices, empty_caption=empty_caption)

    def score_keys(self, inputs: ValidInputs) -> Tuple[str, ...]:
        return ("ensembeval", *(key for keys in self.groups.values() for key in keys), *self.extra_components)

    def _score(self, inputs: ValidInputs) -> dict:
        per_sample: Dict[str, List[float]] = {}
        truncated: Dict[str, int] = {}
        for name, keys in self.groups.items():
            spec = scorers()[name]
            given = ValidInputs(inputs.predictions, inputs.images if spec.images != "unused" else None,
                                inputs.references if spec.references != "unused" else None)
            scorer = self.scorers[name]
            with warnings.catch_warnings(record=True) as caught:  # one truncation warning for the whole call
                warnings.simplefilter("always")
                if isinstance(scorer, Scorer):  # validated once, above: components score the validated input
                    result = scorer.score_inputs(given)
                else:
                    result = scorer.score(given.predictions, images=given.images, references=given.references)
            for warning in caught:
                if not issubclass(warning.category, TruncationWarning):
                    warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
            count = sum(v for k, v in result.items() if k.endswith("truncated_texts"))
            if count:
                truncated[name] = count
            for key in keys:
                per_sample[key] = result[f"{key}_per_sample"]
        for key, component in self.extra_components.items():
            per_sample[key] = _run_extra(key, component, inputs.predictions, inputs.images, inputs.references,
                                         len(inputs))
        result = summarize({"ensembeval": weighted_sum(per_sample, self.weights).tolist(), **per_sample})
        result["truncated_texts"] = sum(truncated.values())  # texts truncated, summed over the components
        warn_truncated([f"{sum(truncated.values())} texts exceed the components' token limits ("
                        + ", ".join(f"{name} {count}" for name, count in truncated.items()) + ")" if truncated else ""])
        return result


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


def _official_cider(components, cider_idf) -> bool:
    """Whether ``components`` (names) hold CIDEr with the scored corpus's IDF (no fixed ``cider_idf``)."""
    return "cider" in components and cider_idf is None
