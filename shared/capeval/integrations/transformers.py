"""``compute_metrics`` for ``Seq2SeqTrainer(predict_with_generate=True)`` scoring generated captions with capeval.

    compute_metrics = make_compute_metrics("clip_s", tokenizer, eval_dataset, references_column="captions")
    args = Seq2SeqTrainingArguments(..., predict_with_generate=True, batch_eval_metrics=True,
                                    include_for_metrics=["inputs"])
    trainer = Seq2SeqTrainer(model, args, eval_dataset=eval_dataset, compute_metrics=compute_metrics, ...)

Every evaluated sample is matched to its ``eval_dataset`` row, and the match is verified, never assumed:

* when the Trainer hands over the model inputs (``include_for_metrics=["inputs"]``), by content: a sample goes
  to the row with the same pixel values (the ``inputs_column``) and the same labels, so any evaluation order
  works (custom samplers);
* otherwise by position (the Trainer's sequential order; under DDP the Trainer gathers the processes' batches
  in that order too), checked row by row against the ``labels_column``.

A pass must evaluate every row once. A failed match raises :class:`AlignmentError` instead of scoring a caption
against another sample's image. Rows whose pixel values and labels are both identical are interchangeable and
are taken in dataset order.

Memory: with ``batch_eval_metrics=True`` the hook keeps a caption and a row number per evaluated sample (and
:data:`FINGERPRINT_SIZE` numbers per dataset row when matching by content); the Trainer drops each batch after
the call. Without it the Trainer itself keeps every prediction and label and, with
``include_for_metrics=["inputs"]``, every input (all the ``pixel_values``, on the device unless
``eval_accumulation_steps`` is set) until the end of the pass: the hook warns once when that happens.

Under DDP (``torchrun``, ``accelerate launch``) the Trainer calls the hook in every process with the predictions
and labels of all processes but, with ``batch_eval_metrics=True``, with this process's inputs only: the hook
gathers their fingerprints. Seq2SeqTrainer's last batch also carries the samples that evened out the processes'
batches (the pass's first samples again): they are checked to be those repeats and left out. A per-sample
capeval scorer then scores each process's share of the samples on its own device (:mod:`capeval.distributed`);
a corpus-level scorer, an evaluate module or another scorer object scores in the main process only (a scorer
given by name is loaded there only). Every process returns the same metrics.
"""

from __future__ import annotations

import os
import warnings
from types import SimpleNamespace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from capeval.core.errors import InputError
from capeval.core.evaluation_sets import EvalImage, GroundTruth, SystemCaptions
from capeval.core.record_columns import RecordColumns
from capeval.core.empty_captions import EmptyCaption, empty_caption_policy, with_empty_captions
from capeval.core.scoring import Scorer, get_scorer_spec, load_scorer, scorers
from capeval.distributed import gather_shares, on_main_process, process_state, share

FINGERPRINT_SIZE = 256
_FINGERPRINT_ROWS = 64  # dataset rows read per chunk while fingerprinting
_MATCH_CHUNK = 512  # evaluated samples compared against the whole dataset at once


class AlignmentError(InputError):
    """Evaluated samples could not be matched, with certainty, to rows of the evaluation dataset."""


