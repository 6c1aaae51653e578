"""pycocoevalcap's ``COCOEvalCap``, as a drop-in::

    from capeval.cocoevalcap import COCOEvalCap      # instead of: from pycocoevalcap.eval import COCOEvalCap
    coco_eval = COCOEvalCap(coco, coco_result)       # pycocotools objects, annotation/result dicts or JSON paths
    coco_eval.params["image_id"] = coco_result.getImgIds()
    coco_eval.evaluate()                             # .eval, .imgToEval, .evalImgs as pycocoevalcap fills them

BLEU-1..4, METEOR, ROUGE-L and CIDEr are pycocoevalcap 1.2's own values (:func:`capeval.text.coco.score_coco_group`),
computed without Java by default (``coco_backend="python"``: the PTB tokenizer and METEOR 1.5 in Python, equal to
the jars; ``coco_backend="java"`` runs pycocoevalcap's jars); SPICE, on Java, where its jars exist.
``metrics=["coco", "clip_s"]`` adds any capeval metric by name (scored by the suite engine; ``images``: the image
root folder)."""

from __future__ import annotations

import sys
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

from capeval.core.coco_files import read_ground_truth, read_results
from capeval.core.errors import InputError
from capeval.core.evaluation_sets import GroundTruth, SystemCaptions
from capeval.core.keys import coco_method
from capeval.core.scoring import scorer_of
from capeval.text.coco import check_coco_backend

# the scorer names pycocoevalcap's messages print (the keys' names in ``eval`` are their scorers' metadata)
SCORER_NAMES = {"bleu": "Bleu", "meteor": "METEOR", "rouge_l": "Rouge", "cider": "CIDEr", "spice": "SPICE"}


