"""``capeval ray-score``: score a dataset with Ray Data (local, or the cluster named by ``RAY_ADDRESS``) and write
parquet shards; the numbers are those of ``capeval score`` (see :mod:`capeval.integrations.ray`). Every row carries
the scorer's ``hashcode`` and ``provenance``; the summary and the sidecar ``<output>.provenance.json`` say them once,
with ``tiny_random_weights``. An input without records is an error, as in ``capeval score``."""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path
from typing import Dict

from capeval.cli.arguments import add_json, add_scoring_options, print_result, record_fields, scorer_options
from capeval.cli.options import positive_int
from capeval.cli.sidecar import identity, remove_sidecar, write_sidecar
from capeval.core.errors import InputError

RAY_RETRY_HINT = "\nFailed to apply UDF transform"  # what Ray Data appends to a map function's error message


def configure(parser) -> None:
    from capeval.core.scoring import scorers

    parser.add_argument("metric", help=f"one of {sorted(scorers())} (any case, '-' for '_')")
    parser.add_argument("--input", required=True, nargs="+",
                        help="parquet, JSONL or CSV files or folders of them (any path Ray Data reads: local, s3://, "
                             "gs://...) with 'caption', 'image' (path, bytes or {bytes, path}), 'references' (a list, "
                             "or list text such as a CSV cell '[\"a\", \"b\"]')")
    parser.add_argument("--output", required=True, help="folder for the parquet shards (input columns + scores)")
    parser.add_argument("--format", choices=("parquet", "json", "csv"),
                        help="input format (default: from the first input's suffix; folders: parquet)")
    parser.add_argument("--index-column", default="index",
                        help="integer column naming rows in errors (default 'index'; when the input lacks it, rows "
                             "are numbered in input order, which materializes the input once)")
    parser.add_argument("--on-error", choices=("raise", "column"), default="raise",
                        help="invalid rows: fail the job (raise) or write the InputError text to an 'error' column")
    parser.add_argument("--concurrency", type=positive_int, default=1,
                        help="scoring actors (each loads the model once)")
    parser.add_argument("--num-gpus", type=float, help="GPUs per actor (e.g. 1, or 0.5 to share one)")
    parser.add_argument("--num-cpus", type=float, default=1.0,
                        help="CPUs per actor (default 1); actors must leave CPUs free for reading and writing")
    add_scoring_options(parser, batch_size=64)  # every option of how `capeval score` scores; the batch size is also
    # Ray Data's, so it has a value of its own
    add_json(parser, "the summary (means, n, errors, hashcode, provenance)")


def _read(args):
    import ray.data

    suffix = Path(args.input[0]).suffix.lower()
    kind = args.format or ("json" if suffix in (".jsonl", ".json") else "csv" if suffix == ".csv" else "parquet")
    reader = getattr(ray.data, f"read_{kind}")
    ds = reader(args.input, **({"lines": True} if kind == "json" else {}))
    schema = ds.schema()
    if schema is None:  # not a row in any file
        raise _no_records(args.input)
    if args.index_column not in schema.names:  # number the rows in input order
        count = ds.count()
        if count == 0:
            raise _no_records(args.input)
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        ds = ds.zip(ray.data.range(count).rename_columns({"id": args.index_column}))
    return ds


def _no_records(inputs) -> InputError:
    return InputError(f"{', '.join(map(str, inputs))} holds no records")


def _distinct(table, column: str) -> set:
    import pyarrow.compute as pc

    return set(pc.unique(pc.drop_null(table[column])).to_pylist()) if column in table.column_names else set()


class _ScoreColumns:
    """Checks that every scored row (a row with any score) has the same score columns: the actors each check the
    rows they score (an optional field such as CLIP-S's references in every row or in none), but rows scored by
    different actors meet only in the output, where RefCLIP-S rows beside CLIP-S-only rows would be averaged as if
    they were one run."""

    def __init__(self, index_column: str):
        self.index_column = index_column
        self.scored = 0
        self.defined: Counter = Counter()  # score column -> scored rows that have it
        self.lacking: Dict[str, object] = {}  # score column -> a scored row (its index) without it, in tables so far
        self.first_scored = None  # the first scored row (its index)

    def add(self, table, scores) -> None:
        import pyarrow.compute as pc

        if not scores:
            return
        valid = {c: pc.is_valid(table[c]) for c in scores}
        scored = functools.reduce(pc.or_, valid.values())
        count = pc.sum(scored).as_py() or 0
        if not count:
            return
        for column in set(self.defined) - set(scores):  # a column this table's rows were all scored without
            self.lacking.setdefault(column, self._first_index(table, scored))
        for column in scores:
            if column not in self.defined and self.scored:  # the tables before were all scored without it
                self.lacking[column] = self.first_scored
            self.defined[column] += pc.sum(pc.and_(scored, valid[column])).as_py() or 0
            without = pc.and_(scored, pc.invert(valid[column]))
            if column not in self.lacking and pc.any(without).as_py():
                self.lacking[column] = self._first_index(table, without)
        self.scored += count
        if self.first_scored is None:
            self.first_scored = self._first_index(table, scored)

    def _first_index(self, table, mask):
        rows = table.filter(mask)
        return rows[self.index_column][0].as_py() if self.index_column in rows.column_names else "?"

    def check(self, output: Path) -> None:
        mixed = sorted(c for c, k in self.defined.items() if k < self.scored)
        if mixed:
            column = mixed[0]
            raise InputError(f"{output} mixes rows scored with and without {column!r} ({self.defined[column]} of "
                             f"{self.scored} scored rows have it; record {self.lacking[column]} has not): give "
                             "references (or any optional field) in every record or in none")