def make_compute_metrics(metric, tokenizer, eval_dataset, *, image_column: Optional[str] = "image",
                         references_column: Optional[str] = None, labels_column: str = "labels",
                         inputs_column: str = "pixel_values", metric_options: Optional[Dict[str, Any]] = None,
                         empty_caption: EmptyCaption = "score", match_atol: float = 1e-3):
    """A ``compute_metrics(eval_pred, compute_result=None)`` for ``Seq2SeqTrainer(predict_with_generate=True)``.

    Args:
        metric: a capeval scorer name (``"clip_s"``), a scorer object (``score(predictions, images=,
            references=)``), an evaluate module loaded from capeval (``evaluate.load("capeval/clip_s")``), or a
            suite: a list of names (``["coco", "clip_s"]``; ``"coco"`` is BLEU-1..4, METEOR, ROUGE-L, CIDEr-D and
            SPICE where its jars exist) scored in one pass by :func:`capeval.suite.score_suite` (each image decoded
            once, each backbone loaded once; every value equal to the metric's own), in the main process.
        tokenizer: decodes the generated ids (``-100`` and padding are dropped, special tokens skipped).
        eval_dataset: the dataset given to the Trainer as ``eval_dataset`` (or the same dict of datasets: each
            pass is scored against the one dataset whose rows it matches). It holds the raw images
            (``image_column``), the references (``references_column``: a list of strings or one string per
            row; ``None`` for reference-free scoring), and ``labels_column`` / ``inputs_column`` for the
            alignment checks (see the module docstring).
        metric_options: options for the scorer factory when ``metric`` is a name (``device``, ``batch_size``...);
            for a suite, the runtime (``device``, ``dtype``, ``batch_size``, ``cache_dir``) and, under a metric's
            name, that metric's options (``{"device": "cpu", "clip_s": {"precision": "official"}}``).
        empty_caption: what a generated caption that decodes to an empty string gets, as in
            ``load_scorer(...).score(empty_caption=...)`` (:mod:`capeval.core.scoring`): ``"score"`` (default:
            scored as the metric's official implementation scores it, as pycocoevalcap scores BLEU, METEOR,
            ROUGE-L and CIDEr-D; a metric that does not score it raises :class:`capeval.InputError` naming the row),
            ``"error"`` (:class:`capeval.InputError`), ``"skip"`` (no score: means and corpus-level statistics over
            the other captions; ``skipped_empty_captions`` logged) or a finite score counted in the means
            (``empty_captions`` logged; refused for corpus-level metrics such as BLEU, METEOR and CIDEr-D, whose
            corpus values are not means). When every caption is skipped only the count is logged. A suite takes
            ``"score"`` or ``"error"`` (:func:`capeval.suite.score_suite`). An evaluate module applies the
            ``empty_caption`` it was loaded with (``evaluate.load(..., empty_caption=...)``).
        match_atol: tolerance on pixel-value fingerprints (chunk means) when matching by content.

    Returns a function returning the corpus-level scalars only (per-sample lists are dropped), as the
    Trainer logs them (``eval_clip_s``, ``eval_<name>_clip_s`` for a dict of datasets): the values the scorer
    returns on the same captions, images and references. With
    ``batch_eval_metrics=True`` it accumulates the batches and scores everything at ``compute_result=True``
    (corpus-level metrics stay exact), returning ``{}`` before.
    """
    if isinstance(metric, (list, tuple)):
        adapter = _SuiteAdapter(metric, metric_options or {}, empty_caption)
    else:
        adapter = _MetricAdapter(metric, metric_options or {}, empty_caption)
    if adapter.needs_references and references_column is None:
        raise InputError(f"metric {adapter.name!r} needs references: pass references_column=")
    if adapter.needs_images and image_column is None:
        raise InputError(f"metric {adapter.name!r} needs images: pass image_column=")
    if adapter.needs_images is False:
        image_column = None  # a text-only metric: the images are not read
    datasets = dict(eval_dataset) if isinstance(eval_dataset, Mapping) else {None: eval_dataset}
    if not datasets:
        raise InputError("eval_dataset is an empty dict")
    for name, dataset in datasets.items():
        columns = getattr(dataset, "column_names", None)
        missing = [c for c in (image_column, references_column) if c and columns is not None and c not in columns]
        if missing:
            where = "eval_dataset" if name is None else f"eval_dataset[{name!r}]"
            raise InputError(f"{where} has no column(s) {missing}; it has {columns}")
    evaluation = _Pass({name: _RowMatcher(dataset, _pad_token_id(tokenizer), labels_column, inputs_column, match_atol)
                        for name, dataset in datasets.items()})
    warned: List[bool] = []

    def compute_metrics(eval_pred, compute_result: Optional[bool] = None) -> Dict[str, float]:
        """``compute_result``: ``False`` for a batch, ``True`` for the last one (``batch_eval_metrics=True``);
        ``None`` when the Trainer hands over the whole pass at once."""
        last = compute_result is not False
        try:
            predictions = _decode(tokenizer, eval_pred.predictions)
            inputs = getattr(eval_pred, "inputs", None)
            if compute_result is None and inputs is not None and not hasattr(inputs, "keys") and not warned:
                warned.append(True)
                warnings.warn(f"the Trainer kept all {_nbytes(inputs) / 2 ** 20:.1f} MiB of evaluation inputs until "
                              "the end of the pass; set batch_eval_metrics=True to score batch by batch", stacklevel=2)
            state = process_state()
            samples = _sample_fingerprints(inputs, inputs_column, len(predictions), last, state)
            evaluation.add(predictions, _labels_of(eval_pred), samples, tail=last and state is not None)
            if not last:
                return {}
            name, predictions, rows = evaluation.finish()
            return _score(adapter, predictions, rows, datasets[name], image_column, references_column, state)
        except BaseException:
            last = True  # a failed pass is dropped whole
            raise
        finally:
            if last:
                evaluation.reset()

    return compute_metrics


