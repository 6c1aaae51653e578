"""The scorer contract: registry entries, the base class every scorer derives from, and ``load_scorer``.

A registry entry (:class:`ScorerSpec`) declares what a scorer needs (images, references) and names its factory, whose
signature states its options and their defaults (stated nowhere else); its scorer class declares the rest, as
:class:`Scorer`'s contract lists it (what it must define, what it may declare, the defaults). Every entry point
(evaluate modules, ``load_scorer``, the CLI, the Trainer hook, the demos) goes through :meth:`Scorer.score`, which
validates the input with one shared step (:func:`capeval.core.inputs.validate_inputs`) before any model runs. A
scorer returns, for each of its scores ``k``, the corpus mean under ``k`` and the per-sample list under
``f"{k}_per_sample"``.
Empty captions follow one policy at every entry point: :mod:`capeval.core.empty_captions`.
"""

from __future__ import annotations

import functools
import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
import typing
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from capeval.core.corpus_statistics import KeyScores, per_sample_mean
from capeval.core.discovery import add_registered, import_attr, load_registrations
from capeval.core.errors import InputError
from capeval.core.hub import recording_resolutions
from capeval.core.empty_captions import (EmptyCaption, PolicyInputs, empty_caption_policy, validate_allowing_empty,
                                         with_empty_captions)
from capeval.core.inputs import NEEDS, ValidInputs
from capeval.core.keys import ScoreKey
from capeval.core.module_card import card_options
from capeval.core.option_help import OPTION_HELP
from capeval.core.option_types import PRECISIONS, Precision, describe, option_refusal, shown, value_problem
from capeval.core.provenance import build_provenance, effective_options, hashcode

REQUIRED = inspect.Parameter.empty  # the default of an option that has none
UNDECLARED = inspect.Parameter.empty  # the declaration of an option its factory does not annotate


@dataclass(frozen=True)
class ScorerOption:
    """One keyword option of a scorer's factory: its name, its default (:data:`REQUIRED` when it has none), its help,
    and the values it takes (its annotation, :mod:`capeval.core.option_types`; :data:`UNDECLARED` when it has none)."""

    name: str
    default: Any
    help: str
    declared: Any = UNDECLARED

    @property
    def values(self) -> str:
        """The values it takes, in words."""
        return "" if self.declared is UNDECLARED else describe(self.declared)