def _summary(output: Path, metric: str, input_columns, index_column: str = "index") -> dict:
    """Means of the score columns (the float columns the scorer added) over the written shards, nulls of invalid
    rows and NaN left out; row and error counts; the scorer's hashcode, ``tiny_random_weights`` and provenance.
    An output whose scored rows do not all have the same score columns is refused (:class:`_ScoreColumns`)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from capeval.cli.score import RunningSummary
    from capeval.integrations.ray import ERROR_COLUMN, HASHCODE_COLUMN, PROVENANCE_COLUMN

    summary, n, errors, hashcodes, provenances = RunningSummary(), 0, 0, set(), set()
    score_columns = _ScoreColumns(index_column)
    for path in sorted(output.glob("*.parquet")):
        table = pq.read_table(path)
        n += table.num_rows
        if ERROR_COLUMN in table.column_names:
            errors += table.num_rows - table[ERROR_COLUMN].null_count
        scores = [c for c, t in zip(table.column_names, table.schema.types) if t == "double" and c not in input_columns]
        score_columns.add(table, scores)
        summary.add_scores({c: pc.drop_null(table[c]).to_pylist() for c in scores})
        hashcodes |= _distinct(table, HASHCODE_COLUMN)
        provenances |= _distinct(table, PROVENANCE_COLUMN)
    if len(hashcodes) > 1 or len(provenances) > 1:
        raise InputError(f"the actors scored with different weights or options (hashcodes {sorted(hashcodes)}): "
                         f"{output} mixes their numbers; score again on nodes of one device type")
    score_columns.check(output)
    provenance = json.loads(provenances.pop()) if provenances else None
    return {"metric": metric, "n": n, **({"errors": errors} if errors else {}), **summary.result(),
            **identity(hashcodes.pop() if hashcodes else None, provenance)}


def _input_error(exc: BaseException):
    """The worker's :class:`InputError` that a Ray exception wraps, as a plain ``InputError``."""
    while exc is not None:
        original = getattr(exc, "cause", None)  # a RayTaskError holds the worker's exception here
        if isinstance(original, InputError):  # Ray appends its retry hint to the message: keep ours
            return InputError(str(original).partition(RAY_RETRY_HINT)[0])
        exc = exc.__cause__ or exc.__context__
    return None


def run(args) -> int:
    import ray

    from capeval.core.scoring import get_scorer_spec
    from capeval.integrations.ray import score_dataset

    output = Path(args.output)
    if output.exists() and any(output.iterdir()):
        raise InputError(f"--output {output} is not empty")
    options = scorer_options(args, get_scorer_spec(args.metric), args.metric)
    remove_sidecar(output)
    if not ray.is_initialized():
        ray.init()  # RAY_ADDRESS names a running cluster; without it a local one starts
    cpus = ray.cluster_resources().get("CPU", 0)
    if args.concurrency * args.num_cpus >= cpus:  # Ray Data would wait forever for a CPU to read or write on
        raise InputError(f"--concurrency {args.concurrency} actors x --num-cpus {args.num_cpus:g} take all {cpus:g} "
                         "CPUs of the Ray cluster and leave none to read and write: lower one of them")
    ds = _read(args)
    try:  # two-pass CIDEr runs its first pass inside score_dataset
        score_dataset(ds, args.metric, options=options, on_error=args.on_error, index_column=args.index_column,
                      images_dir=args.images, concurrency=args.concurrency, batch_size=args.batch_size,
                      num_gpus=args.num_gpus, num_cpus=args.num_cpus, empty_caption=args.empty_caption,
                      fields=record_fields(args), image_format=args.image_format).write_parquet(str(output))
    except Exception as exc:  # Ray wraps a worker's InputError: report its text as every command does
        cause = _input_error(exc)
        if cause is None:
            raise
        raise cause from None
    summary = _summary(output, args.metric, set(ds.schema().names), args.index_column)
    if summary["n"] == 0:
        raise _no_records(args.input)
    write_sidecar(output, rows=summary["n"], hashcode=summary["hashcode"], provenance=summary["provenance"],
                  metric=args.metric)
    print_result(args, summary)
    return 0