class _MetricAdapter:
    """One ``score(predictions, images, references) -> dict`` over scorer names, scorers and evaluate modules."""

    def __init__(self, metric, options: Dict[str, Any], empty_caption: EmptyCaption):
        self.module, self._scorer, self._options = None, None, options
        corpus_level = False
        if isinstance(metric, str):
            spec, self.name = get_scorer_spec(metric), metric
            spec.check_options(options)
            corpus_level = spec.is_corpus_level(options)
            self.splits = not corpus_level
            if int(os.environ.get("WORLD_SIZE", "1")) <= 1:  # under DDP: loaded by the processes that score, on use
                self._scorer = load_scorer(metric, **options)
        elif hasattr(metric, "compute") and getattr(metric, "scorer_name", None):
            if options or empty_caption != "score":
                raise InputError("metric_options and empty_caption apply to scorer names; pass them to evaluate.load "
                                 "instead")
            spec, self.module, self.name, self.splits = scorers()[metric.scorer_name], metric, metric.scorer_name, False
        elif hasattr(metric, "score"):
            if options:
                raise InputError("metric_options apply to scorer names; configure the scorer object instead")
            spec, self._scorer = None, metric
            self.name = getattr(metric, "name", type(metric).__name__)
            corpus_level = isinstance(metric, Scorer) and metric.corpus_level
            self.splits = isinstance(metric, Scorer) and not corpus_level
            if empty_caption != "score" and not isinstance(metric, Scorer):
                raise InputError("empty_caption applies to capeval scorers; this scorer object decides for itself")
        else:
            raise TypeError("metric must be a capeval scorer name, a scorer object or a capeval evaluate module")
        self.empty_caption = empty_caption_policy(empty_caption, metric=self.name, corpus_level=corpus_level)
        scorer_class = spec.scorer_class() if spec else type(metric)
        self.scores_empty = issubclass(scorer_class, Scorer) and scorer_class.scores_empty_text
        # True: required, False: not used (not read), None: optional or unknown (passed when given)
        self.needs_images: Optional[bool] = {"required": True, "unused": False}.get(spec.images) if spec else None
        self.needs_references = bool(spec and spec.needs_references)

    @property
    def scorer(self):
        if self._scorer is None and self.module is None:
            self._scorer = load_scorer(self.name, **self._options)
        return self._scorer

    def score(self, predictions, images, references, rows: Optional[List[int]] = None,
              empty_caption: Optional[EmptyCaption] = None) -> Dict[str, Any]:
        """``rows``: the samples' row numbers in the eval dataset, named in input errors; ``empty_caption``: the
        policy for empty captions (default: the hook's)."""
        if self.module is not None:
            inputs = {"predictions": predictions}
            if images is not None:
                inputs["images"] = images
            if references is not None:
                inputs["references"] = references
            return self.module.compute(**inputs)
        if isinstance(self.scorer, Scorer):
            policy = self.empty_caption if empty_caption is None else empty_caption
            valid = self.scorer.validate(predictions, images, references, indices=rows, empty_caption=policy)
            return self.scorer.score_inputs(valid)
        return self.scorer.score(predictions, images=images, references=references)


