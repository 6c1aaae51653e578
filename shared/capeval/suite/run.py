"""``evaluate_captions``: a captioning paper's evaluation in one call: read the annotations and every system's
results, check them all (before any model loads), score the metric suite in one pass, compare the systems
(CIs, paired tests, clusters) and return the report document (``report.json``), written with every other format
when ``output`` is given.

    from capeval.suite.run import evaluate_captions
    report = evaluate_captions(["model_a.json", "model_b.json"], annotations="dataset_coco.json", split="test",
                               images="coco/", metrics=["coco", "clip_s"], baseline="model_a")
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from capeval.core.errors import InputError, ScoredThenFailedError
from capeval.core.evaluation_inputs import input_files, read_evaluation
from capeval.core.evaluation_sets import EvaluationSet
from capeval.core.version import __version__
from capeval.report.cells import tiny_weight_keys
from capeval.report.schema import SCHEMA_VERSION
from capeval.suite.engine import score_evaluation
from capeval.suite.plan import Plan, resolve_plan
from capeval.suite.saved_statistics import read_statistics, saved_statistics
from capeval.suite.texts import check_empty_caption_policy

PathLike = Union[str, os.PathLike]
WITHOUT_DETAILS = "capeval-report/2"  # the version before the images' detail records, which compare_report reads


def evaluate_captions(results: Sequence[PathLike] = (), *, annotations: Optional[PathLike] = None,
                      split: Optional[str] = None, records: Sequence[Any] = (), images: Optional[PathLike] = None,
                      metrics: Sequence[str] = ("coco",), names: Optional[Sequence[str]] = None,
                      baseline: Optional[str] = None, require_all: bool = False, resamples: int = 10000,
                      seed: int = 12345, p_values: str = "noreen", output: Optional[PathLike] = None,
                      options: Optional[Mapping[str, Mapping]] = None, device: str = "auto", dtype=None,
                      batch_size: Optional[int] = None, cache_dir: Optional[PathLike] = None,
                      show_progress: Optional[bool] = None, fields: Optional[Mapping[str, str]] = None,
                      image_format: Optional[str] = None, config: Optional[str] = None,
                      empty_caption: str = "score", command: Optional[str] = None) -> Dict:
    """Score ``metrics`` (``"coco"`` = BLEU-1..4, METEOR, ROUGE-L, CIDEr-D, SPICE where its jars exist; any
    registered scorer by name), resolved here once with ``options`` and the runtime
    (:func:`capeval.suite.plan.resolve_plan`), for every system and compare them; the report document
    (:func:`prepare_evaluation`, then :func:`run_evaluation`).

    The evaluation set is either ``annotations`` (COCO caption annotations, or a Karpathy split file with ``split``)
    with one COCO results file per system in ``results``, or ``records``: one record source per system, as
    ``capeval score --input`` reads them, references inline (``fields``, ``image_format``, ``split``, ``config`` as
    there). ``images``: the image root (COCO: the folder of ``file_name``; Karpathy: the folder holding
    ``val2014/``). ``names``: one per system (default: the file stems); ``baseline``: the name the table marks
    against. ``options``: per metric, its scorer options (``{"clip_s": {"precision": "official"}}``); ``device``,
    ``dtype``, ``batch_size``, ``cache_dir``: the suite's runtime. ``resamples`` and ``seed``: the bootstrap and
    randomization tests of :func:`capeval.statistics.systems.compare_systems` (default 10,000, sacrebleu's
    ``--paired-ar`` default: the Holm-adjusted p-values of m metric × pair tests cannot go below m/(R + 1); on at
    most 16 images the randomization test is exact and cannot go below 2/2ⁿ). ``p_values``: ``"noreen"`` (ties
    counted: valid at any number of images) or ``"sacrebleu"`` (sacrebleu 2's strict count, to compare with
    published MT numbers). ``empty_caption``: ``"score"`` (default: empty and whitespace-only captions and
    references scored as each metric's official implementation scores them, refused when a metric does not score
    them; counted in the report, ``systems[name]["empty_captions"]`` and ``coverage["empty_references"]``, and named
    in one stderr line) or ``"error"`` (refused, naming the file and record). ``command``: the command line the
    report names (``capeval evaluate`` gives its own, as typed and shell-quoted); ``None``, the default of a call from
    Python, leaves the report's ``inputs["command"]`` null (the call's files are named there all the same).

    Every input problem (malformed annotations, duplicate or unknown ids, non-text captions, systems on different
    images, ``require_all`` short of the whole set, an unknown metric or option, a ``baseline`` that is no system, a
    missing image file) is an :class:`InputError` raised before any model loads (the image files are checked by
    :func:`capeval.suite.score_suite`). So is an ``output`` folder that cannot take a file (read-only, full). The report
    files are written there as a set (:func:`capeval.report.write.write_report`); a failure after scoring raises
    :class:`ScoredThenFailedError` naming the ``scores.json`` that holds every per-image score
    (:func:`capeval.report.write.save_scores`).
    """
    suite = resolve_plan(metrics, options, device=device, dtype=dtype, batch_size=batch_size, cache_dir=cache_dir)
    prepared = prepare_evaluation(suite, results, annotations=annotations, split=split, records=records,
                                  images=images, names=names, baseline=baseline, require_all=require_all,
                                  resamples=resamples, seed=seed, p_values=p_values, output=output, fields=fields,
                                  image_format=image_format, config=config, empty_caption=empty_caption)
    return run_evaluation(prepared, show_progress=show_progress, command=command)


def run_evaluation(prepared: "EvaluationPlan", *, show_progress: Optional[bool] = None,
                   command: Optional[str] = None) -> Dict:
    """Score a prepared evaluation (:func:`prepare_evaluation`: every input checked), compare the systems and return
    the report document, written to the prepared ``output`` when there is one (:func:`evaluate_captions`)."""
    scores = score_evaluation(prepared.evaluation, prepared.suite, images_root=prepared.images,
                              show_progress=show_progress, empty_caption=prepared.empty_caption)
    from capeval.report.write import save_scores, write_report

    saved_scores = scores_document(prepared, scores)  # what is saved if the report fails
    try:
        report = build_report(prepared, scores, command=command)
        if prepared.output is not None:
            write_report(report, prepared.output, images_root=prepared.images)  # marks against the report's baseline
    except Exception as exc:
        failure = " ".join(f"{type(exc).__name__}: {exc}".split())  # the message stays one line
        try:
            saved = save_scores(saved_scores, prepared.output)
        except OSError as unsaved:
            raise ScoredThenFailedError(f"the systems were scored, then the report failed ({failure}); the per-image "
                                        f"scores could not be saved either ({unsaved})") from exc
        raise ScoredThenFailedError(f"the systems were scored, then the report failed ({failure}); "
                                    f"every per-image score is saved in {saved}") from exc
    return report


def undefined_means(undefined_images: Mapping[str, Mapping[str, int]], metrics: Mapping[str, Mapping],
                    n_images: int) -> Dict[str, Dict[str, str]]:
    """``{key: {system: cause}}`` for the means that are NaN because the metric is undefined (NaN) on some of the
    ``n_images`` images (``undefined_images``: ``{system: {key: count}}``) and its scorer averages NaN in (keys
    averaged over their defined images, ``metrics[key]["mean_over_defined"]``, are undefined only on no image)."""
    causes: Dict[str, Dict[str, str]] = {}
    for system, counts in undefined_images.items():
        for key, count in counts.items():
            if not metrics[key].get("mean_over_defined"):
                causes.setdefault(key, {})[system] = (f"undefined (NaN) on {count} of {n_images} images, so its "
                                                      "mean is")
    return causes


def compare_report(report: Mapping, *, resamples: Optional[int] = None, seed: Optional[int] = None,
                   p_values: Optional[str] = None, baseline: Optional[str] = None, source: str = "report") -> Dict:
    """A saved report (``report.json`` loaded; ``source`` names it in errors) with every CI, p-value, significance
    mark and cluster recomputed from the per-image statistics it keeps (``report["statistics"]``), nothing scored
    again, by :func:`capeval.statistics.systems.compare_systems` as :func:`evaluate_captions` calls it. ``resamples``,
    ``seed``, ``p_values`` and ``baseline`` default to the report's: then every number equals the report's, bit for
    bit. A report without statistics (``capeval-report/1``, written before they were kept) is an
    :class:`InputError`; a ``capeval-report/2`` one (written before the per-image detail records) is read as a
    :data:`SCHEMA_VERSION` one whose images have none, and the result is one."""
    from capeval.statistics.systems import compare_systems

    found = report.get("schema")
    if "statistics" not in report:
        raise InputError(f"{source}: a {found or 'schema-less'} document keeps no per-image statistics to compare "
                         f"from (a {SCHEMA_VERSION} report.json of capeval evaluate does): run capeval evaluate again")
    if found == WITHOUT_DETAILS:
        report = {**report, "schema": SCHEMA_VERSION,
                  "images": [{**image, "details": {}} for image in report["images"]]}
    elif found != SCHEMA_VERSION:
        raise InputError(f"{source}: schema {found!r}, expected {SCHEMA_VERSION!r} (or {WITHOUT_DETAILS!r}): a report "
                         "of another version")
    significance = report["significance"]
    chosen = {"resamples": significance["resamples"] if resamples is None else resamples,
              "seed": significance["seed"] if seed is None else seed,
              "p_values": significance["p_values"] if p_values is None else p_values,
              "baseline": report["baseline"] if baseline is None else baseline}
    metrics = report["metrics"]
    statistics = read_statistics(report["statistics"], len(report["images"]), source)
    comparison = compare_systems(statistics, confidence=significance["confidence"], alpha=significance["alpha"],
                                 correction=significance["correction"],
                                 undefined=undefined_means(report["undefined_images"], metrics, len(report["images"])),
                                 higher_is_better={key: metrics[key]["higher_is_better"] for key in report["keys"]},
                                 **chosen)
    compared = dict(report)
    compared["baseline"] = chosen["baseline"]
    compared["systems"] = {name: {**system, "scores": {key: {**comparison["systems"][name][key],
                                                             "value": entry["value"]}
                                                       for key, entry in system["scores"].items()}}
                           for name, system in report["systems"].items()}
    compared.update({key: value for key, value in comparison.items() if key != "systems"})
    return compared


def scores_document(plan: "EvaluationPlan", scores) -> Dict:
    """Every per-image score of a run (``scores.json``, :func:`capeval.report.write.save_scores`): image ids, the
    coverage, per system and key the corpus and per-image values, the undefined images and the detail records."""
    return {"image_ids": list(scores.image_ids), "coverage": plan.evaluation.coverage, "keys": scores.keys,
            "corpus": scores.corpus, "per_image": scores.per_image, "undefined_images": scores.undefined_images,
            "details": scores.details}


@dataclass(frozen=True)
class EvaluationPlan:
    """An evaluation checked, nothing loaded: the suite's plan, the evaluation set (ground truth, systems, coverage),
    the baseline, the files read (:func:`capeval.core.evaluation_inputs.input_files`), and how the run compares and
    writes (the arguments of :func:`evaluate_captions`)."""

    suite: Plan
    evaluation: EvaluationSet
    baseline: Optional[str]
    inputs: Dict
    images: Optional[PathLike] = None
    resamples: int = 10000
    seed: int = 12345
    p_values: str = "noreen"
    output: Optional[PathLike] = None
    empty_caption: str = "score"


def prepare_evaluation(suite: Plan, results: Sequence[PathLike] = (), *, annotations: Optional[PathLike] = None,
                       split: Optional[str] = None, records: Sequence[Any] = (), images: Optional[PathLike] = None,
                       names: Optional[Sequence[str]] = None, baseline: Optional[str] = None,
                       require_all: bool = False, resamples: int = 10000, seed: int = 12345,
                       p_values: str = "noreen", output: Optional[PathLike] = None,
                       fields: Optional[Mapping[str, str]] = None, image_format: Optional[str] = None,
                       config: Optional[str] = None, empty_caption: str = "score") -> EvaluationPlan:
    """Read and check everything :func:`evaluate_captions` is given, following ``suite`` (the :class:`Plan` its door
    resolved), without loading a model: the comparison's options, the empty-caption policy, an ``output`` folder that
    cannot take a file, the evaluation set (:func:`capeval.core.evaluation_inputs.read_evaluation`), the images' root
    and the baseline."""
    from capeval.report.write import check_writable
    from capeval.statistics.systems import check_options

    if not isinstance(suite, Plan):
        raise TypeError(f"prepare_evaluation follows a resolved Plan (capeval.suite.plan.resolve_plan at the door), "
                        f"not {type(suite).__name__}")
    empty_caption = check_empty_caption_policy(empty_caption)
    scoring_images = suite.image_scorers
    check_options(resamples, p_values=p_values)
    if output is not None:
        check_writable(output)
    evaluation = read_evaluation(results, annotations=annotations, split=split, records=records, names=names,
                                 images=images, fields=fields, image_format=image_format, config=config,
                                 require_all=require_all)
    system_names = [system.name for system in evaluation.systems]
    if baseline is not None and baseline not in system_names:
        raise InputError(f"--baseline {baseline!r} is not one of the systems {system_names} (the names are the "
                         "results files' stems, or --names)")
    if scoring_images and annotations is not None and images is None:
        raise InputError(f"{', '.join(scoring_images)} score(s) images: give the image root (--images DIR), the "
                         f"folder the image files of {evaluation.ground_truth.source} are relative to")
    return EvaluationPlan(suite, evaluation, baseline, input_files(annotations, results, records, evaluation),
                          images, resamples, seed, p_values, output, empty_caption)


def build_report(plan: EvaluationPlan, scores, *, command: Optional[str] = None) -> Dict:
    """The report document (``report.json``) from the checked plan and the suite's scores, the systems compared
    (:func:`capeval.statistics.systems.compare_systems`, with the plan's resamples, seed, p-values and baseline);
    ``command``: the command line that produced it (None from Python)."""
    from capeval.statistics.systems import compare_systems

    undefined = undefined_means(scores.undefined_images, scores.metrics, len(scores.image_ids))
    statistics = saved_statistics(scores.statistics)  # what every CI and p-value is resampled from
    images = _image_rows(plan, scores)
    comparison = compare_systems(scores.statistics, baseline=plan.baseline, resamples=plan.resamples, seed=plan.seed,
                                 p_values=plan.p_values, undefined=undefined,
                                 higher_is_better={key: scores.metrics[key]["higher_is_better"] for key in scores.keys})
    systems = {system.name: {"source": system.source,
                             "scores": {key: {**comparison["systems"][system.name][key],
                                              "value": scores.corpus[system.name][key]} for key in scores.keys},
                             "empty_captions": {"count": len(scores.empty.captions.get(system.name, [])),
                                                "image_ids": list(scores.empty.captions.get(system.name, []))}}
               for system in plan.evaluation.systems}
    report = {"schema": SCHEMA_VERSION, "capeval_version": __version__,
              "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "inputs": {**plan.inputs, "command": command},
              "coverage": {**plan.evaluation.coverage, "empty_references": scores.empty.references},
              "baseline": plan.baseline, "metrics": scores.metrics, "keys": scores.keys,
              "systems": systems}
    report["tiny_random_weights"] = tiny_weight_keys(report)
    report["undefined_images"] = scores.undefined_images  # {system: {key: images where it is NaN}}
    report.update({key: value for key, value in comparison.items() if key != "systems"})
    report["statistics"] = statistics
    report["images"] = images
    return report


def _image_rows(plan: EvaluationPlan, scores) -> List[Dict]:
    rows = []
    for index, image_id in enumerate(scores.image_ids):
        image = plan.evaluation.ground_truth.images[image_id]
        rows.append({"image_id": image_id, "file": image.file, "references": list(image.references),
                     "captions": {system.name: system.captions[image_id] for system in plan.evaluation.systems},
                     "scores": {name: {key: values[index] for key, values in per_key.items()}
                                for name, per_key in scores.per_image.items()},
                     "details": {name: {key: records[index] for key, records in per_key.items()}
                                 for name, per_key in scores.details.items()}})
    return rows
