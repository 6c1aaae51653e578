"""Evaluation sets from COCO's files: the annotated images of COCO caption annotations or a Karpathy split file
(:func:`read_ground_truth`) and one system's captions from a COCO results file (:func:`read_results`); each may also
be given as its JSON content or as a pycocotools ``COCO`` object."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Hashable, List, Optional, Tuple, Union

from capeval.core.errors import InputError
from capeval.core.evaluation_sets import EvalImage, GroundTruth, SystemCaptions, unknown_ids_problem
from capeval.core.inputs import check_caption


def _load_json(path: Union[str, os.PathLike], what: str) -> Any:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what} file not found: {path}")
    try:
        with path.open(encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc}); expected {what}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc}); expected {what}") from None


def _image_id(value: Any, where: str) -> Hashable:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError(f"{where} is {type(value).__name__} {value!r:.40}, expected an integer or text id")
    return value


def _json_source(source: Any, what: str, given: str) -> Tuple[Any, str]:
    """(the JSON content, its name in messages) of ``source``: a file path, the content itself (a dict or list,
    named ``given``), or a pycocotools ``COCO`` object (its ``dataset``: the adapter that lets pycocotools users pass
    ``COCO(...)`` / ``coco.loadRes(...)`` objects)."""
    if isinstance(source, (str, os.PathLike)):
        return _load_json(source, what), str(source)
    if hasattr(source, "dataset") and hasattr(source, "getImgIds"):
        return source.dataset, f"the pycocotools {type(source).__name__} object"
    if isinstance(source, (dict, list)):
        return source, given
    raise InputError(f"{given}: {type(source).__name__} is neither a JSON file path, its content, nor a pycocotools "
                     f"COCO object; expected {what}")


def read_ground_truth(path: Union[str, os.PathLike, Any], *, split: Optional[str] = None) -> GroundTruth:
    """The annotated images of a COCO caption annotations file or a Karpathy split file, detected from its content
    (``path``: the file, its content as a dict, or a pycocotools ``COCO`` object).

    - COCO caption annotations (``captions_val2014.json``): ``images[]`` with ``id`` and ``file_name``,
      ``annotations[]`` with ``image_id`` and ``caption``. The image id is ``id``; the file is ``file_name`` (relative
      to the image root, e.g. ``val2014/``). ``split`` does not apply.
    - Karpathy split files (``dataset_coco.json``, ``dataset_flickr30k.json``): ``images[]`` with ``sentences[].raw``,
      ``split`` and ``filename`` (and ``filepath`` for COCO). ``split`` is required and selects the images of that
      split (``"restval"`` is a split like the others). The image id is ``cocoid`` when the entry has one, else the
      ``filename`` stem (an int when it is all digits, as Flickr30k's): the ids COCO results files use. The file is
      ``filepath/filename`` (relative to the COCO root holding ``val2014/``) or ``filename``.

    Images listed without any reference caption are not part of the evaluation
    (:attr:`~capeval.core.evaluation_sets.GroundTruth.unannotated`): ``total`` in
    :func:`~capeval.core.evaluation_sets.coverage` counts annotated images only, and a result for one is refused by
    :func:`read_results`. Malformed files (duplicate image ids, a caption that is not text, an annotation for an
    image not in ``images[]``) are refused naming the entry; empty captions are kept (the suite counts them, scores
    them as pycocoevalcap does or refuses them: :func:`capeval.suite.texts.check_empty_texts`).
    """
    data, path = _json_source(path, "COCO caption annotations or a Karpathy split file", "the annotations")
    if isinstance(data, dict) and "annotations" in data:
        if split is not None:
            raise InputError(f"{path} is a COCO annotations file (one split already): --split {split} applies to "
                             "Karpathy split files (dataset_coco.json) only")
        return _coco_ground_truth(data, str(path))
    images = data.get("images") if isinstance(data, dict) else None
    if isinstance(images, list) and images and isinstance(images[0], dict) and "sentences" in images[0]:
        return _karpathy_ground_truth(images, str(path), split)
    if isinstance(data, list) and data and isinstance(data[0], dict) and {"image_id", "caption"} <= data[0].keys():
        raise InputError(f'{path} is a results list [{{"image_id", "caption"}}] (one system\'s captions), not '
                         f"reference annotations: {SWAPPED}")
    raise InputError(f"{path} is neither COCO caption annotations (an object with 'images' and 'annotations') nor a "
                     "Karpathy split file (an object with 'images' holding 'sentences')")


def _entries(data: Dict, key: str, source: str) -> List[Dict]:
    entries = data.get(key)
    if not isinstance(entries, list):
        raise InputError(f"{source}: {key!r} is {type(entries).__name__}, expected a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InputError(f"{source}: {key}[{i}] is {type(entry).__name__}, expected an object")
    return entries


def _field(entry: Dict, name: str, where: str) -> Any:
    if name not in entry:
        raise InputError(f"{where} has no {name!r} field")
    return entry[name]


def _coco_ground_truth(data: Dict, source: str) -> GroundTruth:
    files: Dict[Hashable, Optional[str]] = {}
    entries: Dict[Hashable, str] = {}
    for i, entry in enumerate(_entries(data, "images", source)):
        where = f"{source}: images[{i}]"
        image_id = _image_id(_field(entry, "id", where), f"{where}.id")
        if image_id in files:
            raise InputError(f"{where}: image id {image_id!r} again (a duplicate image)")
        file = entry.get("file_name")
        if file is not None and not isinstance(file, str):
            raise InputError(f"{where}.file_name is {type(file).__name__}, expected text")
        files[image_id] = file
        entries[image_id] = where
    references: Dict[Hashable, List[str]] = {}
    reference_where: Dict[Hashable, List[str]] = {}
    for i, entry in enumerate(_entries(data, "annotations", source)):
        where = f"{source}: annotations[{i}]"
        image_id = _image_id(_field(entry, "image_id", where), f"{where}.image_id")
        if "caption" not in entry:
            raise InputError(f"{where} has no 'caption' field: not a caption annotations file "
                             "(captions_*.json, not instances_*.json)")
        if image_id not in files:
            raise InputError(f"{where}.image_id {image_id!r} is not an id of images[]")
        references.setdefault(image_id, []).append(check_caption(entry["caption"], f"{where}.caption", empty=True))
        reference_where.setdefault(image_id, []).append(f"{where}.caption")
    if not references:
        raise InputError(f"{source}: no caption annotations (an image information file without captions?)")
    images = {i: EvalImage(i, file, tuple(references[i]), where=entries[i], reference_where=tuple(reference_where[i]))
              for i, file in files.items() if i in references}
    return GroundTruth(images, source, None, tuple(i for i in files if i not in references))


def _karpathy_id(entry: Dict, where: str) -> Hashable:
    if "cocoid" in entry:
        value = entry["cocoid"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}.cocoid is {type(value).__name__} {value!r:.40}, expected an integer")
        return value
    stem = Path(_karpathy_filename(entry, where)).stem
    return int(stem) if stem.isdigit() else stem


def _karpathy_filename(entry: Dict, where: str) -> str:
    filename = _field(entry, "filename", where)
    if not isinstance(filename, str) or not filename:
        raise InputError(f"{where}.filename is {filename!r:.40}, expected a file name")
    return filename


def _karpathy_ground_truth(entries: List, source: str, split: Optional[str]) -> GroundTruth:
    counts: Dict[str, int] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InputError(f"{source}: images[{i}] is {type(entry).__name__}, expected an object")
        value = _field(entry, "split", f"{source}: images[{i}]")
        counts[str(value)] = counts.get(str(value), 0) + 1
    present = ", ".join(f"{name} ({n} image{'s' if n != 1 else ''})" for name, n in counts.items())
    if split is None:
        raise InputError(f"{source} is a Karpathy split file: choose a split with --split (it holds {present})")
    if split not in counts:
        raise InputError(f"{source} has no split {split!r} (it holds {present})")
    images: Dict[Hashable, EvalImage] = {}
    unannotated: List[Hashable] = []
    for i, entry in enumerate(entries):
        if entry["split"] != split:
            continue
        where = f"{source}: images[{i}]"
        image_id = _karpathy_id(entry, where)
        if image_id in images or image_id in unannotated:
            raise InputError(f"{where}: image id {image_id!r} again (a duplicate image)")
        filepath = entry.get("filepath")
        if filepath is not None and not isinstance(filepath, str):
            raise InputError(f"{where}.filepath is {type(filepath).__name__}, expected text")
        filename = _karpathy_filename(entry, where)
        sentences = _field(entry, "sentences", where)
        if not isinstance(sentences, list):
            raise InputError(f"{where}.sentences is {type(sentences).__name__}, expected a list")
        references = []
        for j, sentence in enumerate(sentences):
            if not isinstance(sentence, dict):
                raise InputError(f"{where}.sentences[{j}] is {type(sentence).__name__}, expected an object")
            references.append(check_caption(_field(sentence, "raw", f"{where}.sentences[{j}]"),
                                         f"{where}.sentences[{j}].raw", empty=True))
        if not references:
            unannotated.append(image_id)
            continue
        file = f"{filepath}/{filename}" if filepath else filename
        images[image_id] = EvalImage(image_id, file, tuple(references), where=where, reference_where=tuple(
            f"{where}.sentences[{j}].raw" for j in range(len(references))))
    return GroundTruth(images, source, split, tuple(unannotated))


def read_results(path: Union[str, os.PathLike, Any], ground_truth: GroundTruth, *,
                 name: Optional[str] = None, keep_unannotated: bool = False) -> SystemCaptions:
    """One system's captions from a COCO results file ``[{"image_id": ..., "caption": "..."}, ...]`` (other keys
    are ignored), checked against ``ground_truth``; ``name`` defaults to the file's stem. ``path`` may also be the
    results list itself, or a pycocotools results object (``coco.loadRes(...)``; its ``annotations``).

    Refused, naming the file, the record (its position in the list, counted from 0 as ``capeval score`` counts
    records) and the problem: a file that is not JSON or not a list, a record without ``image_id`` or ``caption``, a
    caption that is not text, an image id given twice, ids that are not annotated images of ``ground_truth`` (the
    first few named). Ids are compared as they are: ``"391895"`` (text) does not match the annotations' 391895 (a
    number); the error says so. Empty captions are kept here (the suite scores or refuses them, naming this file and
    record: :meth:`~capeval.core.evaluation_sets.SystemCaptions.caption_where`). Reference captions given in place of
    results (COCO caption annotations, a Karpathy split file, a pycocotools object holding several captions of an
    image) are refused, named as such. ``keep_unannotated``: keep results for images the annotations list without
    any reference caption (pycocotools' ``loadRes`` accepts them; :class:`capeval.cocoevalcap.COCOEvalCap` refuses
    them only where ``params['image_id']`` selects them).
    """
    records, source = _json_source(path, 'a COCO results list [{"image_id", "caption"}]', "the results")
    from_object = isinstance(records, dict) and hasattr(path, "dataset")
    if from_object and isinstance(records.get("annotations"), list):  # a loadRes object's dataset
        records = records["annotations"]
    elif isinstance(records, dict) and _references_kind(records) is not None:
        raise InputError(f"{source} is {_references_kind(records)} (reference captions), not results: {SWAPPED}")
    if not isinstance(records, list):
        raise InputError(f'{source}: the top level is {type(records).__name__}, expected a list of '
                         '{"image_id", "caption"} records (a COCO results file)')
    if not records:
        raise InputError(f"{source}: no results (an empty list)")
    captions: Dict[Hashable, str] = {}
    first_record: Dict[Hashable, int] = {}
    for number, record in enumerate(records):
        where = f"{source}: record {number}"
        if not isinstance(record, dict):
            raise InputError(f'{where} is {type(record).__name__}, expected an object {{"image_id", "caption"}}')
        image_id = _image_id(_field(record, "image_id", where), f"{where}: 'image_id'")
        caption = _field(record, "caption", where)
        if not isinstance(caption, str):
            raise InputError(f"{where}: 'caption' is {type(caption).__name__} {caption!r:.40}, expected text")
        if image_id in captions and from_object:
            raise InputError(f"{where}: image_id {image_id!r} again (first at record {first_record[image_id]}): "
                             "several captions of one image, as reference annotations hold them; results hold one "
                             f"caption per image. If this is the annotations' COCO object: {SWAPPED}")
        if image_id in captions:
            raise InputError(f"{where}: image_id {image_id!r} again (first at record {first_record[image_id]}): "
                             "one caption per image")
        captions[image_id] = caption
        first_record[image_id] = number
    listed = ground_truth.images.keys() | set(ground_truth.unannotated) if keep_unannotated else ground_truth.images
    unknown = [i for i in captions if i not in listed]
    if unknown:
        raise InputError(f"{source}: record {first_record[unknown[0]]}: {unknown_ids_problem(unknown, ground_truth)}")
    default = Path(source).stem if isinstance(path, (str, os.PathLike)) else "results"
    return SystemCaptions(name or default, captions, source, first_record)


SWAPPED = ("give the reference captions as the annotations (--annotations; COCOEvalCap's first argument) and one "
           "system's captions as the results (--results; COCOEvalCap's second)")


def _references_kind(data: Dict) -> Optional[str]:
    """What reference file ``data`` is ("COCO caption annotations", "a Karpathy split file"), else ``None``."""
    if isinstance(data.get("annotations"), list):
        return "COCO caption annotations"
    images = data.get("images")
    if isinstance(images, list) and images and isinstance(images[0], dict) and "sentences" in images[0]:
        return "a Karpathy split file"
    return None