class _SuiteAdapter:
    """A metric suite in one pass (:func:`capeval.suite.score_suite`) behind :class:`_MetricAdapter`'s ``score``:
    each dataset row is one image with its references, the generated captions one system. Scored in the main
    process; empty captions are scored or refused as the suite does (``"score"`` or ``"error"``: a suite's
    corpus-level metrics are not means, so it neither skips them nor gives them a fixed score)."""

    module = None
    splits = False

    def __init__(self, metrics: Sequence[str], options: Dict[str, Any], empty_caption: EmptyCaption):
        from capeval.suite.plan import select_metrics

        if not metrics or not all(isinstance(name, str) for name in metrics):
            raise InputError(f"a metric suite is a non-empty list of metric names, got {list(metrics)!r}")
        from capeval.suite.texts import check_empty_caption_policy

        self.empty_caption = check_empty_caption_policy(empty_caption)
        self.scores_empty = True  # the suite scores them, or refuses them naming the metric (score_suite)
        selection = select_metrics(list(metrics))  # an unknown metric is its own error, not one of metric_options
        try:
            self.plan = selection.plan_mixed(options)
        except InputError as exc:
            raise InputError(f"metric_options of a suite: {exc}") from None
        self.name = "+".join(metrics)
        specs = [self.plan.specs[name] for name in (*self.plan.loaded, *self.plan.composed)]
        self.needs_references = any(spec.needs_references for spec in specs)
        needs = {spec.images for spec in specs}
        self.needs_images: Optional[bool] = True if "required" in needs else (False if needs == {"unused"} else None)

    def score(self, predictions, images, references, rows: Optional[List[int]] = None,
              empty_caption: Optional[EmptyCaption] = None) -> Dict[str, Any]:
        """The suite's corpus value of every score key; ``hashcode``: the scorers' hashcodes, joined by ``" + "``."""
        from capeval.suite import score_suite

        rows = list(range(len(predictions))) if rows is None else rows
        truth = GroundTruth({row: EvalImage(row, None, _references(references, i)) for i, row in enumerate(rows)},
                            "eval_dataset")
        system = SystemCaptions("predictions", dict(zip(rows, predictions)), "generated captions")
        scores = score_suite(truth, [system], self.plan, images=None if images is None else dict(zip(rows, images)),
                             show_progress=False, empty_caption=self.empty_caption)
        hashcodes = dict.fromkeys(scores.metrics[key]["hashcode"] for key in scores.keys)
        return {**scores.corpus[system.name], "hashcode": " + ".join(hashcodes)}


def _references(references: Optional[Sequence], i: int) -> Tuple[str, ...]:
    """Sample ``i``'s references as a tuple (none: empty; one given as text: a tuple of one)."""
    if references is None:
        return ()
    return (references[i],) if isinstance(references[i], str) else tuple(references[i])