class COCOEvalCap:
    """``COCOEvalCap(coco, cocoRes)``: ``coco`` holds the reference captions (a pycocotools ``COCO``, a COCO caption
    annotations dict or its JSON path), ``cocoRes`` the captions scored (``coco.loadRes(...)``, a results list
    ``[{"image_id", "caption"}]`` or its JSON path), both read by capeval's evaluation-set reader
    (:func:`capeval.core.coco_files.read_ground_truth`, :func:`~capeval.core.coco_files.read_results`).

    ``params['image_id']`` (default: every image of the annotations, as pycocoevalcap's ``coco.getImgIds()``) selects
    the images scored, as pycocoevalcap 1.2 does: results for other images are left out (the default README example
    ``params['image_id'] = cocoRes.getImgIds()`` scores the results' images); an id given twice is scored once;
    ``imgToEval`` follows the order of the ids. An id with neither references nor a result caption (an image the
    annotations list without captions, or an id they do not hold) is skipped as pycocoevalcap skips it; an id the
    annotations do not hold is named in one stderr line. Refused (pycocoevalcap fails on them at scoring, with an
    ``AssertionError`` or by waiting forever): an annotated id without a result caption, a result for an image
    without references, and a selection with nothing to score.

    ``metrics``: ``None`` = pycocoevalcap's set available here (the ``coco`` group: SPICE only where its jars exist);
    else any names a capeval suite takes (``"coco"``, ``bleu``/``meteor``/``rouge_l``/``cider``/``spice``, any
    capeval metric; ``images``: the folder the annotations' ``file_name`` are relative to). ``options``: per metric,
    its scorer options, and the suite's ``device``/``dtype``/``batch_size``/``cache_dir``. ``coco_backend``:
    ``"python"`` (the default: no Java) or ``"java"`` (pycocoevalcap's jars) for the metrics that have one.
    ``quiet``: print nothing. ``empty_caption``: ``"score"`` (empty and whitespace-only captions and references scored
    as pycocoevalcap scores them, counted in one stderr line) or ``"error"`` (refused, naming the file and record)."""

    def __init__(self, coco: Any, cocoRes: Any, *, metrics: Optional[Sequence[str]] = None,
                 coco_backend: str = "python", images: Optional[str] = None, quiet: bool = False,
                 empty_caption: str = "score", **options: Any):
        self.evalImgs: List[Dict] = []
        self.eval: Dict[str, Any] = {}
        self.imgToEval: Dict[Hashable, Dict] = {}
        self.coco, self.cocoRes = coco, cocoRes
        self._truth = read_ground_truth(coco)
        self._results = read_results(cocoRes, self._truth, keep_unannotated=True)  # as pycocotools' loadRes
        self.params: Dict[str, Any] = {"image_id": [*self._truth.images, *self._truth.unannotated]}
        self.metrics, self.images, self.quiet, self.options = metrics, images, quiet, options
        from capeval.suite.texts import check_empty_caption_policy

        self.coco_backend = check_coco_backend(coco_backend)
        self.empty_caption = check_empty_caption_policy(empty_caption)

    def evaluate(self) -> None:
        """Score ``params['image_id']``; fill ``eval``, ``imgToEval`` and ``evalImgs``."""
        from capeval.suite import score_suite

        truth, results = self._selected(list(self.params["image_id"]))
        plan = self._plan()
        self._print("tokenization...")
        self._print("setting up scorers...")
        self._print("computing %s score..." % ", ".join(SCORER_NAMES.get(name, name) for name in plan.metrics))
        scores = score_suite(truth, [results], plan, images_root=self.images,
                             show_progress=False if self.quiet else None, empty_caption=self.empty_caption)
        system = self._results.name
        for key in scores.keys:
            spec = plan.specs[scores.metrics[key]["scorer"]]
            method = coco_method(spec.scorer_class(), key)
            self.setEval(scores.corpus[system][key], method)
            # pycocoevalcap's own scorers' per-image records are their imgToEval entries (SPICE's categories)
            records = scores.details.get(system, {}).get(key) if spec.group == "coco" else None
            self.setImgToEvalImgs(records or scores.per_image[system][key], scores.image_ids, method)
            self._print("%s: %0.3f" % (method, scores.corpus[system][key]))
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

    def _plan(self):
        """The suite's plan, resolved once: ``metrics`` (default: the ``coco`` group) with ``options`` and, for every
        metric that has one, ``coco_backend``."""
        from capeval.suite.plan import select_metrics

        asked = ["coco"] if self.metrics is None else [self.metrics] if isinstance(self.metrics, str) else self.metrics
        selection = select_metrics(list(asked))
        mixed = dict(self.options)
        for name in selection.names:
            if "coco_backend" in selection.specs[name].options:  # under the spelling given (two are refused)
                key = next((key for key in mixed if isinstance(key, str) and scorer_of(key) == name), name)
                mixed[key] = {"coco_backend": self.coco_backend, **mixed.get(key, {})}
        return selection.plan_mixed(mixed)

    def _selected(self, image_ids: List[Hashable]) -> Tuple[GroundTruth, SystemCaptions]:
        """The ground truth and the results of the images ``image_ids`` selects (pycocoevalcap's semantics: see the
        class docstring), in their order."""
        if not image_ids:
            raise InputError("params['image_id'] is empty: no image to score")
        selected: Dict[Hashable, None] = {}
        unknown: Dict[Hashable, None] = {}
        unannotated = set(self._truth.unannotated)
        for i, image_id in enumerate(image_ids):
            where = f"params['image_id'][{i}] (image {image_id!r:.40})"
            if not isinstance(image_id, Hashable):
                raise InputError(f"{where} is {type(image_id).__name__}, expected an image id")
            annotated, captioned = image_id in self._truth.images, image_id in self._results.captions
            if annotated and not captioned:
                raise InputError(f"{where} has 0 captions in the results; to score only the images of the results "
                                 "set params['image_id'] to their ids")
            if captioned and not annotated:
                raise InputError(f"{where} has no reference caption in the annotations "
                                 f"({self._results.caption_where(image_id)})")
            if annotated:
                selected[image_id] = None
            elif image_id not in unannotated:
                unknown[image_id] = None
        if unknown:
            print(f"capeval: params['image_id'] lists {len(unknown)} id(s) that {self._truth.source} does not hold, "
                  f"skipped as pycocoevalcap skips them: {_ids_text(list(unknown), self._truth)}", file=sys.stderr)
        if not selected:
            raise InputError(f"params['image_id'] selects no image with references and a result caption (of its "
                             f"{len(image_ids)} ids): no image to score")
        truth = GroundTruth({i: self._truth.images[i] for i in selected}, self._truth.source, self._truth.split)
        results = self._results
        captions = SystemCaptions(results.name, {i: results.captions[i] for i in selected}, results.source,
                                  results.records)
        return truth, captions


def _ids_text(ids: List[Hashable], truth: GroundTruth, shown: int = 5) -> str:
    """The first ``shown`` of ``ids``, and how the annotations write an id of them that differs only in its type."""
    text = ", ".join(repr(i) for i in ids[:shown]) + (", …" if len(ids) > shown else "")
    for image_id in ids:
        twin = (str(image_id) if isinstance(image_id, int) else
                int(image_id) if isinstance(image_id, str) and image_id.isdigit() else None)
        if twin is not None and twin in truth.images:
            return text + f" (the annotations' id {twin!r} is {'a number' if isinstance(twin, int) else 'text'})"
    return text
