"""A metric suite in one pass over several systems' captions of the same images.

* Each distinct image is decoded once per chunk of ``chunk_images`` images and the decoded images go to every image
  metric, for every system (scorers take decoded images as they are; their feature caches key them by content).
* Scorers are loaded once, with one shared backbone per distinct CLIP weights and settings
  (:class:`capeval.backbones.sharing.SharedBackbones`, as EnsembEval's components): RefCLIP-S and Polos share OpenAI
  CLIP ViT-B/32, its load, its forwards and its feature caches.
* A per-sample metric scores a chunk's captions of every system in one call, so each distinct text (references
  shared by the systems, captions repeated across systems) is encoded once per encoder (within the encoders'
  bounded feature caches); its scores are bitwise those of the metric run alone, since every capeval encoder runs in
  shapes that do not depend on the batch.
* The COCO metrics (BLEU-1..4, METEOR, ROUGE-L, CIDEr-D, SPICE) run over the whole input of each system, as
  pycocoevalcap does (:func:`capeval.text.coco.score_coco_group`: references tokenized once for all systems).
  EnsembEval is the weighted sum of the suite's own component scores (so its official CIDEr component is the
  whole-input CIDEr-D, as when it runs alone).

Memory grows with the chunk (decoded images, features of one chunk's texts) and with the per-image score lists,
not with the decoded input.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence

import numpy as np
from tqdm.auto import tqdm

from capeval.backbones.sharing import SharedBackbones
from capeval.core.errors import InputError
from capeval.core.inputs import ValidInputs, check_caption
from capeval.core.provenance import hashcode
from capeval.core.scoring import get_scorer_spec, scorers
from capeval.core.version import __version__
from capeval.functional.corpus_statistics import CorpusStatistics, defined_mean_statistics, mean_statistics
from capeval.suite.images import decode_images, image_sources, source_identity
from capeval.suite.metrics import expand_metrics
from capeval.suite.texts import refuse_line_breaks

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_IMAGES = 256
ENSEMBEVAL = "ensembeval"


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


def score_suite(ground_truth, systems: Sequence, metrics: Sequence[str], *,
                images: Optional[Mapping[Hashable, Any]] = None, images_root=None,
                options: Optional[Mapping[str, Mapping]] = None, device: str = "auto", dtype=None,
                batch_size: Optional[int] = None, cache_dir=None, show_progress: Optional[bool] = None,
                chunk_images: int = DEFAULT_CHUNK_IMAGES) -> SuiteScores:
    """Score ``systems`` (:class:`capeval.core.records.SystemCaptions`, all on the same images) against
    ``ground_truth`` (:class:`capeval.core.records.GroundTruth`) with ``metrics`` (:func:`expand_metrics` names) in
    one pass. Images come from ``images`` (image id → anything ``load_image`` takes) when given, else the image the
    ground truth embeds, else its file under ``images_root``. ``options``: per scorer, its options; ``device``,
    ``dtype``, ``batch_size``, ``cache_dir``: given to every scorer that accepts them (``None``: its default).
    ``show_progress``: progress bars on stderr per stage (``None``: when stderr is a terminal)."""
    if isinstance(chunk_images, bool) or not isinstance(chunk_images, int) or chunk_images < 1:
        raise InputError(f"chunk_images must be a positive int, not {chunk_images!r}")
    names = expand_metrics(metrics)
    options = _checked_options(names, options or {})
    image_ids, captions, references = _evaluation_set(ground_truth, systems)
    plan = _Plan(names, options, has_references=references is not None)
    if plan.coco:
        refuse_line_breaks(ground_truth, systems, image_ids)
    sources = (image_sources(ground_truth, image_ids, images=images, images_root=images_root)
               if plan.needs_images else None)
    runtime = {"device": device, "dtype": dtype, "batch_size": batch_size, "cache_dir": cache_dir}
    backbones = SharedBackbones({k: v for k, v in runtime.items() if v is not None})
    loaded = {name: backbones.load(name, options.get(name, {})) for name in plan.loaded}
    run = _Pass(image_ids, captions, references, loaded, backbones, show_progress)
    run.coco(plan.coco, plan.coco_backend)
    run.chunked(plan.chunked, sources, chunk_images)
    if ENSEMBEVAL in names:
        run.ensembeval(options.get(ENSEMBEVAL, {}))
    keys = [key for name in names for key in run.keys_of[name]]
    counts = run.counts()
    logger.debug("suite pass: %s", counts)
    systems_names = list(captions)
    return SuiteScores(
        image_ids=list(image_ids), keys=keys,
        corpus={s: {k: run.corpus[s][k] for k in keys} for s in systems_names},
        per_image={s: {k: run.per_image[s][k] for k in keys} for s in systems_names},
        statistics={s: {k: run.statistics[s][k] for k in keys} for s in systems_names},
        metrics={k: run.metrics[k] for k in keys}, counts=counts,
        undefined_images={s: dict(run.undefined[s]) for s in systems_names if run.undefined[s]})


def _checked_options(names: List[str], options: Mapping[str, Mapping]) -> Dict[str, Dict]:
    """``options`` by scorer name, each checked against its scorer (and against what a suite can score)."""
    checked: Dict[str, Dict] = {}
    for name, values in options.items():
        spec = get_scorer_spec(name)
        if spec.name not in names:
            raise InputError(f"options given for {name!r}, which is not among the suite's metrics {names}")
        if not isinstance(values, Mapping):
            raise InputError(f"options of {name!r} must be a mapping of option names to values, not {values!r}")
        spec.check_options(values)
        checked[spec.name] = dict(values)
    if checked.get("polos", {}).get("statistics", "per_sentence") != "per_sentence":
        raise InputError("polos statistics='batch' (the official batch-wide statistics) depends on which captions "
                         "share a batch, so a suite cannot score it in one pass; score it alone (capeval score)")
    stray = sorted(set(checked.get(ENSEMBEVAL, {})) - {"weights"})
    if stray:
        raise InputError(f"in a suite, ensembeval takes only 'weights' (its components are the suite's own "
                         f"scorers: give their options under their names), not {stray}")
    return checked


def _evaluation_set(ground_truth, systems: Sequence):
    """The scored image ids (ground-truth order), each system's captions in that order, and the references
    (``None`` when no image has any); every caption and reference checked, systems on other images refused."""
    if not systems:
        raise InputError("no systems to score")
    names = [system.name for system in systems]
    if len(set(names)) != len(names):
        raise InputError(f"system names must be unique, got {names}")
    covered = set(systems[0].captions)
    for system in systems[1:]:
        if set(system.captions) != covered:
            differ = sorted(covered.symmetric_difference(system.captions), key=repr)[:5]
            raise InputError(f"systems {systems[0].name!r} and {system.name!r} caption different images "
                             f"(e.g. {differ}): a suite compares systems on the same images")
    unknown = [i for i in systems[0].captions if i not in ground_truth.images]
    if unknown:
        raise InputError(f"system {systems[0].name!r} captions images not in the ground truth: {unknown[:5]}")
    image_ids = [i for i in ground_truth.images if i in covered]
    if not image_ids:
        raise InputError("the systems caption none of the ground truth's images")
    captions = {system.name: [check_caption(system.captions[i], system.caption_where(i)) for i in image_ids]
                for system in systems}
    references = [[check_caption(r, f"reference {j} of image {i!r}")
                   for j, r in enumerate(ground_truth.images[i].references)] for i in image_ids]
    without = [i for i, refs in zip(image_ids, references) if not refs]
    if len(without) == len(image_ids):
        return image_ids, captions, None
    if without:
        raise InputError(f"images {without[:5]} have no reference caption while others have: give every scored "
                         "image its references, or none")
    return image_ids, captions, references


class _Plan:
    """Which scorers run how: the COCO group over the whole input of each system, the others (per-sample scorers) in
    chunks of images; EnsembEval's components join the scorers loaded."""

    def __init__(self, names: List[str], options: Mapping[str, Mapping], *, has_references: bool):
        from capeval.text.coco import COCO_GROUP

        registry = scorers()
        wanted = [name for name in names if name != ENSEMBEVAL]
        if ENSEMBEVAL in names:
            wanted += [c for c in _ensembeval_scorers(options.get(ENSEMBEVAL, {})) if c not in wanted]
        self.loaded = wanted
        self.coco = [name for name in wanted if name in COCO_GROUP]
        backends = {name: options.get(name, {}).get("backend", "python") for name in self.coco
                    if "backend" in registry[name].options}
        if len(set(backends.values())) > 1:
            raise InputError(f"the COCO metrics of a suite run in one pass on one backend, not {backends}")
        self.coco_backend = next(iter(backends.values()), "python")
        self.chunked = [name for name in wanted if name not in COCO_GROUP]
        self.needs_images = any(registry[name].images != "unused" for name in self.chunked)
        for name in [*wanted, *([ENSEMBEVAL] if ENSEMBEVAL in names else [])]:
            if registry[name].needs_references and not has_references:
                raise InputError(f"{name} needs references: the scored images have none")
        for name in self.chunked:
            if registry[name].is_corpus_level(options.get(name, {})):
                raise InputError(f"{name} is corpus-level (its per-sample values depend on the whole input): a suite "
                                 "scores it in chunks of images and cannot; score it alone")


