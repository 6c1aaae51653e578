"""A metric suite in one pass over several systems' captions of the same images, following one resolved plan
(:class:`capeval.suite.plan.Plan`).

* Each distinct image is decoded once per chunk of ``chunk_images`` images and the decoded images go to every image
  metric, for every system (scorers take decoded images as they are; their feature caches key them by content).
* Scorers are loaded once, with one shared backbone per distinct CLIP weights and settings
  (:class:`capeval.backbones.sharing.SharedBackbones`, as EnsembEval's components): RefCLIP-S and Polos share OpenAI
  CLIP ViT-B/32, its load, its forwards and its feature caches.
* A per-sample scorer scores a chunk's captions of every system in one call
  (:meth:`capeval.core.scoring.Scorer.score_systems`), so each distinct text (references shared by the systems,
  captions repeated across systems) is encoded once per encoder (within the encoders' bounded feature caches); its
  scores are bitwise those of the metric run alone, since every capeval encoder runs in shapes that do not depend on
  the batch.
* A registered group's scorers (the COCO metrics) and corpus-level scorers run over the whole input of every system
  in one call (COCO: references tokenized once for all systems); a composed scorer (EnsembEval) is computed from the
  suite's own scores of its components (so its official CIDEr component is the whole-input CIDEr-D, as when it runs
  alone).

Memory grows with the chunk (decoded images, features of one chunk's texts) and with the per-image score lists,
not with the decoded input.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence

from tqdm.auto import tqdm

from capeval.backbones.sharing import SharedBackbones
from capeval.core.corpus_statistics import CorpusStatistics, KeyScores
from capeval.core.errors import InputError
from capeval.core.evaluation_sets import EvaluationSet, evaluation_set
from capeval.core.inputs import ValidInputs
from capeval.core.keys import score_key
from capeval.core.provenance import hashcode
from capeval.core.scoring import Scorer
from capeval.suite.images import decode_images, image_sources, source_identity
from capeval.suite.plan import Plan
from capeval.suite.texts import (EmptyTexts, check_empty_caption_policy, check_empty_texts, check_texts,
                                 warn_empty_texts)

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_IMAGES = 256


@dataclass
class SuiteScores:
    """Scores of every system on every metric of a suite (``keys``: the score columns in table order)."""

    image_ids: List[Hashable]
    keys: List[str]
    corpus: Dict[str, Dict[str, float]]
    per_image: Dict[str, Dict[str, List[Optional[float]]]]
    statistics: Dict[str, Dict[str, CorpusStatistics]]
    metrics: Dict[str, Dict]
    counts: Dict[str, int] = field(default_factory=dict)
    # {system: {key: images whose score is undefined (NaN)}}, where there are any
    undefined_images: Dict[str, Dict[str, int]] = field(default_factory=dict)
    # {system: {key: per-image detail records}} for the keys whose scorer reports them (SPICE's categories,
    # CAPTURE's matched, missed and invented elements: Scorer.detail_keys), in image order
    details: Dict[str, Dict[str, List[Dict]]] = field(default_factory=dict)
    # the empty (or whitespace-only) captions of each system (image ids) and the number of empty references
    empty: EmptyTexts = field(default_factory=EmptyTexts)


def score_suite(ground_truth, systems: Sequence, plan: Plan, *,
                images: Optional[Mapping[Hashable, Any]] = None, images_root=None,
                show_progress: Optional[bool] = None, chunk_images: int = DEFAULT_CHUNK_IMAGES,
                empty_caption: str = "score") -> SuiteScores:
    """Score ``systems`` (:class:`capeval.core.evaluation_sets.SystemCaptions`, all on the same images) against
    ``ground_truth`` (:class:`capeval.core.evaluation_sets.GroundTruth`) in one pass, following ``plan``, the
    :class:`Plan` a door resolved (:func:`capeval.suite.plan.resolve_plan`): the evaluation set checked by its rules
    (:func:`capeval.core.evaluation_sets.evaluation_set`), then :func:`score_evaluation`."""
    if not isinstance(plan, Plan):
        raise TypeError(f"score_suite follows a resolved Plan (capeval.suite.plan.resolve_plan at the door), not "
                        f"{type(plan).__name__}")
    return score_evaluation(evaluation_set(ground_truth, systems), plan, images=images, images_root=images_root,
                            show_progress=show_progress, chunk_images=chunk_images, empty_caption=empty_caption)


def score_evaluation(evaluation: EvaluationSet, plan: Plan, *, images: Optional[Mapping[Hashable, Any]] = None,
                     images_root=None, show_progress: Optional[bool] = None,
                     chunk_images: int = DEFAULT_CHUNK_IMAGES, empty_caption: str = "score") -> SuiteScores:
    """Score a checked evaluation set (:class:`capeval.core.evaluation_sets.EvaluationSet`) in one pass following
    ``plan``. Images come from ``images`` (image id → anything ``load_image`` takes) when given, else the image the
    ground truth embeds, else its file under ``images_root``. ``show_progress``: progress bars on stderr per stage
    (``None``: when stderr is a terminal). ``empty_caption``: ``"score"`` (empty and whitespace-only captions and
    references scored as each metric's official implementation scores them, refused when a metric of the suite does
    not score them; counted, and named in one stderr line) or ``"error"`` (refused):
    :func:`capeval.suite.texts.check_empty_texts`."""
    if isinstance(chunk_images, bool) or not isinstance(chunk_images, int) or chunk_images < 1:
        raise InputError(f"chunk_images must be a positive int, not {chunk_images!r}")
    empty_caption = check_empty_caption_policy(empty_caption)
    ground_truth, systems, image_ids = evaluation.ground_truth, evaluation.systems, list(evaluation.image_ids)
    captions, references = evaluation.captions, evaluation.references
    plan.check_references(references is not None)
    check_texts(plan.text_checks(), ground_truth, systems, image_ids)
    empty = check_empty_texts({name: plan.scorer_class(name) for name in plan.loaded}, ground_truth, systems,
                              image_ids, empty_caption)
    sources = (image_sources(ground_truth, image_ids, images=images, images_root=images_root)
               if plan.image_scorers else None)
    warn_empty_texts(empty)
    backbones = SharedBackbones({k: v for k, v in plan.runtime.items() if v is not None}, plan.specs)
    loaded = {name: backbones.load(name, plan.option(name)) for name in plan.loaded}
    run = _Pass(image_ids, captions, references, loaded, backbones, show_progress, plan)
    for unit in plan.whole_input:
        run.whole_input(list(unit))
    run.chunked(list(plan.chunked), sources, chunk_images)
    for name in plan.composed:
        run.composed(name, plan.option(name))
    keys = [key for name in plan.metrics for key in run.keys_of[name]]
    counts = run.counts()
    logger.debug("suite pass: %s", counts)
    systems_names = list(captions)
    return SuiteScores(
        image_ids=list(image_ids), keys=keys,
        corpus={s: {k: run.scores[s][k].corpus for k in keys} for s in systems_names},
        per_image={s: {k: list(run.scores[s][k].per_sample) for k in keys} for s in systems_names},
        statistics={s: {k: run.scores[s][k].statistics for k in keys} for s in systems_names},
        metrics={k: run.metrics[k] for k in keys}, counts=counts,
        undefined_images={s: dict(run.undefined[s]) for s in systems_names if run.undefined[s]},
        details={s: {k: run.scores[s][k].details for k in keys if run.scores[s][k].details is not None}
                 for s in systems_names if any(run.scores[s][k].details is not None for k in keys)},
        empty=empty)


class _Pass:
    """The scores of one suite pass, filled stage by stage."""

    def __init__(self, image_ids, captions: Dict[str, List[str]], references, loaded: Dict[str, Scorer],
                 backbones: SharedBackbones, show_progress: Optional[bool], plan: Plan):
        self.image_ids, self.captions, self.references = image_ids, captions, references
        self.plan = plan
        self.loaded, self.backbones = loaded, backbones
        self.disable = None if show_progress is None else not show_progress  # tqdm: None = only on a terminal
        self.scores: Dict[str, Dict[str, KeyScores]] = {s: {} for s in captions}
        self.undefined: Dict[str, Dict[str, int]] = {s: {} for s in captions}
        self.metrics: Dict[str, Dict] = {}
        self.keys_of: Dict[str, List[str]] = {}
        self.decodes = 0
        self._cache_sizes = self._feature_entries()

    def _progress(self, total: int, desc: str, unit: str):
        return tqdm(total=total, desc=desc, unit=unit, disable=self.disable)

    def _describe(self, name: str, keys: List[str]) -> None:
        scorer = self.loaded[name]
        self.keys_of[name] = keys
        for key in keys:
            self.metrics[key] = {"scorer": name, "hashcode": scorer.hashcode, "provenance": scorer.provenance,
                                 "corpus_level": bool(scorer.corpus_level),
                                 **score_key(scorer, key).report_fields(),
                                 "mean_over_defined": key in scorer.mean_over_defined}

    def _record(self, system: str, key: str, scores: KeyScores) -> None:
        """A key's scores of one system; images where it is undefined (NaN) are counted."""
        self.scores[system][key] = scores
        undefined = sum(1 for v in scores.per_sample if math.isnan(v))
        if undefined:
            self.undefined[system][key] = undefined

    def whole_input(self, names: List[str]) -> None:
        """Scorers scored together over the whole input of every system (a group's members: one call)."""
        lead, *peers = [self.loaded[name] for name in names]
        with self._progress(1, f"scoring {', '.join(names)}", "pass") as bar:
            values = lead.score_systems(list(self.captions.values()), None, self.references, peers=peers)
            bar.update(1)
        first = ValidInputs(next(iter(self.captions.values())), None, self.references)
        for name in names:
            self._describe(name, list(self.loaded[name].score_keys(first)))
        for system, by_key in zip(self.captions, values):
            for key, scores in by_key.items():
                self._record(system, key, scores)

    def chunked(self, names: List[str], sources: Optional[List], chunk_images: int) -> None:
        """Per-sample scorers, chunk by chunk of distinct images (:func:`chunks_of_images`): each chunk's images
        decoded once, then each scorer on the captions of every system at once; each key's values and detail records
        (:attr:`KeyScores.details`) put back in image order."""
        if not names:
            return
        n, systems = len(self.image_ids), list(self.captions)
        columns: Dict[str, Dict[str, List[float]]] = {s: {} for s in systems}
        records: Dict[str, Dict[str, List[Dict]]] = {s: {} for s in systems}
        bars = {name: self._progress(n * len(systems), f"scoring {name}", "caption") for name in names}
        decoding = self._progress(n if sources is not None else 0, "decoding images", "image")
        try:
            for rows in chunks_of_images(sources, n, chunk_images):
                decoded = None
                if sources is not None:
                    decoded, count = decode_images([sources[i] for i in rows], [self.image_ids[i] for i in rows])
                    self.decodes += count
                    decoding.update(len(rows))
                refs = None if self.references is None else [self.references[i] for i in rows]
                for name in names:
                    self._score_chunk(name, rows, decoded, refs, columns, records)
                    bars[name].update(len(rows) * len(systems))
        finally:
            for bar in [decoding, *bars.values()]:
                bar.close()
        for name in names:
            for system in systems:
                for key in self.keys_of[name]:
                    scores = self.loaded[name].key_scores(key, columns[system][key])
                    self._record(system, key, replace(scores, details=records[system].get(key)))

    def _score_chunk(self, name: str, rows: List[int], decoded, refs, columns, records) -> None:
        scorer, spec = self.loaded[name], self.plan.specs[name]
        values = scorer.score_systems([[self.captions[system][i] for i in rows] for system in self.captions],
                                      decoded if spec.images != "unused" else None,
                                      refs if spec.references != "unused" else None)
        if name not in self.keys_of:
            self._describe(name, list(values[0]))
        for system, by_key in zip(self.captions, values):
            for key, scores in by_key.items():
                _place(columns[system], key, rows, scores.per_sample, len(self.image_ids))
                if scores.details is not None:
                    _place(records[system], key, rows, scores.details, len(self.image_ids))

    def composed(self, name: str, options: Mapping) -> None:
        """A composed scorer (EnsembEval) from the suite's own scores of its components (nothing scored again)."""
        spec = self.plan.specs[name]
        scorer_class = spec.scorer_class()
        provenance = scorer_class.composed_provenance(options, self.metrics)
        values = {system: scorer_class.compose(options, {key: self.scores[system][key].per_sample
                                                         for key in self.scores[system]})
                  for system in self.captions}
        self.metrics[name] = {"scorer": name, "hashcode": hashcode(provenance), "provenance": provenance,
                              "corpus_level": spec.is_corpus_level(options),
                              **score_key(scorer_class, name).report_fields(),
                              "mean_over_defined": name in scorer_class.mean_over_defined}
        self.keys_of[name] = [name]
        composed = {system: scorer_class.key_scores(name, values[system]) for system in self.captions}
        for system, scores in composed.items():
            self._record(system, name, scores)

    def _feature_entries(self) -> Dict[str, int]:
        """Features the shared CLIP backbones have computed (or read from a persisted cache) so far: entries added
        to their bounded caches, evicted ones included."""
        entries = {"clip_image_features": 0, "clip_text_features": 0}
        for backbone in self.backbones.clip_backbones.values():
            entries["clip_image_features"] += len(backbone.image_cache) + backbone.image_cache.evictions
            entries["clip_text_features"] += len(backbone.text_cache) + backbone.text_cache.evictions
        return entries

    def counts(self) -> Dict[str, int]:
        """What the pass did: images decoded, scorers and shared CLIP backbones loaded, CLIP features computed."""
        now = self._feature_entries()
        return {"images": len(self.image_ids), "systems": len(self.captions), "image_decodes": self.decodes,
                "scorer_loads": len(self.loaded), "clip_backbone_loads": len(self.backbones.clip_backbones),
                **{key: now[key] - self._cache_sizes.get(key, 0) for key in now}}


def _place(columns: Dict[str, List], key: str, rows: List[int], values: Sequence, n: int) -> None:
    """A chunk's ``values`` of ``key`` (one per row) into its column of ``n`` images, at ``rows``."""
    column = columns.setdefault(key, [None] * n)
    for i, value in zip(rows, values):
        column[i] = value


def chunks_of_images(sources: Optional[List], n: int, chunk_images: int) -> List[List[int]]:
    """The rows of each chunk: ``chunk_images`` distinct images at a time (rows whose images are the same file are in
    one chunk, so each file is decoded once), in input order; without images, ``chunk_images`` rows at a time."""
    if sources is None:
        return [list(range(start, min(start + chunk_images, n))) for start in range(0, n, chunk_images)]
    rows_of: Dict[Hashable, List[int]] = {}
    for i, source in enumerate(sources):
        rows_of.setdefault(source_identity(source), []).append(i)
    distinct = list(rows_of.values())
    return [sorted(i for rows in distinct[start:start + chunk_images] for i in rows)
            for start in range(0, len(distinct), chunk_images)]