class _Pass:
    """One evaluation pass: for each eval dataset the samples still match, their captions and rows."""

    def __init__(self, matchers: Dict[Optional[str], "_RowMatcher"]):
        self.matchers = matchers
        self.reset()

    def reset(self) -> None:
        self.matched: Dict[Optional[str], Tuple[List[str], List[int]]] = {name: ([], []) for name in self.matchers}
        self.errors: Dict[Optional[str], AlignmentError] = {}
        for matcher in self.matchers.values():
            matcher.reset()

    def add(self, predictions: List[str], labels, samples: Optional[np.ndarray], *, tail: bool) -> None:
        for name in list(self.matched):
            try:
                rows = self.matchers[name].match(len(predictions), labels, samples, tail=tail)
            except AlignmentError as error:
                self._drop(name, error)
                continue
            self.matched[name][0].extend(predictions[:len(rows)])
            self.matched[name][1].extend(rows)

    def finish(self) -> Tuple[Optional[str], List[str], List[int]]:
        """The dataset the pass matched, with the captions and rows of its samples."""
        for name in list(self.matched):
            try:
                self.matchers[name].finish()
            except AlignmentError as error:
                self._drop(name, error)
        if len(self.matched) > 1:
            raise AlignmentError(f"the evaluated samples match several eval datasets ({sorted(self.matched)}): "
                                 "their rows cannot be told apart")
        name, (predictions, rows) = next(iter(self.matched.items()))
        return name, predictions, rows

    def _drop(self, name, error: AlignmentError) -> None:
        del self.matched[name]
        self.errors[name] = error
        if self.matched:
            return
        if list(self.errors) == [None]:
            raise error
        raise AlignmentError("the evaluated samples match none of the eval datasets: "
                             + "; ".join(f"{key}: {value}" for key, value in self.errors.items()))


def _pad_token_id(tokenizer) -> Optional[int]:
    return getattr(tokenizer, "pad_token_id", None)


def _to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if x.dtype.is_floating_point:
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


def _token_rows(ids) -> List[List[int]]:
    """Token-id rows without ``-100`` (the Trainer's cross-batch padding) or other negative ids."""
    if isinstance(ids, tuple):
        ids = ids[0]
    array = _to_numpy(ids)
    if array.ndim == 1:
        array = array[None]
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
        raise InputError(f"expected generated token ids of shape (n, length), got {array.dtype} {array.shape}: "
                         "set predict_with_generate=True")
    return [row[row >= 0].tolist() for row in array]


def _decode(tokenizer, predictions) -> List[str]:
    texts = tokenizer.batch_decode(_token_rows(predictions), skip_special_tokens=True,
                                   clean_up_tokenization_spaces=True)
    return [text.strip() for text in texts]


def _labels_of(eval_pred) -> Optional[List[List[int]]]:
    label_ids = getattr(eval_pred, "label_ids", None)
    return None if label_ids is None else _token_rows(label_ids)


def _nbytes(values) -> int:
    return int(values.numel() * values.element_size()) if hasattr(values, "element_size") else np.asarray(values).nbytes


def _sample_fingerprints(inputs, inputs_column: str, n: int, last: bool, state) -> Optional[np.ndarray]:
    """Fingerprints of the evaluated samples' model inputs: of the gathered array (a whole pass), or of the
    ``inputs_column`` of a batch dict, which the Trainer passes per process: gathered across processes here,
    and cut to the ``n`` predictions on the last batch (a plain Trainer's ``gather_for_metrics`` drops there the
    samples that evened out the processes' batches; Seq2SeqTrainer keeps them)."""
    if inputs is None:
        return None
    if not hasattr(inputs, "keys"):
        return fingerprints(_to_numpy(inputs))
    if inputs_column not in inputs:
        raise AlignmentError(f"the batch inputs have no {inputs_column!r} (have {list(inputs.keys())}); "
                             "set inputs_column= to the model input")
    samples = fingerprints(_to_numpy(inputs[inputs_column]))
    if state is not None:
        from accelerate.utils import gather_object

        samples = np.concatenate(gather_object([samples]))
        if last and len(samples) > n:
            samples = samples[:n]
    return samples


def _strip_labels(labels: Sequence[int], pad_token_id: Optional[int]) -> List[int]:
    return [int(t) for t in labels if t >= 0 and t != pad_token_id]


