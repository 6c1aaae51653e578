"""An evaluation's inputs as ``capeval evaluate`` and ``evaluate_captions`` take them: COCO caption annotations (or a
Karpathy split file) with one COCO results file per system, or one record source per system with references inline;
read, checked together (:func:`capeval.core.evaluation_sets.evaluation_set`) and named with their digests for the
report."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from capeval.core.coco_files import read_ground_truth, read_results
from capeval.core.errors import InputError
from capeval.core.evaluation_sets import EvaluationSet, GroundTruth, SystemCaptions, evaluation_set
from capeval.core.hashing import file_sha256
from capeval.core.inline_evaluation import common_ground_truth, read_inline

PathLike = Union[str, os.PathLike]


def read_evaluation(results: Sequence[PathLike] = (), *, annotations: Optional[PathLike] = None,
                    split: Optional[str] = None, records: Sequence[Any] = (), names: Optional[Sequence[str]] = None,
                    images: Optional[PathLike] = None, fields: Optional[Mapping[str, str]] = None,
                    image_format: Optional[str] = None, config: Optional[str] = None,
                    require_all: bool = False) -> EvaluationSet:
    """The evaluation set of ``annotations`` (``split``: a Karpathy split) with ``results``, or of ``records``
    (``fields``, ``image_format``, ``split``, ``config`` as ``capeval score`` reads them), one system per file or
    source (``names``: theirs, default: the stems), checked by the evaluation-set rules (``require_all`` as
    :func:`~capeval.core.evaluation_sets.coverage` takes it), every scored image's file inside ``images``, the image
    root, when given."""
    ground_truth, systems = _read_systems(results, annotations, split, records, names, images, fields, image_format,
                                          config)
    evaluation = evaluation_set(ground_truth, systems, require_all=require_all)
    if images is not None:
        ground_truth.check_inside(evaluation.image_ids, images)
    return evaluation


def _read_systems(results: Sequence[PathLike], annotations: Optional[PathLike], split: Optional[str],
                  records: Sequence[Any], names: Optional[Sequence[str]], images: Optional[PathLike],
                  fields: Optional[Mapping[str, str]], image_format: Optional[str], config: Optional[str]
                  ) -> Tuple[GroundTruth, List[SystemCaptions]]:
    results, records = list(results), list(records)
    if (annotations is None) == (not records):
        raise InputError("give either annotations (COCO captions or a Karpathy split file, with results files) "
                         "or records (references inline), not both or neither")
    sources = records or results
    if not sources:
        raise InputError("no results files given: one COCO results file per system")
    names = list(names) if names is not None else [None] * len(sources)
    if len(names) != len(sources):
        raise InputError(f"{len(names)} names for {len(sources)} systems: give one name per "
                         f"{'records source' if records else 'results file'}")
    if records:
        if results:
            raise InputError("records carry their captions: give results files with annotations only")
        pairs = [read_inline(source, fields=fields, images=images, name=name, image_format=image_format,
                             split=split, config=config) for source, name in zip(records, names)]
        return common_ground_truth([truth for truth, _ in pairs]), [system for _, system in pairs]
    if fields or image_format or config:
        raise InputError("fields, image_format and config apply to records sources, not to annotations")
    ground_truth = read_ground_truth(annotations, split=split)
    return ground_truth, [read_results(path, ground_truth, name=name) for path, name in zip(results, names)]


def input_files(annotations: Optional[Any], results: Sequence[Any], records: Sequence[Any],
                evaluation: EvaluationSet) -> Dict:
    """What the evaluation read, for the report's ``inputs``: the annotations (``{"path", "sha256"}``, None with
    records) and per system its results file (``{"system", "path", "sha256"}``) or records source (``{"system",
    "source", "sha256"}``). Paths as given; ``sha256`` of the file's bytes, None for a source that is not one file
    (a folder, a hub dataset, content given in Python, then named as its reader names it)."""
    def digest(source: Any) -> Optional[str]:
        is_path = isinstance(source, (str, os.PathLike)) and os.path.isfile(source)
        return file_sha256(source) if is_path else None

    systems = evaluation.systems
    return {"annotations": None if annotations is None else {"path": evaluation.ground_truth.source,
                                                             "sha256": digest(annotations)},
            "results": [{"system": system.name, "path": system.source, "sha256": digest(source)}
                        for system, source in zip(systems, results)],
            "records": [{"system": system.name, "source": system.source, "sha256": digest(source)}
                        for system, source in zip(systems, records)]}
