"""Ray Data integration (extra ``[ray]``): score a ``ray.data.Dataset`` of ``{caption, image?, references?}`` rows.

:class:`RayScorer` is a callable class for ``Dataset.map_batches``: each actor loads the registered scorer once
(``load_scorer``), and every batch goes through the scorer's own validation (``validate(..., indices=...)``) and
per-sample code, as in every other entry point. Rows are named in errors by their integer ``index`` column (the
record number of ``capeval score``). Images may be paths, embedded bytes or ``{"bytes", "path"}`` structs.

Invalid rows, ``on_error``:

- ``"raise"`` (default): the first :class:`~capeval.core.errors.InputError` fails the job (Ray does not retry it);
  the caller gets Ray's ``RayTaskError(InputError)``, an ``InputError`` whose ``.cause`` is the original.
- ``"column"``: the row keeps its place, its score columns are null and the ``error`` column holds the same
  ``InputError`` text; valid rows get ``error = null``. A score is never a silent NaN.

Corpus-level metrics: official CIDEr-D (``cider``, and EnsembEval weights holding ``cider`` without ``cider_idf``)
takes its IDF from the whole scored corpus, so :func:`score_dataset` runs two passes: :func:`document_frequencies`
(a Ray aggregation over the reference sets) and then fixed-IDF CIDEr-D (``cider_fixed_idf`` / EnsembEval's
``cider_idf``), which with the corpus's own frequencies equals pycocoevalcap's whole-corpus CIDEr-D. Other
corpus-level metrics (BLEU and METEOR corpus values) are refused.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from types import SimpleNamespace
from typing import Dict, List, Mapping, Optional, Tuple

from capeval.core.errors import InputError
from capeval.core.inputs import validate_inputs
from capeval.core.record_columns import DEFAULT_FIELDS, RecordColumns
from capeval.core.empty_captions import empty_caption_policy
from capeval.core.scoring import get_scorer_spec, load_scorer

ON_ERROR = ("raise", "column")
ERROR_COLUMN = "error"
HASHCODE_COLUMN = "hashcode"
PROVENANCE_COLUMN = "provenance"  # the scorer's full provenance as JSON text (its hashcode's meaning)
TWO_PASS_METRICS = ("cider", "ensembeval")  # corpus-level only through CIDEr's IDF


def _indexed(records: List[Dict], index_column: str, image_field: str = DEFAULT_FIELDS["image"]) -> List[Dict]:
    """Rows with the integer ``index`` that :class:`RecordColumns` and the validation name them by."""
    out = []
    for record in records:
        index = record.get(index_column)
        if isinstance(index, bool) or not isinstance(index, int):
            raise InputError(f"every row needs an integer {index_column!r} column (its record number, used in "
                             f"error messages); got {index!r}")
        record = {**record, "index": index}
        image = record.get(image_field)
        if isinstance(image, (bytes, bytearray)):  # a binary image column
            record[image_field] = {"bytes": bytes(image), "path": None}
        out.append(record)
    return out


def _check_on_error(on_error: str) -> None:
    if on_error not in ON_ERROR:
        raise InputError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")


def _split_valid(records: List[Dict], validate, on_error: str) -> Tuple[List[int], Dict[int, str], object]:
    """(positions of valid rows, {position: InputError text}, validated input of the valid rows). The whole batch is
    validated at once; only when that fails (and ``on_error="column"``) is each row validated alone."""
    try:
        return list(range(len(records))), {}, validate(records)
    except InputError:
        if on_error == "raise":
            raise
    errors: Dict[int, str] = {}
    for position, record in enumerate(records):
        try:
            validate([record])
        except InputError as exc:
            errors[position] = str(exc)
    valid = [p for p in range(len(records)) if p not in errors]
    return valid, errors, validate([records[p] for p in valid]) if valid else None


class RayScorer:
    """``ds.map_batches(RayScorer, fn_constructor_kwargs={"metric": "clip_s", "options": {...}}, concurrency=N,
    batch_size=B, batch_format="pyarrow")``: the input columns plus one float column per score key, ``hashcode``
    and ``provenance`` (JSON text) when the scorer returns them (null on invalid rows), and ``error`` with
    ``on_error="column"``.

    ``options``: the scorer's keyword options (``load_scorer``); ``images_dir``: the directory relative image paths
    are under; ``index_column``: the integer column naming rows in errors; ``empty_caption``: the scorer's policy
    for empty captions (``"error"``, ``"skip"``: null scores, or a finite score); ``fields`` and ``image_format``:
    the record → column mapping of ``capeval score`` (:class:`~capeval.core.record_columns.RecordColumns`, one per actor:
    an optional field such as CLIP-S's references must be in every row or in none of the rows the actor scores).
    """

    def __init__(self, metric: str, *, options: Optional[Mapping] = None, on_error: str = "raise",
                 index_column: str = "index", images_dir: Optional[str] = None, empty_caption="error",
                 fields: Optional[Mapping[str, str]] = None, image_format: Optional[str] = None):
        _check_on_error(on_error)
        self.empty_caption = empty_caption_policy(empty_caption)
        options = dict(options or {})
        if get_scorer_spec(metric).is_corpus_level(options):
            raise InputError(f"{metric} is corpus-level under these options: use "
                             f"capeval.integrations.ray.score_dataset (two-pass CIDEr) or a fixed cider_idf")
        self.scorer = load_scorer(metric, **options)
        self.on_error, self.index_column = on_error, index_column
        self.columns = RecordColumns(self.scorer, fields=fields, images_dir=images_dir, image_format=image_format)

    def _validate(self, records: List[Dict]):
        captions, images, references = self.columns(records)
        return self.scorer.validate(captions, images, references, indices=[r["index"] for r in records],
                                    empty_caption=self.empty_caption)

    def __call__(self, batch):
        import pyarrow as pa

        if not isinstance(batch, pa.Table):
            raise TypeError("RayScorer takes pyarrow batches: map_batches(RayScorer, batch_format='pyarrow', ...)")
        table = batch
        records = _indexed(table.to_pylist(), self.index_column, self.columns.fields["image"])
        valid, errors, inputs = _split_valid(records, self._validate, self.on_error)
        result = self.scorer.score_inputs(inputs) if valid else {}
        columns: Dict[str, List] = {}
        for key, values in result.items():
            if key.endswith("_per_sample"):
                column = [None] * len(records)
                for position, value in zip(valid, values):
                    column[position] = None if value is None else float(value)  # None: a skipped empty caption
                columns[key[: -len("_per_sample")]] = column
        if "hashcode" in result:
            columns[HASHCODE_COLUMN] = [None if p in errors else result["hashcode"] for p in range(len(records))]
            provenance = json.dumps(result["provenance"], sort_keys=True)
            columns[PROVENANCE_COLUMN] = [None if p in errors else provenance for p in range(len(records))]
        if self.on_error == "column":
            columns[ERROR_COLUMN] = [errors.get(p) for p in range(len(records))]
        clashes = sorted(set(columns) & set(table.column_names))
        if clashes:
            raise InputError(f"the dataset already has column(s) {clashes} that {self.scorer.name} writes; "
                             "rename or drop them first")
        for name, values in columns.items():
            kind = pa.string() if name in (ERROR_COLUMN, HASHCODE_COLUMN, PROVENANCE_COLUMN) else pa.float64()
            table = table.append_column(name, pa.array(values, type=kind))
        return table


def _reference_documents(records: List[Dict], metric: str, on_error: str,
                         fields: Optional[Mapping[str, str]] = None) -> List[List[str]]:
    """The valid rows' reference sets (the rows the second pass scores): captions and references validated as
    every entry point does; with ``on_error="column"`` invalid rows are left out of the corpus."""
    columns = RecordColumns(SimpleNamespace(name=metric, images="unused", references="required"), fields=fields)

    def validate(rows):
        captions, _, references = columns(rows)
        return validate_inputs(captions, None, references, images_needed="unused", references_needed="required",
                               metric=metric, indices=[r["index"] for r in rows])

    _, _, inputs = _split_valid(records, validate, on_error)
    return inputs.references if inputs is not None else []


def _document_frequencies_of_block(block, metric: str, on_error: str, index_column: str,
                                   fields: Optional[Mapping[str, str]] = None) -> Dict:
    from ray.data.block import BlockAccessor

    from capeval.functional.fixed_idf_cider import DocumentFrequencies
    from capeval.text.fixed_idf_cider import tokenize_reference_sets

    records = _indexed(BlockAccessor.for_block(block).to_arrow().to_pylist(), index_column)
    documents = _reference_documents(records, metric, on_error, fields)
    tokenized = tokenize_reference_sets(documents) if documents else []
    return DocumentFrequencies.from_reference_sets(tokenized).to_json()


def _add_counts(a: Dict, b: Dict) -> Dict:
    counts = Counter(a["counts"])
    counts.update(b["counts"])
    return {"num_documents": a["num_documents"] + b["num_documents"], "counts": dict(counts)}


def document_frequencies(ds, *, metric: str = "cider", on_error: str = "raise", index_column: str = "index",
                         fields: Optional[Mapping[str, str]] = None):
    """First pass of corpus CIDEr-D: document frequencies of the PTB-tokenised reference sets of ``ds`` (one
    document per row, as pycocoevalcap counts), by a Ray aggregation (per-block counts, summed); ``fields``: as
    :class:`RayScorer`."""
    from ray.data.aggregate import AggregateFnV2

    from capeval.functional.fixed_idf_cider import DocumentFrequencies

    _check_on_error(on_error)

    class _DocumentFrequencies(AggregateFnV2):
        def __init__(self):
            super().__init__("document_frequencies", zero_factory=lambda: {"num_documents": 0, "counts": {}},
                             on=None, ignore_nulls=False)

        def aggregate_block(self, block):
            return _document_frequencies_of_block(block, metric, on_error, index_column, fields)

        def combine(self, current, new):
            return _add_counts(current, new)

    counted = ds.aggregate(_DocumentFrequencies())["document_frequencies"]
    # sorted: the same corpus gives the same object (and provenance) whatever order the blocks were summed in
    frequencies = DocumentFrequencies.from_json({**counted, "counts": dict(sorted(counted["counts"].items()))})
    if frequencies.num_documents == 0:
        raise InputError("no valid rows to take CIDEr's document frequencies from")
    return frequencies


def score_dataset(ds, metric: str, *, options: Optional[Mapping] = None, on_error: str = "raise",
                  index_column: str = "index", images_dir: Optional[str] = None, concurrency: int = 1,
                  batch_size: int = 64, num_gpus: Optional[float] = None, num_cpus: Optional[float] = None,
                  runtime_env: Optional[Mapping] = None, empty_caption="error",
                  fields: Optional[Mapping[str, str]] = None, image_format: Optional[str] = None):
    """``ds`` scored by ``metric`` (lazy ``Dataset``: :class:`RayScorer` over an actor pool of ``concurrency``
    actors). Official corpus CIDEr (``cider``; ``ensembeval`` with ``cider`` and no ``cider_idf``) first runs
    :func:`document_frequencies` and then scores with that fixed IDF; other corpus-level metrics are refused.
    ``empty_caption``, ``fields``, ``image_format``: as :class:`RayScorer` (``"score"`` or ``"error"`` only for
    two-pass CIDEr). Each actor checks the rows it scores together; rows scored by different actors are not compared
    here (``capeval ray-score`` checks its whole output)."""
    options = dict(options or {})
    _check_on_error(on_error)
    spec = get_scorer_spec(metric)
    spec.check_options(options)
    empty_caption = empty_caption_policy(empty_caption, metric=metric, corpus_level=spec.is_corpus_level(options))
    if spec.is_corpus_level(options):
        if empty_caption not in ("score", "error"):  # the first pass would count the skipped captions' references
            raise InputError(f"empty_caption={empty_caption!r} with two-pass {metric}: score it with `capeval score`")
        if metric not in TWO_PASS_METRICS:
            raise InputError(f"{metric} is corpus-level (its values depend on the whole corpus in ways a second "
                             f"pass cannot fix): score it in one process with `capeval score`")
        frequencies = document_frequencies(ds, metric=metric, on_error=on_error, index_column=index_column,
                                           fields=fields)
        if metric == "cider":
            metric, options = "cider_fixed_idf", {**options, "idf": frequencies}
        else:
            options["cider_idf"] = frequencies
    remote = {k: v for k, v in (("num_gpus", num_gpus), ("num_cpus", num_cpus), ("runtime_env", runtime_env))
              if v is not None}
    scored = ds.map_batches(RayScorer, fn_constructor_kwargs={
        "metric": metric, "options": options, "on_error": on_error, "index_column": index_column,
        "empty_caption": empty_caption, "fields": None if fields is None else dict(fields),
        "image_format": image_format, "images_dir": None if images_dir is None else os.fspath(images_dir)},
        concurrency=concurrency, batch_size=batch_size, batch_format="pyarrow", **remote)
    scored.context.raise_original_map_exception = True  # an InputError reaches the caller as an InputError
    return scored

