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

from typing import Any, Dict, Hashable, List, Optional, Sequence

from capeval.core.errors import InputError
from capeval.core.keys import coco_method
from capeval.core.records import GroundTruth, read_ground_truth, read_results
from capeval.core.scoring import get_scorer_spec
from capeval.text.coco import check_backend

# the scorer names pycocoevalcap's messages print (the keys' names in ``eval`` are their scorers' metadata)
SCORER_NAMES = {"bleu": "Bleu", "meteor": "METEOR", "rouge_l": "Rouge", "cider": "CIDEr", "spice": "SPICE"}


class COCOEvalCap:
    """``COCOEvalCap(coco, cocoRes)``: ``coco`` holds the reference captions (a pycocotools ``COCO``, a COCO caption
    annotations dict or its JSON path), ``cocoRes`` the captions scored (``coco.loadRes(...)``, a results list
    ``[{"image_id", "caption"}]`` or its JSON path), both read by capeval's evaluation-set reader
    (:func:`capeval.core.records.read_ground_truth`, :func:`~capeval.core.records.read_results`). ``params['image_id']``
    (default: every annotated image, as pycocoevalcap) selects the images scored; each must have references and a
    result caption.

    ``metrics``: ``None`` = pycocoevalcap's set available here (the ``coco`` group: SPICE only where its jars exist);
    else any names a capeval suite takes (``"coco"``, ``bleu``/``meteor``/``rouge_l``/``cider``/``spice``, any
    capeval metric; ``images``: the folder the annotations' ``file_name`` are relative to). ``options``: per metric,
    its scorer options, and the suite's ``device``/``dtype``/``batch_size``/``cache_dir``. ``backend``:
    ``"python"`` (no Java) or ``"java"`` (pycocoevalcap's jars) for the metrics that have one. ``quiet``: print
    nothing."""

    def __init__(self, coco: Any, cocoRes: Any, *, metrics: Optional[Sequence[str]] = None, backend: str = "python",
                 images: Optional[str] = None, quiet: bool = False, **options: Any):
        self.evalImgs: List[Dict] = []
        self.eval: Dict[str, Any] = {}
        self.imgToEval: Dict[Hashable, Dict] = {}
        self.coco, self.cocoRes = coco, cocoRes
        self._truth = read_ground_truth(coco)
        self._results = read_results(cocoRes, self._truth)
        self.params: Dict[str, Any] = {"image_id": [*self._truth.images, *self._truth.unannotated]}
        self.metrics, self.images, self.quiet, self.options = metrics, images, quiet, options
        self.backend = check_backend(backend)

    def evaluate(self) -> None:
        """Score ``params['image_id']``; fill ``eval``, ``imgToEval`` and ``evalImgs``."""
        from capeval.suite import score_suite

        image_ids = list(self.params["image_id"])
        truth = self._selected(image_ids)
        plan = self._plan()
        self._print("tokenization...")
        self._print("setting up scorers...")
        self._print("computing %s score..." % ", ".join(SCORER_NAMES.get(name, name) for name in plan.metrics))
        scores = score_suite(truth, [self._results], plan, images_root=self.images,
                             show_progress=False if self.quiet else None)
        system = self._results.name
        for key in scores.keys:
            method = coco_method(get_scorer_spec(scores.metrics[key]["scorer"]).scorer_class(), key)
            self.setEval(scores.corpus[system][key], method)
            self.setImgToEvalImgs(scores.details.get(system, {}).get(key) or scores.per_image[system][key],
                                  image_ids, method)
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
        """The suite's plan: ``metrics`` (default: the ``coco`` group) with ``options`` and, for every metric that
        has one, ``backend``."""
        from capeval.suite.plan import expand_metrics, resolve_mixed

        asked = ["coco"] if self.metrics is None else [self.metrics] if isinstance(self.metrics, str) else self.metrics
        names = expand_metrics(list(asked))
        mixed = dict(self.options)
        for name in names:
            if "backend" in get_scorer_spec(name).options:
                mixed[name] = {"backend": self.backend, **mixed.get(name, {})}
        return resolve_mixed(names, mixed)

    def _selected(self, image_ids: List[Hashable]) -> GroundTruth:
        """The ground truth of ``image_ids``, each with references and exactly one result caption."""
        if not image_ids:
            raise InputError("params['image_id'] is empty: no image to score")
        for i, image_id in enumerate(image_ids):
            where = f"params['image_id'][{i}] (image {image_id!r})"
            if image_id not in self._truth.images:
                raise InputError(f"{where} has no reference caption in the annotations")
            if image_id not in self._results.captions:
                raise InputError(f"{where} has 0 captions in the results; to score only the images of the results "
                                 "set params['image_id'] to their ids")
        return GroundTruth({i: self._truth.images[i] for i in image_ids}, self._truth.source, self._truth.split)
