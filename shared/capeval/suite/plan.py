"""One resolved plan of a metric suite, built once at the door (``capeval evaluate``, ``evaluate_captions``,
``COCOEvalCap``, the Trainer hook) and followed by the engine: the metric names expanded to registered scorers, the
name and value of every option checked against its scorer's declarations and the runtime against its own (before
any model loads), the runtime split from the per-metric options, and how each scorer runs. All of it is read from
the registry and the scorers' declarations (groups, corpus level, compositions, input needs, statistics, text rules:
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
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from capeval.core.errors import InputError
from capeval.core.option_types import RUNTIME_TYPES, option_refusal, value_problem
from capeval.core.scoring import canonical_metric, groups, options_by_scorer, scorer_of, scorers

RUNTIME = tuple(RUNTIME_TYPES)  # given to every scorer that accepts them


def expand_metrics(names: Sequence[str]) -> List[str]:
    """Scorer names to run for ``names``, in order, each once: a registered group's name (``"coco"``) → its members
    available here, a metric → its registered scorer (``"bleu_4"`` → ``"bleu"``, ``"CLIPScore"`` → ``"clip_s"``). An
    unknown name is an :class:`InputError` listing the known ones (no model loads)."""
    if isinstance(names, str) or not names:
        raise InputError(f"metrics must be a non-empty list of metric names, not {names!r}")
    known, named_groups = scorers(), groups()
    named = [scorer_of(name) for name in names if isinstance(name, str) and canonical_metric(name) not in named_groups]
    expanded: List[str] = []
    for name in names:
        if not isinstance(name, str):
            raise InputError(f"metric names must be strings, not {name!r}")
        if canonical_metric(name) in named_groups:
            members = list(named_groups[canonical_metric(name)].available(named))
        elif scorer_of(name) in known:
            members = [scorer_of(name)]
        else:
            listed = [f"{group} (the group)" for group in sorted(named_groups)] + sorted(known)
            raise InputError(f"unknown metric {name!r}; known: {', '.join(listed)}")
        expanded += [scorer for scorer in members if scorer not in expanded]
    return expanded


@dataclass(frozen=True)
class Plan:
    """A suite resolved: ``metrics`` (the scorers asked for, in table order), ``options`` (per scorer, checked),
    ``runtime`` (:data:`RUNTIME`, ``None`` values left to each scorer); then what runs how: ``loaded`` (every scorer
    that scores: the asked ones and the composed ones' components), ``whole_input`` (lists of scorers scored
    together over the whole input: a group's members, or one corpus-level scorer), ``chunked`` (per-sample scorers,
    in chunks of images) and ``composed`` (scorers computed from their components' scores, in order)."""

    metrics: Tuple[str, ...]
    options: Mapping[str, Mapping]
    runtime: Mapping[str, Any]
    loaded: Tuple[str, ...] = field(init=False)
    whole_input: Tuple[Tuple[str, ...], ...] = field(init=False)
    chunked: Tuple[str, ...] = field(init=False)
    composed: Tuple[str, ...] = field(init=False)

    def __post_init__(self):
        registry = scorers()
        parts = {name: registry[name].scorer_class().components(self.option(name)) for name in self.metrics}
        composed = tuple(name for name in self.metrics if parts[name])
        loaded = [name for name in self.metrics if not parts[name]]
        for name in composed:
            loaded += [c for c in parts[name] if c not in loaded]
        units: Dict[str, List[str]] = {}
        chunked = []
        for name in loaded:
            spec = registry[name]
            if spec.group is not None or spec.is_corpus_level(self.option(name)):
                units.setdefault(spec.group or name, []).append(name)
            else:
                chunked.append(name)
        for unit in units.values():
            reading = [name for name in unit if registry[name].images != "unused"]
            if reading:
                raise InputError(f"{reading[0]} is corpus-level under {dict(self.option(reading[0]))} (its per-sample "
                                 "values depend on the whole input) and reads images, which a suite decodes in chunks; "
                                 "score it alone (capeval score)")
            silent = [name for name in unit if not registry[name].scorer_class().states_corpus_statistics]
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

    @property
    def needs_images(self) -> bool:
        return any(scorers()[name].images != "unused" for name in self.chunked)

    def text_checks(self) -> List[Callable[[str, str], None]]:
        """The rules on texts of the scorers that run (:attr:`Scorer.text_rule`; the COCO metrics share theirs), each
        once, checked before any model loads."""
        rules = (scorers()[name].scorer_class().text_rule for name in self.loaded)
        return list(dict.fromkeys(rule for rule in rules if rule is not None))

    def check_references(self, has_references: bool) -> None:
        """A scorer that needs references, when the scored images have none, is an :class:`InputError`."""
        for name in [*self.loaded, *self.composed]:
            if scorers()[name].needs_references and not has_references:
                raise InputError(f"{name} needs references: the scored images have none")


def resolve_plan(metrics: Sequence[str], options: Optional[Mapping[str, Mapping]] = None, *, device: str = "auto",
                 dtype=None, batch_size: Optional[int] = None, cache_dir=None) -> Plan:
    """The plan of ``metrics`` (names :func:`expand_metrics` knows) with ``options`` (per metric, any spelling once,
    its scorer options) and the runtime (given to every scorer that accepts it; ``None``: its default). Every problem
    is an :class:`InputError` before any model loads: an unknown metric, options for a metric the suite does not
    score, the same metric under two spellings, a runtime value (:data:`capeval.core.option_types.RUNTIME_TYPES`),
    and the name and value of every option each scorer is given, the runtime included
    (:meth:`~capeval.core.scoring.ScorerSpec.check_options`)."""
    names = expand_metrics(metrics)
    runtime = {"device": device, "dtype": dtype, "batch_size": batch_size, "cache_dir": cache_dir}
    for option, value in runtime.items():
        problem = value_problem(RUNTIME_TYPES[option], value)
        if problem:
            raise InputError(option_refusal(option, value, problem))
    checked = options_by_scorer(options or {})
    for name, spelled in zip(checked, options or {}):
        if name not in names:
            raise InputError(f"options given for {spelled!r}, which is not among the suite's metrics {names}")
    registry = scorers()
    for name in names:
        spec = registry[name]
        given = {k: v for k, v in runtime.items() if v is not None and k in spec.options}
        spec.check_options({**given, **checked.get(name, {})})
    return Plan(tuple(names), checked, runtime)


def resolve_mixed(metrics: Sequence[str], mixed: Mapping[str, Any]) -> Plan:
    """:func:`resolve_plan` from one mapping holding runtime options (:data:`RUNTIME`) and, under metric names,
    per-metric options (``{"device": "cpu", "clip_s": {"precision": "official"}}``: ``COCOEvalCap``'s keywords,
    the Trainer hook's ``metric_options``)."""
    names = expand_metrics(metrics)
    runtime = {key: mixed[key] for key in RUNTIME if key in mixed}
    options: Dict[str, Mapping] = {}
    for key, values in mixed.items():
        if key in RUNTIME:
            continue
        known = scorer_of(key) if isinstance(key, str) else None
        if known not in names or not isinstance(values, Mapping):
            raise InputError(f"{key!r} is neither a runtime option {RUNTIME} nor one of the metrics {names} with a "
                             "dict of that metric's options")
        options[key] = values  # two spellings of one metric: refused by resolve_plan, naming both
    return resolve_plan(names, options, **runtime)


def as_plan(metrics, options: Optional[Mapping[str, Mapping]] = None, *, device: str = "auto", dtype=None,
            batch_size: Optional[int] = None, cache_dir=None) -> Plan:
    """``metrics`` when it is a resolved :class:`Plan` (then it holds the options and runtime: giving them again is
    an :class:`InputError`), else :func:`resolve_plan` of the names with ``options`` and the runtime."""
    if not isinstance(metrics, Plan):
        return resolve_plan(metrics, options, device=device, dtype=dtype, batch_size=batch_size, cache_dir=cache_dir)
    if options or (device, dtype, batch_size, cache_dir) != ("auto", None, None, None):
        raise InputError("a resolved Plan holds its options and runtime: give them to resolve_plan, not again here")
    return metrics
