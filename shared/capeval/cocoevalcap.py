"""pycocoevalcap's ``COCOEvalCap``, as a drop-in::

    from capeval.cocoevalcap import COCOEvalCap      # instead of: from pycocoevalcap.eval import COCOEvalCap
    coco_eval = COCOEvalCap(coco, coco_result)       # pycocotools objects, annotation/result dicts or JSON paths
    coco_eval.params["image_id"] = coco_result.getImgIds()
    coco_eval.evaluate()                             # .eval, .imgToEval, .evalImgs as pycocoevalcap fills them

BLEU-1..4, METEOR, ROUGE-L and CIDEr are pycocoevalcap 1.2's own values (:func:`capeval.text.coco.score_coco_group`),
computed without Java by default (``backend="python"``: the PTB tokenizer and METEOR 1.5 in Python, equal to the
jars; ``backend="java"`` runs pycocoevalcap's jars); SPICE, on Java, where its jars exist. ``metrics=["coco", "clip_s"]``
adds any capeval metric by name (scored by the suite engine; ``images``: the image root folder)."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

from capeval.core.errors import InputError
from capeval.core.keys import coco_method
from capeval.core.scoring import get_scorer_spec, scorer_of
from capeval.text.coco import COCO_GROUP, COCO_KEYS, check_backend, coco_group_names, score_coco_group

# the scorer names pycocoevalcap's messages print (the keys' names in ``eval`` are their scorers' metadata)
SCORER_NAMES = {"bleu": "Bleu", "meteor": "METEOR", "rouge_l": "Rouge", "cider": "CIDEr", "spice": "SPICE"}
GROUP = "coco"


class COCOEvalCap:
    """``COCOEvalCap(coco, cocoRes)``: ``coco`` holds the reference captions (a pycocotools ``COCO``, a COCO caption
    annotations dict or its JSON path), ``cocoRes`` the captions scored (``coco.loadRes(...)``, a results list
    ``[{"image_id", "caption"}]`` or its JSON path). ``params['image_id']`` (default: every annotated image, as
    pycocoevalcap) selects the images scored; each must have references and exactly one result caption.

    ``metrics``: ``None`` = pycocoevalcap's set available here (SPICE only where its jars exist); else names among
    ``"coco"``, ``bleu``/``meteor``/``rouge_l``/``cider``/``spice`` and any capeval metric (``images``: the folder
    the annotations' ``file_name`` are relative to; ``options``: per metric, its scorer options, and the suite's
    ``device``/``dtype``/``batch_size``/``cache_dir``). ``backend``: ``"python"`` (no Java) or ``"java"``
    (pycocoevalcap's jars) for the COCO metrics. ``quiet``: print nothing."""

    def __init__(self, coco: Any, cocoRes: Any, *, metrics: Optional[Sequence[str]] = None, backend: str = "python",
                 images: Optional[str] = None, quiet: bool = False, **options: Any):
        self.evalImgs: List[Dict] = []
        self.eval: Dict[str, Any] = {}
        self.imgToEval: Dict[Hashable, Dict] = {}
        self.coco, self.cocoRes = coco, cocoRes
        self._references, self._files = _read_annotations(coco)
        self._results = _read_results(cocoRes)
        self.params: Dict[str, Any] = {"image_id": list(self._references)}
        self.metrics, self.images, self.quiet, self.options = metrics, images, quiet, options
        self.backend = check_backend(backend)

    def evaluate(self) -> None:
        """Score ``params['image_id']``; fill ``eval``, ``imgToEval`` and ``evalImgs``."""
        image_ids = list(self.params["image_id"])
        references, captions = self._inputs(image_ids)
        text, others = _split_metrics(self.metrics)
        self._print("tokenization...")
        self._print("setting up scorers...")
        if text:
            self._print("computing %s score..." % ", ".join(SCORER_NAMES[name] for name in text))
            values = score_coco_group([captions], references, metrics=text, backend=self.backend)[0]
            for key, value in values.items():
                method = _method(scorer_of(key), key)
                self.setEval(value.corpus, method)
                per_image = value.details if value.details is not None else value.per_sample
                self.setImgToEvalImgs(per_image, image_ids, method)
                self._print("%s: %0.3f" % (method, value.corpus))
        if others:
            self._print("computing %s score..." % ", ".join(others))
            scores = self._score_suite(image_ids, references, captions, others)
            for key in scores.keys:
                method = _method(scores.metrics[key]["scorer"], key)
                self.setEval(scores.corpus["results"][key], method)
                self.setImgToEvalImgs(scores.per_image["results"][key], image_ids, method)
                self._print("%s: %0.3f" % (method, scores.corpus["results"][key]))
        self.setEvalImgs()

    def setEval(self, score: Any, method: str) -> None:
        self.eval[method] = score

    def setImgToEvalImgs(self, scores: Sequence, imgIds: Sequence[Hashable], method: str) -> None:
        for image_id, score in zip(imgIds, scores):
            self.imgToEval.setdefault(image_id, {"image_id": image_id})[method] = score

    def setEvalImgs(self) -> None:
        self.evalImgs = list(self.imgToEval.values())

    def _print(self, message: str) -> None:
        if not self.quiet:
            print(message)

    def _inputs(self, image_ids: List[Hashable]) -> Tuple[List[List[str]], List[str]]:
        if not image_ids:
            raise InputError("params['image_id'] is empty: no image to score")
        references, captions = [], []
        for i, image_id in enumerate(image_ids):
            where = f"params['image_id'][{i}] (image {image_id!r})"
            refs = self._references.get(image_id)
            if not refs:
                raise InputError(f"{where} has no reference caption in the annotations")
            results = self._results.get(image_id, [])
            if len(results) != 1:
                hint = ("; to score only the images of the results set params['image_id'] to their ids"
                        if not results else "; COCOEvalCap scores exactly one caption per image")
                raise InputError(f"{where} has {len(results)} captions in the results{hint}")
            references.append(refs)
            captions.append(results[0])
        return references, captions

    def _score_suite(self, image_ids, references, captions, metrics):
        from capeval.core.records import EvalImage, GroundTruth, SystemCaptions
        from capeval.suite import score_suite

        options = dict(self.options)
        suite_options = {k: options.pop(k) for k in ("device", "dtype", "batch_size", "cache_dir") if k in options}
        ground_truth = GroundTruth({i: EvalImage(i, self._files.get(i), tuple(refs))
                                    for i, refs in zip(image_ids, references)}, source="coco")
        system = SystemCaptions("results", dict(zip(image_ids, captions)), source="cocoRes")
        return score_suite(ground_truth, [system], metrics, images_root=self.images, options=options,
                           show_progress=False if self.quiet else None, **suite_options)


def _method(scorer: str, key: str) -> str:
    """``key``'s name in ``eval`` as its scorer declares it: pycocoevalcap's for the COCO keys ("Bleu_1"), else the
    key itself."""
    return coco_method(get_scorer_spec(scorer).scorer_class(), key)


def _split_metrics(metrics: Optional[Sequence[str]]) -> Tuple[List[str], List[str]]:
    """(COCO-group scorers, other capeval metrics) in the order asked; ``None``: the group available here."""
    if metrics is None:
        return list(coco_group_names()), []
    if isinstance(metrics, str):
        metrics = [metrics]
    text: List[str] = []
    others: List[str] = []
    for name in metrics:
        if not isinstance(name, str):
            raise InputError(f"metrics: {name!r} is not a metric name")
        group = list(coco_group_names()) if name == GROUP else [name] if name in COCO_GROUP else None
        if group is None:
            key_of = {key: scorer for scorer, keys in COCO_KEYS.items() for key in keys}
            group = [key_of[name]] if name in key_of else None
        if group is None:
            others += [name] if name not in others else []
        else:
            text += [scorer for scorer in group if scorer not in text]
    if not text and not others:
        raise InputError("metrics is empty: name at least one metric (e.g. 'coco')")
    return text, others


def _load(source: Any, what: str) -> Any:
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise InputError(f"{what} file not found: {path}")
        try:
            with open(path, encoding="utf-8") as handle:
                return json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(f"{what} file {path} is not JSON: {exc}") from exc
    return source


def _read_annotations(coco: Any) -> Tuple[Dict[Hashable, List[str]], Dict[Hashable, Optional[str]]]:
    """Reference captions per image (``getImgIds()`` order) and each image's ``file_name``."""
    if hasattr(coco, "getImgIds") and hasattr(coco, "imgToAnns"):
        image_ids = list(coco.getImgIds())
        files = {i: (getattr(coco, "imgs", {}).get(i) or {}).get("file_name") for i in image_ids}
        refs = {i: _captions(coco.imgToAnns.get(i, []), "annotations", i) for i in image_ids}
        return refs, files
    data = _load(coco, "annotations")
    if not isinstance(data, Mapping) or not isinstance(data.get("images"), list) \
            or not isinstance(data.get("annotations"), list):
        raise InputError("annotations must be a COCO caption annotations object, dict or JSON file with "
                         "'images' and 'annotations' lists")
    images: Dict[Hashable, Optional[str]] = {}
    for n, image in enumerate(data["images"]):
        if not isinstance(image, Mapping) or "id" not in image:
            raise InputError(f"annotations images[{n}] has no 'id'")
        images[image["id"]] = image.get("file_name")
    by_image = _group_by_image(data["annotations"], "annotations")
    return {i: _captions(by_image.get(i, []), "annotations", i) for i in images}, images


def _read_results(results: Any) -> Dict[Hashable, List[str]]:
    """Result captions per image id (a pycocotools results object, a results list or its JSON file)."""
    if hasattr(results, "imgToAnns") and hasattr(results, "getImgIds"):
        return {i: _captions(results.imgToAnns[i], "results", i) for i in results.getImgIds()}
    data = _load(results, "results")
    if isinstance(data, Mapping) and isinstance(data.get("annotations"), list):
        data = data["annotations"]
    if not isinstance(data, list):
        raise InputError("results must be a list of {'image_id', 'caption'} records, its JSON file or a "
                         "pycocotools results object")
    by_image = _group_by_image(data, "results")
    return {i: _captions(anns, "results", i) for i, anns in by_image.items()}


def _group_by_image(records: List, what: str) -> Dict[Hashable, List[Mapping]]:
    grouped: Dict[Hashable, List[Mapping]] = defaultdict(list)
    for n, record in enumerate(records):
        if not isinstance(record, Mapping) or "image_id" not in record or "caption" not in record:
            raise InputError(f"{what} record {n} needs 'image_id' and 'caption'")
        grouped[record["image_id"]].append(record)
    return grouped


def _captions(annotations: Sequence[Mapping], what: str, image_id: Hashable) -> List[str]:
    captions = []
    for record in annotations:
        caption = record.get("caption") if isinstance(record, Mapping) else None
        if not isinstance(caption, str) or not caption.strip():
            raise InputError(f"{what}: image {image_id!r} has a caption that is not a non-empty string "
                             f"({caption!r:.40})")
        captions.append(caption)
    return captions