def fingerprints(values: np.ndarray, size: int = FINGERPRINT_SIZE) -> np.ndarray:
    """Per-row means of ``size`` contiguous chunks of the flattened values (float64): robust to dtype rounding."""
    flat = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    size = min(size, flat.shape[1])
    starts = np.linspace(0, flat.shape[1], size + 1).astype(np.int64)
    return np.add.reduceat(flat, starts[:-1], axis=1) / np.diff(starts)


class _RowMatcher:
    """Maps evaluated samples to dataset rows (by content when inputs come along, else by position), verified."""

    def __init__(self, dataset, pad_token_id, labels_column: str, inputs_column: str, atol: float):
        self.dataset = dataset
        self.pad_token_id = pad_token_id
        self.labels_column = labels_column
        self.inputs_column = inputs_column
        self.atol = atol
        self._fingerprints: Optional[np.ndarray] = None
        self._labels: Optional[List[List[int]]] = None
        self.reset()

    def reset(self) -> None:
        self.order: List[int] = []  # the rows of the pass's samples so far, in evaluation order
        self.used = np.zeros(len(self.dataset), dtype=bool)
        self.by_content: Optional[bool] = None

    def match(self, n: int, labels: Optional[List[List[int]]], samples: Optional[np.ndarray], *,
              tail: bool = False) -> List[int]:
        """The rows of ``n`` evaluated samples; ``samples``: the fingerprints of their inputs, if any.

        ``tail``: the last batch of a pass under DDP, where Seq2SeqTrainer passes, after the dataset's rows, the
        samples that evened out the processes' batches (the pass's first samples again). They are checked to be
        those repeats and left out: fewer than ``n`` rows come back."""
        by_content = samples is not None
        if self.by_content is not None and by_content != self.by_content:
            raise AlignmentError("some evaluation batches came with inputs and some without")
        self.by_content = by_content
        if labels is not None and len(labels) != n:
            raise AlignmentError(f"{n} predictions but {len(labels)} label rows")
        if by_content and len(samples) != n:
            raise AlignmentError(f"{n} predictions but {len(samples)} input rows")
        room = len(self.dataset) - len(self.order)
        kept = min(n, room) if tail else n
        if kept > room:
            raise AlignmentError(f"more evaluated samples than the {len(self.dataset)} rows of eval_dataset")
        start = len(self.order)
        if by_content:
            self.order += self._match_content(samples[:kept], labels)
        else:
            self.order += self._match_position(kept, labels)
        for offset in range(kept, n):
            self._check_repeat(offset, labels, samples, start)
        return self.order[start:]

    def finish(self) -> None:
        if len(self.order) != len(self.dataset):
            raise AlignmentError(f"evaluated {len(self.order)} samples but eval_dataset has {len(self.dataset)} rows: "
                                 "pass the Trainer's eval_dataset")

    def _check_repeat(self, offset: int, labels, samples: Optional[np.ndarray], start: int) -> None:
        """Sample ``offset`` of the batch (past the dataset's rows) must repeat the pass's sample ``repeat``."""
        repeat = (start + offset - len(self.dataset)) % len(self.dataset)
        row = self.order[repeat]
        checks = []
        if labels is not None and self._has_labels():
            checks.append(_strip_labels(labels[offset], self.pad_token_id) == self.dataset_labels()[row])
        if samples is not None:
            checks.append(bool(np.abs(self.dataset_fingerprints()[row] - samples[offset]).max() <= self.atol))
        if not checks or not all(checks):
            raise AlignmentError(f"evaluated sample {start + offset} is beyond the {len(self.dataset)} rows of "
                                 f"eval_dataset and does not repeat sample {repeat} (as the DDP padding would)")

    def _match_position(self, n: int, labels) -> List[int]:
        rows = list(range(len(self.order), len(self.order) + n))
        if labels is None or not self._has_labels():
            raise AlignmentError(
                "cannot verify which dataset row each prediction belongs to: keep the labels in eval_dataset "
                f"(column {self.labels_column!r}) or pass include_for_metrics=['inputs'] to the training arguments")
        for offset, row in enumerate(rows):
            if _strip_labels(labels[offset], self.pad_token_id) != self.dataset_labels()[row]:
                raise AlignmentError(
                    f"evaluated sample {row} does not carry the labels of eval_dataset row {row}: the evaluation "
                    "order is not the dataset order; pass include_for_metrics=['inputs'] to match by content")
        return rows

    def _match_content(self, samples: np.ndarray, labels) -> List[int]:
        table = self.dataset_fingerprints()
        if samples.shape[1] != table.shape[1]:
            raise AlignmentError(f"batch {self.inputs_column!r} rows have another size than eval_dataset's")
        rows = []
        for start in range(0, len(samples), _MATCH_CHUNK):
            chunk = samples[start:start + _MATCH_CHUNK]
            # squared distances in float64; candidates are then checked element-wise against the tolerance
            dist = (chunk ** 2).sum(1)[:, None] + (table ** 2).sum(1)[None] - 2 * chunk @ table.T
            limit = table.shape[1] * self.atol ** 2 * 4
            for i, sample in enumerate(chunk):
                near = np.flatnonzero(dist[i] <= limit)
                near = near[np.abs(table[near] - sample).max(1) <= self.atol]
                index = start + i
                rows.append(self._pick(near, None if labels is None else labels[index],
                                       len(self.order) + index))
        return rows

    def _pick(self, candidates: np.ndarray, labels, index: int) -> int:
        if len(candidates) == 0:
            raise AlignmentError(f"evaluated sample {index}: no eval_dataset row has the same {self.inputs_column!r} "
                                 "(is eval_dataset the Trainer's, with a deterministic preprocessing?)")
        if labels is not None and self._has_labels():
            wanted = _strip_labels(labels, self.pad_token_id)
            candidates = [row for row in candidates if self.dataset_labels()[row] == wanted]
            if not candidates:
                raise AlignmentError(f"evaluated sample {index}: the rows with its {self.inputs_column!r} "
                                     "have other labels")
        free = [row for row in candidates if not self.used[row]]
        if not free:
            raise AlignmentError(f"evaluated sample {index}: its eval_dataset row was already evaluated in this pass")
        self.used[free[0]] = True
        return int(free[0])

    def _has_labels(self) -> bool:
        columns = getattr(self.dataset, "column_names", None)
        if columns is not None:
            return self.labels_column in columns
        return self.labels_column in self.dataset[0]

    def dataset_labels(self) -> List[List[int]]:
        if self._labels is None:
            values = raw_column(self.dataset, self.labels_column, range(len(self.dataset)))
            self._labels = [_strip_labels(v, self.pad_token_id) for v in values]
        return self._labels

    def dataset_fingerprints(self) -> np.ndarray:
        if self._fingerprints is None:
            source = _numpy_view(self.dataset, self.inputs_column)
            parts = []
            for start in range(0, len(source), _FINGERPRINT_ROWS):
                stop = min(start + _FINGERPRINT_ROWS, len(source))
                chunk = source[start:stop] if hasattr(source, "column_names") else [source[i] for i in range(start, stop)]
                values = chunk[self.inputs_column] if hasattr(chunk, "keys") else [row[self.inputs_column] for row in chunk]
                parts.append(fingerprints(np.stack([_to_numpy(v) for v in values])))
            self._fingerprints = np.concatenate(parts)
        return self._fingerprints