def _ensembeval_weights(options: Mapping) -> Dict[str, float]:
    from capeval.ensembeval.scorer import load_weights

    return load_weights(options.get("weights", "official"))["weights"]


def _ensembeval_scorers(options: Mapping) -> List[str]:
    """The scorers EnsembEval's components come from (its weights must name capeval components only)."""
    from capeval.ensembeval.components import COMPONENTS

    weights = _ensembeval_weights(options)
    unknown = [key for key in weights if key not in COMPONENTS]
    if unknown:
        raise InputError(f"ensembeval weights name components {unknown} that are not capeval components "
                         f"({sorted(COMPONENTS)})")
    return list(dict.fromkeys(COMPONENTS[key].scorer for key in weights))


class _Pass:
    """The scores of one suite pass, filled stage by stage."""

    def __init__(self, image_ids, captions: Dict[str, List[str]], references, loaded: Dict[str, Any],
                 backbones: SharedBackbones, show_progress: Optional[bool]):
        self.image_ids, self.captions, self.references = image_ids, captions, references
        self.loaded, self.backbones = loaded, backbones
        self.disable = None if show_progress is None else not show_progress  # tqdm: None = only on a terminal
        self.per_image: Dict[str, Dict[str, List]] = {s: {} for s in captions}
        self.corpus: Dict[str, Dict[str, float]] = {s: {} for s in captions}
        self.statistics: Dict[str, Dict[str, CorpusStatistics]] = {s: {} for s in captions}
        self.undefined: Dict[str, Dict[str, int]] = {s: {} for s in captions}
        self.over_defined: set = set()  # keys whose corpus value is the mean over their defined images
        self.metrics: Dict[str, Dict] = {}
        self.keys_of: Dict[str, List[str]] = {}
        self.decodes = 0
        self._cache_sizes = self._feature_entries()

    def _progress(self, total: int, desc: str, unit: str):
        return tqdm(total=total, desc=desc, unit=unit, disable=self.disable)

    def _describe(self, name: str, keys: List[str]) -> None:
        scorer = self.loaded[name]
        self.keys_of[name] = keys
        self.over_defined.update(key for key in keys if key in scorer.mean_over_defined)
        for key in keys:
            self.metrics[key] = {"scorer": name, "hashcode": scorer.hashcode, "provenance": scorer.provenance,
                                 "corpus_level": bool(scorer.is_corpus_level()), "higher_is_better": True,
                                 "mean_over_defined": key in scorer.mean_over_defined}

    def coco(self, names: List[str], backend: str) -> None:
        """The COCO metrics over the whole input of every system (references tokenized once), on ``backend``."""
        if not names:
            return
        from capeval.text.coco import score_coco_group

        with self._progress(1, f"scoring {', '.join(names)}", "pass") as bar:
            values = score_coco_group(list(self.captions.values()), self.references, metrics=names, backend=backend)
            bar.update(1)
        keys = list(values[0])
        for name in names:
            self._describe(name, [key for key in keys if _scorer_key(key) == name])
        for system, by_key in zip(self.captions, values):
            for key, value in by_key.items():
                self.per_image[system][key] = list(value.per_sample)
                self.corpus[system][key] = value.corpus
                self.statistics[system][key] = value.statistics

    def chunked(self, names: List[str], sources: Optional[List], chunk_images: int) -> None:
        """Per-sample scorers, chunk by chunk of distinct images (:func:`chunks_of_images`): each chunk's images
        decoded once, then each scorer on the captions of every system at once."""
        if not names:
            return
        n, systems = len(self.image_ids), list(self.captions)
        columns: Dict[str, Dict[str, List[float]]] = {s: {} for s in systems}
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
                    self._score_chunk(name, systems, rows, decoded, refs, columns)
                    bars[name].update(len(rows) * len(systems))
        finally:
            for bar in [decoding, *bars.values()]:
                bar.close()
        for system in systems:
            for key, values in columns[system].items():
                self._record(system, key, values)

    def _score_chunk(self, name: str, systems: List[str], rows: List[int], decoded, refs, columns) -> None:
        scorer, spec = self.loaded[name], scorers()[name]
        predictions = [self.captions[system][i] for system in systems for i in rows]
        images = decoded * len(systems) if decoded is not None and spec.images != "unused" else None
        references = refs * len(systems) if refs is not None and spec.references != "unused" else None
        given = ValidInputs(predictions, images, references)
        result = scorer.score_inputs(given)
        keys = list(scorer.score_keys(given))
        if name not in self.keys_of:
            self._describe(name, keys)
        for key in keys:
            values = result[f"{key}_per_sample"]
            for position, system in enumerate(systems):
                column = columns[system].setdefault(key, [None] * len(self.image_ids))
                for i, value in zip(rows, values[position * len(rows):(position + 1) * len(rows)]):
                    column[i] = value

    def ensembeval(self, options: Mapping) -> None:
        """EnsembEval: the weighted sum of the suite's own component scores (nothing scored again)."""
        from capeval.ensembeval.scorer import is_corpus_level
        from capeval.functional.ensemble import weighted_sum

        weights = _ensembeval_weights(options)
        for system in self.captions:
            values = weighted_sum({key: self.per_image[system][key] for key in weights}, weights).tolist()
            self._record(system, ENSEMBEVAL, values)
        provenance = {"capeval": __version__, "metric": ENSEMBEVAL, "options": {"weights": weights},
                      "components": {key: self.metrics[key]["hashcode"] for key in weights}, "weights": [],
                      "tiny_random_weights": any(self.metrics[key]["provenance"].get("tiny_random_weights")
                                                 for key in weights)}
        self.keys_of[ENSEMBEVAL] = [ENSEMBEVAL]
        self.metrics[ENSEMBEVAL] = {"scorer": ENSEMBEVAL, "hashcode": hashcode(provenance), "provenance": provenance,
                                    "corpus_level": is_corpus_level(dict(options)), "higher_is_better": True}

    def _record(self, system: str, key: str, values: List[float]) -> None:
        """A per-sample key's scores, its corpus value as its scorer averages and its statistics; images where it is
        undefined (NaN) are counted."""
        self.per_image[system][key] = list(values)
        undefined = sum(1 for v in values if math.isnan(v))
        if undefined:
            self.undefined[system][key] = undefined
        if key in self.over_defined:
            self.corpus[system][key] = _mean([v for v in values if not math.isnan(v)])
            self.statistics[system][key] = defined_mean_statistics(values)
        else:
            self.corpus[system][key] = _mean(values)
            self.statistics[system][key] = mean_statistics(values)

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


def _scorer_key(key: str) -> str:
    return "bleu" if key.startswith("bleu_") else key


def _mean(values: List[float]) -> float:
    """The corpus value of a per-sample metric, as its scorer averages (:func:`capeval.core.scoring.summarize`):
    ``float(np.mean(...))`` of the per-sample values (NaN in, NaN out)."""
    return float(np.mean([float(v) for v in values])) if values else float("nan")
