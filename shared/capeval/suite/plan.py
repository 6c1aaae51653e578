"""One resolved plan of a metric suite, built once at each door (``capeval evaluate``, ``evaluate_captions``,
``COCOEvalCap``, the Trainer hook) and trusted below them: every function under a door takes a :class:`Plan`, never
metric names. A door reads the registry once (:func:`select_metrics`: the metric names expanded to registered
scorers), then resolves the plan from that reading (:meth:`Selection.plan`): the name and value of every option
checked against its scorer's declarations and the runtime against its own (before any model loads), the runtime
split from the per-metric options, and how each scorer runs. All of it is read from the registry entries the plan
holds and the scorers' declarations (groups, corpus level, compositions, input needs, statistics, text rules:
:class:`capeval.core.scoring.Scorer`'s contract), so no metric is named here.

* A scorer of a registered group (``coco``) runs with the group's other scorers of the suite in one call over the
  whole input of every system (:meth:`capeval.core.scoring.Scorer.score_systems` with ``peers``); so does a
  corpus-level scorer that reads no images. Each states those statistics (``states_corpus_statistics``); one that
  does not is refused (score it alone).
* A per-sample scorer runs in chunks of images (each chunk decoded once for every image scorer).
* A composed scorer (``components`` under its options: EnsembEval) is computed from the suite's own scores of its
  components, which the plan loads (:meth:`Scorer.compose`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from capeval.core.errors import InputError
from capeval.core.option_types import RUNTIME_TYPES, option_refusal, value_problem
from capeval.core.scoring import (GroupSpec, ScorerSpec, canonical_metric, get_scorer_spec, groups, options_by_scorer,
                                  scorer_of, scorers)

RUNTIME = tuple(RUNTIME_TYPES)  # given to every scorer that accepts them


@dataclass(frozen=True)
class Plan:
    """A suite resolved: ``metrics`` (the scorers asked for, in table order), ``options`` (per scorer, checked),
    ``runtime`` (:data:`RUNTIME`, ``None`` values left to each scorer), ``specs`` (the registry as the door read it);
    then what runs how: ``loaded`` (every scorer that scores: the asked ones and the composed ones' components),
    ``whole_input`` (lists of scorers scored together over the whole input: a group's members, or one corpus-level
    scorer), ``chunked`` (per-sample scorers, in chunks of images) and ``composed`` (scorers computed from their
    components' scores, in order)."""

    metrics: Tuple[str, ...]
    options: Mapping[str, Mapping]
    runtime: Mapping[str, Any]
    specs: Mapping[str, ScorerSpec] = field(repr=False)
    loaded: Tuple[str, ...] = field(init=False)
    whole_input: Tuple[Tuple[str, ...], ...] = field(init=False)
    chunked: Tuple[str, ...] = field(init=False)
    composed: Tuple[str, ...] = field(init=False)

    def __post_init__(self):
        parts = {name: self.specs[name].scorer_class().components(self.option(name)) for name in self.metrics}
        composed = tuple(name for name in self.metrics if parts[name])
        loaded = [name for name in self.metrics if not parts[name]]
        for name in composed:
            loaded += [c for c in parts[name] if c not in loaded]
        units: Dict[str, List[str]] = {}
        chunked = []
        for name in loaded:
            spec = self.specs[name]
            if spec.group is not None or spec.is_corpus_level(self.option(name)):
                units.setdefault(spec.group or name, []).append(name)
            else:
                chunked.append(name)
        for unit in units.values():
            reading = [name for name in unit if self.specs[name].images != "unused"]
            if reading:
                raise InputError(f"{reading[0]} is corpus-level under {dict(self.option(reading[0]))} (its per-sample "
                                 "values depend on the whole input) and reads images, which a suite decodes in chunks; "
                                 "score it alone (capeval score)")
            silent = [name for name in unit if not self.specs[name].scorer_class().states_corpus_statistics]
            if silent:
                raise InputError(f"{silent[0]} is corpus-level under {dict(self.option(silent[0]))} and its scorer "
                                 "states no statistics for several systems (score_systems); score it alone "
                                 "(capeval score)")
        object.__setattr__(self, "loaded", tuple(loaded))
        object.__setattr__(self, "whole_input", tuple(tuple(unit) for unit in units.values()))
        object.__setattr__(self, "chunked", tuple(chunked))
        object.__setattr__(self, "composed", composed)

    def option(self, name: str) -> Mapping:
        """Scorer ``name``'s options (``{}``: its defaults)."""
        return self.options.get(name, {})

    def scorer_class(self, name: str) -> type:
        return self.specs[name].scorer_class()

    @property
    def image_scorers(self) -> Tuple[str, ...]:
        """The scorers that read images (chunked: a suite refuses a corpus-level one that does)."""
        return tuple(name for name in self.chunked if self.specs[name].images != "unused")

    def text_checks(self) -> List[Callable[[str, str], None]]:
        """The rules on texts of the scorers that run (:attr:`Scorer.text_rule`; the COCO metrics share theirs), each
        once, checked before any model loads."""
        rules = (self.scorer_class(name).text_rule for name in self.loaded)
        return list(dict.fromkeys(rule for rule in rules if rule is not None))

    def check_references(self, has_references: bool) -> None:
        """A scorer that needs references, when the scored images have none, is an :class:`InputError`."""
        for name in [*self.loaded, *self.composed]:
            if self.specs[name].needs_references and not has_references:
                raise InputError(f"{name} needs references: the scored images have none")


@dataclass(frozen=True)
class Selection:
    """The metrics a door asked for, expanded once against the registry read once (``specs``, ``groups``):
    ``names``, the scorers in order, each once. :meth:`plan` resolves the suite from it."""

    names: Tuple[str, ...]
    specs: Mapping[str, ScorerSpec] = field(repr=False)

    def scorer_named(self, spelled: str) -> str:
        """The registered scorer of metric ``spelled`` (any spelling); an unknown metric is an :class:`InputError`."""
        return get_scorer_spec(spelled, self.specs).name

    def by_scorer(self, options: Mapping[str, Mapping], where: str = "options") -> Dict[str, Dict]:
        """Per-metric options under any spelling → under their scorer
        (:func:`~capeval.core.scoring.options_by_scorer`, against this reading of the registry)."""
        return options_by_scorer(options, where, self.specs)

    def plan(self, options: Optional[Mapping[str, Mapping]] = None, *, device: str = "auto", dtype=None,
             batch_size: Optional[int] = None, cache_dir=None) -> Plan:
        """The plan of these metrics with ``options`` (per metric, any spelling once, its scorer options) and the
        runtime (given to every scorer that accepts it; ``None``: its default). Every problem is an
        :class:`InputError` before any model loads: options for a metric the suite does not score, the same metric
        under two spellings, a runtime value (:data:`capeval.core.option_types.RUNTIME_TYPES`), and the name and
        value of every option each scorer is given, the runtime included
        (:meth:`~capeval.core.scoring.ScorerSpec.check_options`)."""
        runtime = {"device": device, "dtype": dtype, "batch_size": batch_size, "cache_dir": cache_dir}
        for option, value in runtime.items():
            problem = value_problem(RUNTIME_TYPES[option], value)
            if problem:
                raise InputError(option_refusal(option, value, problem))
        checked = self.by_scorer(options or {})
        for name, spelled in zip(checked, options or {}):
            if name not in self.names:
                raise InputError(f"options given for {spelled!r}, which is not among the suite's metrics "
                                 f"{list(self.names)}")
        for name in self.names:
            spec = self.specs[name]
            given = {k: v for k, v in runtime.items() if v is not None and k in spec.options}
            spec.check_options({**given, **checked.get(name, {})})
        return Plan(self.names, checked, runtime, self.specs)

    def plan_mixed(self, mixed: Mapping[str, Any]) -> Plan:
        """:meth:`plan` from one mapping holding runtime options (:data:`RUNTIME`) and, under metric names,
        per-metric options (``{"device": "cpu", "clip_s": {"precision": "official"}}``: ``COCOEvalCap``'s keywords,
        the Trainer hook's ``metric_options``)."""
        runtime = {key: mixed[key] for key in RUNTIME if key in mixed}
        options: Dict[str, Mapping] = {}
        for key, values in mixed.items():
            if key in RUNTIME:
                continue
            known = scorer_of(key) if isinstance(key, str) else None
            if known not in self.names or not isinstance(values, Mapping):
                raise InputError(f"{key!r} is neither a runtime option {RUNTIME} nor one of the metrics "
                                 f"{list(self.names)} with a dict of that metric's options")
            options[key] = values  # two spellings of one metric: refused by plan, naming both
        return self.plan(options, **runtime)


def select_metrics(names: Sequence[str]) -> Selection:
    """The registry read once, and ``names`` expanded against it: scorer names to run, in order, each once (a
    registered group's name (``"coco"``) → its members available here, a metric → its registered scorer
    (``"bleu_4"`` → ``"bleu"``, ``"CLIPScore"`` → ``"clip_s"``)). An unknown name is an :class:`InputError` listing
    the known ones (no model loads)."""
    if isinstance(names, str) or not isinstance(names, Iterable) or not names:
        raise InputError(f"metrics must be a non-empty list of metric names, not {names!r}")
    names = list(names)
    for name in names:
        if not isinstance(name, str):
            raise InputError(f"metric names must be strings, not {name!r}")
    specs = scorers()
    return Selection(tuple(_expanded(names, specs, groups())), specs)


def _expanded(names: Sequence[str], known: Mapping[str, ScorerSpec], named_groups: Mapping[str, GroupSpec]
              ) -> List[str]:
    named = [scorer_of(name) for name in names if canonical_metric(name) not in named_groups]
    expanded: List[str] = []
    for name in names:
        if canonical_metric(name) in named_groups:
            members = list(named_groups[canonical_metric(name)].available(named))
        elif scorer_of(name) in known:
            members = [scorer_of(name)]
        else:
            listed = [f"{group} (the group)" for group in sorted(named_groups)] + sorted(known)
            raise InputError(f"unknown metric {name!r}; known: {', '.join(listed)}")
        expanded += [scorer for scorer in members if scorer not in expanded]
    return expanded


def resolve_plan(metrics: Sequence[str], options: Optional[Mapping[str, Mapping]] = None, *, device: str = "auto",
                 dtype=None, batch_size: Optional[int] = None, cache_dir=None) -> Plan:
    """The plan of ``metrics`` (names :func:`select_metrics` knows) with ``options`` and the runtime
    (:meth:`Selection.plan`): the door's one resolution."""
    return select_metrics(metrics).plan(options, device=device, dtype=dtype, batch_size=batch_size,
                                        cache_dir=cache_dir)