def _is_hf_dataset(dataset) -> bool:
    return hasattr(dataset, "with_format") and hasattr(dataset, "column_names")


def _numpy_view(dataset, column: str):
    """The dataset as the model sees it: a custom transform is kept; plain Arrow columns are read as numpy."""
    if _is_hf_dataset(dataset) and dataset.format.get("type") != "custom":
        return dataset.with_format("numpy", columns=[column])
    return dataset


def raw_column(dataset, column: str, rows: Sequence[int]) -> List[Any]:
    """``column`` of ``rows`` as stored (an ``datasets`` transform or tensor format is bypassed)."""
    rows = list(rows)
    if _is_hf_dataset(dataset):
        if column not in dataset.column_names:
            raise InputError(f"eval_dataset has no column {column!r}; it has {dataset.column_names}")
        return dataset.with_format(None).select_columns([column])[rows][column]
    return [dataset[i][column] for i in rows]


_PREDICTION = "generated caption"  # the records' caption field: the decoded prediction (no dataset column)
_HOOK_OPTIONS = {"caption": "predictions", "image": "image_column=", "references": "references_column="}


def _record_columns(metric: str, image_column: Optional[str], references_column: Optional[str]) -> RecordColumns:
    """The record → column mapping of every entry point for one evaluation pass: a column the hook was given is read
    from every row (a references cell holding list text is that list, as ``capeval score`` reads it), errors name
    the eval_dataset row and the column."""
    policy = SimpleNamespace(name=metric, images="required" if image_column else "unused",
                             references="required" if references_column else "unused")
    fields = {"caption": _PREDICTION, "image": image_column or "image", "references": references_column or "references"}
    return RecordColumns(policy, fields=fields, options=_HOOK_OPTIONS, row_name="eval_dataset row")