@dataclass(frozen=True)
class ScorerSpec:
    """What a registered scorer needs; what it offers is read on use from its factory (``"module:attr"``, imported
    then): its options and their defaults are the factory's keyword parameters, the values each takes their
    annotations (:mod:`capeval.core.option_types`), their help :data:`OPTION_HELP` or ``own_option_help``; its
    capabilities (corpus level, backbone sharing, ...) are the declarations of its scorer class (:meth:`scorer_class`,
    :class:`Scorer`'s contract)."""

    name: str
    factory: Union[str, Callable]  # "module:attr" (every registered family); a callable for ad-hoc scorers
    images: str  # "required" | "optional" | "unused"
    references: str  # "required" | "optional" | "unused"
    help: str
    group: Optional[str] = None  # a registered group (:func:`register_group`) whose members are scored in one call
    card: Optional[str] = None  # "package:file.toml": its card, own option help included (capeval.core.module_card)

    def __post_init__(self):
        for field_name in ("images", "references"):
            if getattr(self, field_name) not in NEEDS:
                raise ValueError(f"{self.name}: {field_name} must be one of {NEEDS}")

    @property
    def needs_images(self) -> bool:
        return self.images == "required"

    @property
    def needs_references(self) -> bool:
        return self.references == "required"

    def load_factory(self) -> Callable:
        return import_attr(self.factory) if isinstance(self.factory, str) else self.factory

    def scorer_class(self) -> type:
        """The class of the scorers the factory builds: the factory itself, or the class its return annotation names."""
        return _scorer_class(self.load_factory())

    @property
    def options(self) -> Tuple[str, ...]:
        """The keyword options the factory accepts (anything else is an error)."""
        return tuple(_parameters(self.load_factory()))

    @property
    def defaults(self) -> Dict[str, Any]:
        return {option.name: option.default for option in self.option_list()}

    def option_list(self) -> Tuple[ScorerOption, ...]:
        """Every option with its default, help and declaration, in the factory's order."""
        declared = self.declarations()
        return tuple(ScorerOption(name, parameter.default, self.option_help(name), declared[name])
                     for name, parameter in _parameters(self.load_factory()).items())

    def declarations(self) -> Dict[str, Any]:
        """Option → its declaration, the factory's annotation (:data:`UNDECLARED` where it has none)."""
        return _declarations(self.load_factory())

    @property
    def own_option_help(self) -> Tuple[Tuple[str, str], ...]:
        """(option, help) of the options :data:`OPTION_HELP` does not explain: its card's ``[<name>.options]``."""
        return tuple(card_options(self.card, self.name).items()) if self.card else ()

    def option_help(self, option: str) -> str:
        own = dict(self.own_option_help)
        if option in own:
            return own[option]
        if option in OPTION_HELP:
            return OPTION_HELP[option]
        raise KeyError(f"{self.name}: no help for option {option!r}: add it to its card's [{self.name}.options]")

    @property
    def shares(self) -> Tuple[str, ...]:
        """The options through which a caller can lend it a backbone: those of its factory's options that are
        :data:`SHAREABLE` (a CLIP backbone: ``clip_backbone``)."""
        return tuple(option for option in self.options if option in SHAREABLE)

    def shared_weights(self, options: Mapping) -> str:
        """The CLIP weights the scorer loads under ``options`` (for lending it a backbone): its scorer class's
        :meth:`Scorer.clip_weights_of` of its options, defaults included (``None``: the default)."""
        defaults = {name: parameter.default for name, parameter in _parameters(self.load_factory()).items()}
        given = {name: value for name, value in options.items() if value is not None}
        return self.scorer_class().clip_weights_of({**defaults, **given})

    def is_corpus_level(self, options: Optional[Mapping] = None) -> bool:
        """Whether per-sample values depend on the whole scored corpus (e.g. CIDEr's IDF) under ``options``, known
        before it loads: its scorer class's :meth:`Scorer.corpus_level_of` (a loaded scorer says it as its
        ``corpus_level``). The one answer every door, the suite's plan and the integrations read."""
        return bool(self.scorer_class().corpus_level_of(dict(options or {})))

    def check_options(self, options: Mapping) -> None:
        """The name and value of every option in ``options`` checked against the factory's declarations, and a
        ``precision`` with a ``dtype`` (:func:`check_precision`): an :class:`InputError` naming the scorer, the
        option and the value, before anything loads."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise InputError(f"{self.name}: unknown option(s) {unknown}; it accepts {sorted(self.options)}")
        declared = self.declarations()
        for option, value in options.items():
            problem = None if declared[option] is UNDECLARED else value_problem(declared[option], value)
            if problem:
                raise InputError(f"{self.name}: {option_refusal(option, value, problem)}")
        if declared.get("precision") == Precision:
            check_precision(options.get("precision"), options.get("dtype"), metric=self.name)

    def load(self, **options) -> "Scorer":
        """Build the scorer with ``options`` (checked first: :meth:`check_options`), its provenance recorded
        (:func:`load_scorer`, for a spec already read from the registry)."""
        self.check_options(options)
        factory = self.load_factory()
        with recording_resolutions() as loaded:
            scorer = factory(**options)
        if isinstance(scorer, Scorer):
            scorer.provenance = build_provenance(self.name, effective_options(factory, options), loaded,
                                                 scorer.provenance_parts(), shared=self.shares)
        return scorer


# the options through which scorers can borrow a backbone (capeval.backbones.sharing lends them)
SHAREABLE = ("clip_backbone",)


@functools.lru_cache(maxsize=256)
def _parameters(factory: Callable) -> Dict[str, inspect.Parameter]:
    parameters = inspect.signature(factory).parameters
    if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        raise TypeError(f"{factory.__qualname__} takes **options: a scorer factory names each option it accepts")
    return dict(parameters)


@functools.lru_cache(maxsize=256)
def _declarations(factory: Callable) -> Dict[str, Any]:
    hints = typing.get_type_hints(factory.__init__ if isinstance(factory, type) else factory, include_extras=True)
    return {name: hints.get(name, UNDECLARED) for name in _parameters(factory)}


@functools.lru_cache(maxsize=256)
def _scorer_class(factory: Callable) -> type:
    if isinstance(factory, type):
        return factory
    returned = typing.get_type_hints(factory).get("return")
    if not (isinstance(returned, type) and issubclass(returned, Scorer)):
        raise TypeError(f"{factory.__qualname__}: a scorer factory function's return annotation names its Scorer class")
    return returned


def options_markdown(name: str) -> str:
    """The options table of scorer ``name`` for its card, from its signature (defaults, the values each takes) and
    help (a test keeps the cards equal to it: paste ``print(options_markdown(name))`` into the card)."""
    spec = get_scorer_spec(name)
    rows = [f"| `{o.name}` | {'required' if o.default is REQUIRED else f'`{o.default!r}`'} | "
            f"{o.values.replace('|', '/')} | {o.help.replace('|', '/')} |" for o in spec.option_list()]
    return "\n".join([f"<!-- options of {spec.name}: generated by capeval.core.scoring.options_markdown -->",
                      "| option | default | values | meaning |", "|---|---|---|---|", *rows,
                      "<!-- end of options -->"])


def check_precision(precision, dtype, *, metric: str, choices: Tuple = PRECISIONS) -> bool:
    """``precision`` checked, the same way for every scorer and backbone that has one: whether it is other than the
    default, ``choices[0]`` (a scorer's ``"official"``: the official numerics). Such a precision sets the dtypes
    itself, so it refuses a ``dtype``."""
    if precision not in choices:
        raise InputError(f"{metric}: precision must be one of {choices}, not {precision!r}")
    if precision != choices[0] and dtype is not None:
        raise InputError(f"{metric}: precision={precision!r} sets the dtypes itself: leave dtype unset")
    return precision != choices[0]


_SCORERS: Dict[str, ScorerSpec] = {}


def register_scorer(name: str, *, factory: str, images: str, references: str, help: str,
                    group: Optional[str] = None, card: Optional[str] = None) -> ScorerSpec:
    """Add a scorer to the registry (called from a family's ``registration.py``): ``factory`` (``"module:attr"``, a
    class or a function whose return annotation names the class) states its options; ``group``: the registered group
    it is scored with (one call for the group's members of a suite: :meth:`Scorer.score_systems`'s ``peers``);
    ``card``: its card (``"package:file.toml"``, a table named after the scorer: its evaluate module's text,
    :func:`capeval.core.module_card.module_card`, and in ``[<name>.options]`` the help of the options that
    :data:`OPTION_HELP` does not explain)."""
    return add_registered(_SCORERS, ScorerSpec(name, factory, images, references, help, group, card))


def scorers() -> Dict[str, ScorerSpec]:
    load_registrations()
    return dict(_SCORERS)


@dataclass(frozen=True)
class GroupSpec:
    """A name that stands for several scorers (``coco``: BLEU..SPICE), scored together in a suite; ``members``
    (``"module:attr"``) returns the members available here, given the scorers named besides the group."""

    name: str
    members: str
    help: str

    def available(self, asked: Sequence[str] = ()) -> Tuple[str, ...]:
        """The members available here; ``asked``: the scorers named besides the group (a member left out here but
        named is not noticed: its own error says why)."""
        return tuple(import_attr(self.members)(tuple(asked)))


_GROUPS: Dict[str, GroupSpec] = {}


def register_group(name: str, *, members: str, help: str) -> GroupSpec:
    """Add a group of scorers (called from a family's ``registration.py``; each member registers with ``group``)."""
    return add_registered(_GROUPS, GroupSpec(name, members, help))


def groups() -> Dict[str, GroupSpec]:
    load_registrations()
    return dict(_GROUPS)


# other spellings users write → the one capeval uses (besides "-" for "_" and any case, accepted everywhere)
METRIC_ALIASES = {"clipscore": "clip_s", "clip_score": "clip_s", "pacscore": "pac_s", "pac_score": "pac_s",
                  "cider_d": "cider", "ciderd": "cider", "rouge": "rouge_l", "rougel": "rouge_l", "blip2": "blip2_score",
                  "hices": "hice_s", "mpnet": "mpnet_score", **{f"bleu{n}": f"bleu_{n}" for n in range(1, 5)}}


def canonical_metric(name: str) -> str:
    """capeval's one spelling of a metric: ``"PAC-S"``/``"pacscore"`` → ``"pac_s"``, ``"bleu1"`` → ``"bleu_1"``,
    ``"CIDEr-D"`` → ``"cider"`` (capeval's ``cider`` is CIDEr-D, as pycocoevalcap's)."""
    spelled = name.strip().lower().replace("-", "_")
    return METRIC_ALIASES.get(spelled, spelled)


def scorer_of(name: str) -> str:
    """The registered scorer that computes metric ``name`` (``bleu_1``..``bleu_4`` → ``bleu``)."""
    metric = canonical_metric(name)
    return "bleu" if metric in {f"bleu_{n}" for n in range(1, 5)} else metric


def options_by_scorer(options: Mapping[str, Mapping], where: str = "options",
                      available: Optional[Mapping[str, ScorerSpec]] = None) -> Dict[str, Dict]:
    """Per-metric options keyed by any spelling (``{"CLIPScore": {...}}``) → keyed by scorer (``{"clip_s": {...}}``):
    an unknown metric, options that are not a mapping, or two spellings of one scorer (``"clip_s"`` and
    ``"CLIPScore"``: one would silently win) are an :class:`InputError` (``where``: what the mapping is called;
    ``available``: the registry as a door read it)."""
    if not isinstance(options, Mapping):
        raise InputError(f"{where} must be a mapping of metric names to their options, not {shown(options)}")
    spelled: Dict[str, str] = {}
    by_scorer: Dict[str, Dict] = {}
    for metric, values in options.items():
        if not isinstance(metric, str):
            raise InputError(f"{where}: metric names are strings, not {metric!r}")
        name = get_scorer_spec(metric, available).name
        if name in spelled:
            raise InputError(f"{where}: {name} is given twice, as {spelled[name]!r} and {metric!r} (one would "
                             "silently win): give its options once")
        if not isinstance(values, Mapping):
            raise InputError(f"{where} of {metric!r} must be a mapping of option names to values, not "
                             f"{shown(values)}")
        spelled[name], by_scorer[name] = metric, dict(values)
    return by_scorer


def get_scorer_spec(name: str, available: Optional[Mapping[str, ScorerSpec]] = None) -> ScorerSpec:
    """The registered scorer of metric ``name`` (any spelling); ``available``: the registry as a door read it
    (default: read now)."""
    available = scorers() if available is None else available
    if scorer_of(name) not in available:
        raise InputError(f"unknown metric {name!r}; known: {sorted(available)} (cider is CIDEr-D)")
    return available[scorer_of(name)]


def load_scorer(name: str, **options) -> "Scorer":
    """Build the registered scorer ``name`` (any spelling :func:`canonical_metric` knows); options it does not accept
    are an :class:`InputError`. The scorer
    records its provenance (the weights it loaded, the options that change its values): every result it returns
    carries ``provenance`` and ``hashcode``."""
    return get_scorer_spec(name).load(**options)


class Scorer(ABC):
    """Base class of every scorer: :meth:`score` validates (shared, before any model call), then :meth:`_score`.

    The contract, in one place: what a scorer states is below, and nothing else about it is discovered (no
    ``hasattr``, attribute names or method identity); ``tests/core/test_scorer_contract.py`` checks every registered
    scorer against it.

    A scorer MUST define:

    - ``name``, ``images``, ``references``: its registered name and its needs of each input (``"required"``,
      ``"optional"``, ``"unused"``), those of its registration; on the class, or set by ``__init__`` where its
      options decide them;
    - ``key_metadata``: every score key it can return → its :class:`~capeval.core.keys.ScoreKey`;
    - ``_score(inputs, **per_call_options) -> dict``: the scores of validated input (:func:`summarize`); its keyword
      parameters after ``inputs`` are the per-call options :meth:`score` accepts. Within one call it prepares each
      distinct text and image once (parses, encodings keyed by content), which is how the reference side of several
      systems is prepared once (:meth:`score_systems`).

    A scorer MAY declare (the default in brackets):

    - ``corpus_level`` [``False``]: its per-sample values depend on the whole scored corpus (CIDEr's IDF); set by
      ``__init__`` where its options decide it, and then also :meth:`corpus_level_of` [``corpus_level``], the same
      answer from its options before it loads (read by :meth:`ScorerSpec.is_corpus_level`, the one question);
    - ``states_corpus_statistics`` [``False``]: it overrides :meth:`score_systems` with the sufficient statistics of
      its corpus values, so a suite scores it (and its group's peers) over the whole input at once; a corpus-level
      scorer without it is scored alone;
    - ``text_rule`` [``None``]: a function ``(text, where)`` raising an :class:`InputError` for a text it cannot score,
      which a suite runs over its texts before any model loads;
    - a ``clip_backbone`` option of its factory (:data:`SHAREABLE`; none by default): a caller may lend it a loaded
      CLIP (:mod:`capeval.backbones.sharing`), of the weights :meth:`clip_weights_of` names [its ``weights`` option];
    - :meth:`provenance_parts` [itself]: whose ``dtype``, ``device`` and :meth:`provenance_extras` [``{}``] its
      provenance names: itself, then the models it wraps;
    - ``scores_empty_text`` [``False``], ``mean_over_defined`` [``()``], :meth:`score_keys` [``(name,)``];
    - ``detail_keys`` [``{}``]: score key → the key of its result holding one record per sample beside the values
      (a dict: CAPTURE's matched, missed and invented elements); the default :meth:`score_systems` splits them by
      system into :attr:`KeyScores.details`, which the suite carries to its report;
    - :meth:`components` [``()``]: a composed scorer's components, then :meth:`compose` and
      :meth:`composed_provenance`.

    :func:`load_scorer` sets ``provenance`` (and with it ``hashcode``).
    """

    name: str
    images: str  # "required" | "optional" | "unused"
    references: str  # "required" | "optional" | "unused"
    # every score key the scorer can return → its title, table scale, direction (capeval.core.keys)
    key_metadata: Mapping[str, ScoreKey]
    corpus_level: bool = False  # per-sample values depend on the whole scored corpus (e.g. CIDEr's IDF)
    # score_systems is its own: the sufficient statistics of its corpus values, over the whole input of every system
    states_corpus_statistics: bool = False
    # (text, where) -> None, raising an InputError naming ``where`` for a text it cannot score; run before any model
    text_rule: Optional[Callable[[str, str], None]] = None
    # the official implementation scores empty and whitespace-only captions and references, and so does this scorer
    # under empty_caption="score" (the default); False: it refuses them, naming the options that leave them out
    scores_empty_text: bool = False
    # score keys whose corpus value is the mean over the samples where they are defined (their NaN samples left
    # out, as HICE-S's local terms on captions without phrases); any other key's mean is NaN when a sample's is
    mean_over_defined: Tuple[str, ...] = ()
    # score key -> the result key of its per-sample records (one dict per sample: what the value is made of)
    detail_keys: Mapping[str, str] = {}
    provenance: Optional[dict] = None  # set by load_scorer: the weights loaded, the options that change values

    @classmethod
    def corpus_level_of(cls, options: Mapping) -> bool:
        """Whether a scorer built with ``options`` is corpus-level, known before it loads: by default its class's
        ``corpus_level``; a scorer whose options decide it states the rule here."""
        return cls.corpus_level

    @classmethod
    def clip_weights_of(cls, options: Mapping) -> str:
        """The CLIP weights a scorer built with ``options`` (defaults included) loads, for lending it one (a scorer
        whose factory takes a ``clip_backbone``): by default its ``weights`` option."""
        return options["weights"]

    def provenance_parts(self) -> Tuple[Any, ...]:
        """Whose ``dtype`` and ``device`` (the first that has one) and :meth:`provenance_extras` (each one's) its
        provenance names: by default the scorer alone; a scorer that wraps a model returns itself, then the model."""
        return (self,)

    def provenance_extras(self) -> Mapping:
        """What its provenance adds to its weights and options (e.g. the spaCy model that ran); by default nothing."""
        return {}

    @property
    def hashcode(self) -> Optional[str]:
        """Compact identity of the numbers this scorer produces (:func:`capeval.core.provenance.hashcode`)."""
        return hashcode(self.provenance) if self.provenance is not None else None

    def score(self, predictions: Sequence[str], images: Optional[Sequence] = None,
              references: Optional[Sequence] = None, *, empty_caption: EmptyCaption = "score", **options) -> dict:
        """Scores of the captions; ``empty_caption``: the policy for empty captions (module docstring); ``options``:
        the scorer's own per-call options (e.g. HICE-S's ``return_report``)."""
        self.check_call_options(options)
        return self.score_inputs(self.validate(predictions, images, references, empty_caption=empty_caption),
                                 **options)

    def validate(self, predictions, images=None, references=None, *, indices: Optional[Sequence[int]] = None,
                 empty_caption: EmptyCaption = "score") -> ValidInputs:
        """The shared validation step; ``indices`` name the samples in errors (record numbers of a chunk). Under a
        ``"skip"`` or fixed-score policy the result (every sample) also says where the empty captions are."""
        policy = empty_caption_policy(empty_caption, metric=self.name, corpus_level=self.corpus_level)
        valid, empty = validate_allowing_empty(predictions, images, references, images_needed=self.images,
                                               references_needed=self.references, metric=self.name,
                                               indices=indices, empty_caption=policy,
                                               scores_empty=self.scores_empty_text)
        if policy in ("score", "error"):
            return valid
        return PolicyInputs(valid.predictions, valid.images, valid.references, empty=tuple(empty),
                            empty_caption=policy)

    def score_keys(self, inputs: ValidInputs) -> Tuple[str, ...]:
        """The names of the per-sample scores :meth:`_score` returns for ``inputs`` (``k`` for ``k_per_sample``),
        known without scoring: an input of empty captions only still gets every score column."""
        return (self.name,)

    def check_call_options(self, options: Mapping) -> None:
        """Per-call options that :meth:`_score` does not take are an :class:`InputError` naming the valid ones."""
        accepted = _call_options(type(self))
        if accepted is None:
            return
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise InputError(f"{self.name}: unknown option(s) {unknown}; it accepts empty_caption"
                             + (f" and {sorted(accepted)}" if accepted else ""))

    def score_inputs(self, inputs: ValidInputs, **options) -> dict:
        """Score input that :meth:`validate` returned (for callers that validate with record numbers); with the
        scorer's ``provenance`` and ``hashcode`` when it was built by :func:`load_scorer`."""
        self.check_call_options(options)
        if isinstance(inputs, PolicyInputs):
            scored = inputs.scored()
            result = self._score(scored, **options) if len(scored) else {}
            result = with_empty_captions(result, inputs.empty, len(inputs), inputs.empty_caption,
                                         score_keys=self.score_keys(inputs))
        else:
            result = self._score(inputs, **options)
        if self.provenance is not None:
            result = {**result, "provenance": self.provenance, "hashcode": self.hashcode}
        return result

    @abstractmethod
    def _score(self, inputs: ValidInputs) -> dict:
        """The scores of validated input."""

    def score_systems(self, systems: Sequence[Sequence[str]], images: Optional[Sequence] = None,
                      references: Optional[Sequence] = None, *, peers: Sequence["Scorer"] = ()
                      ) -> List[Dict[str, KeyScores]]:
        """Several systems' captions of the same samples (``systems[s][i]`` describes sample i, with ``images[i]``
        and ``references[i]``; validated input), scored in one call: per system, per score key, its per-sample
        values, the statistics a resample recomputes its corpus value from, and its corpus value. ``peers``: the
        other scorers of this scorer's registered group, scored in the same call (a scorer in no group has none).

        The default, for a per-sample scorer: every system's captions in one :meth:`score_inputs` call, split by
        system, each key summarised by :meth:`key_scores`, with its ``detail_keys`` records. Each image's references
        (and image) are given once per system in that call, so a scorer prepares its reference side once by preparing
        each distinct text and image of a call once (its parses, sentence splits and embeddings keyed by content):
        the references of an image are parsed and encoded once whatever the number of systems, and a second system
        costs only its own captions. A corpus-level scorer overrides it and declares ``states_corpus_statistics``."""
        if peers:
            raise TypeError(f"{self.name} is in no group: it scores with no peers")
        if self.corpus_level:
            raise NotImplementedError(f"{self.name} is corpus-level: its values are no means of per-sample values, so "
                                      "its scorer states its own score_systems (sufficient statistics)")
        n = len(systems[0]) if systems else 0
        given = ValidInputs([caption for captions in systems for caption in captions],
                            None if images is None else list(images) * len(systems),
                            None if references is None else list(references) * len(systems))
        result = self.score_inputs(given)
        keys = self.score_keys(given)
        return [{key: self._system_scores(key, result, slice(s * n, (s + 1) * n)) for key in keys}
                for s in range(len(systems))]

    def _system_scores(self, key: str, result: Mapping, rows: slice) -> KeyScores:
        """One system's ``rows`` of a key of :meth:`score_inputs`'s ``result``: its values summarised, with the
        records ``detail_keys`` names for it."""
        scores = self.key_scores(key, result[f"{key}_per_sample"][rows])
        if key not in self.detail_keys:
            return scores
        return replace(scores, details=list(result[self.detail_keys[key]][rows]))

    @classmethod
    def key_scores(cls, key: str, per_sample: Sequence[float]) -> KeyScores:
        """A per-sample key over a corpus, averaged as :meth:`score` averages it: the mean (NaN in, NaN out), or the
        mean over the defined samples for the keys in ``mean_over_defined``."""
        return per_sample_mean(per_sample, over_defined=key in cls.mean_over_defined)

    @classmethod
    def components(cls, options: Mapping) -> Tuple[str, ...]:
        """The registered scorers whose scores this one combines in a suite (:meth:`compose`), under ``options``;
        ``()`` (the default): it scores by itself."""
        return ()

    @classmethod
    def compose(cls, options: Mapping, component_scores: Mapping[str, Sequence[float]]) -> List[float]:
        """A composed scorer's per-sample values (:meth:`components`) from its components' per-sample scores, by
        score key."""
        raise NotImplementedError(f"{cls.__name__} composes no components")

    @classmethod
    def composed_provenance(cls, options: Mapping, component_metrics: Mapping[str, Mapping]) -> Dict:
        """A composed scorer's provenance from its components' (their ``hashcode`` and ``provenance`` by score
        key)."""
        raise NotImplementedError(f"{cls.__name__} composes no components")


@functools.lru_cache(maxsize=256)
def _call_options(scorer_class: type) -> Optional[Tuple[str, ...]]:
    """The keyword options a scorer class's ``_score`` takes after its input (``None``: any, it takes ``**``)."""
    parameters = list(inspect.signature(scorer_class._score).parameters.values())[2:]  # self, inputs
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return tuple(p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


def summarize(per_sample: Dict[str, Sequence[float]]) -> Dict[str, object]:
    """``{k: list}`` → ``{k: mean, k_per_sample: list}`` (plain Python floats)."""
    out: Dict[str, object] = {}
    for key, values in per_sample.items():
        values: List[float] = [float(v) for v in values]
        out[key] = float(np.mean(values)) if values else float("nan")
        out[f"{key}_per_sample"] = values
    return out