def _score(adapter: _MetricAdapter, predictions: List[str], rows: List[int], dataset, image_column,
           references_column, state) -> Dict[str, float]:
    """``state``: accelerate's state under DDP (the work is shared, every process gets the result), else None."""
    empty = [i for i, text in enumerate(predictions) if not text]
    refused = adapter.empty_caption == "error" or (adapter.empty_caption == "score" and not adapter.scores_empty)
    if empty and refused and adapter.module is None:
        fix = ("pass empty_caption='score' to make_compute_metrics to score them as the metric's official "
               "implementation does" if adapter.scores_empty else
               f"{adapter.name} does not score empty captions: pass empty_caption='skip' or a score to "
               "make_compute_metrics")
        raise InputError(f"{len(empty)} of {len(predictions)} generated captions are empty (first: sample {empty[0]}, "
                         f"eval_dataset row {rows[empty[0]]}); {fix}, or set min_new_tokens for generation")

    columns = _record_columns(adapter.name, image_column, references_column)

    def score(indices: Sequence[int], empty_caption: Optional[EmptyCaption] = None) -> Dict[str, Any]:
        """Score the samples at ``indices``, reading their images and references from the dataset."""
        chosen = [rows[i] for i in indices]
        records = [{"index": row, _PREDICTION: predictions[i]} for i, row in zip(indices, chosen)]
        for column in (image_column, references_column):
            if column:
                for record, value in zip(records, raw_column(dataset, column, chosen)):
                    record[column] = value
        captions, images, references = columns(records)
        return adapter.score(captions, images, references, rows=chosen, empty_caption=empty_caption)

    everything = range(len(predictions))
    if state is None:
        result = score(everything)
    elif adapter.splits:  # each process scores its share of the captions it scores on its own device
        by_scorer = adapter.empty_caption in ("score", "error")  # empty ones scored by the scorer, or refused above
        skipped = set() if by_scorer else set(empty)
        keep = [i for i in everything if i not in skipped]
        shares = share(state, len(keep))  # positions in ``keep``
        result = gather_shares(state, len(keep), shares, lambda: score([keep[i] for i in shares], "score")) \
            if keep else {}
        if not by_scorer:
            result = with_empty_captions(result, empty, len(predictions), adapter.empty_caption)
    else:
        result = on_main_process(state, lambda: score(everything))
    out = {key: float(value) for key, value in result.items()
           if isinstance(value, (int, float, np.number)) and not isinstance(value, bool)}
    if "hashcode" in result:  # which weights and options produced these numbers (a string: loggers keep it as text)
        out["hashcode"] = result["hashcode"]
    return out
