"""The uniform benchmark schema (one parquet table per benchmark) and its round trip with the loaded benchmarks.

Scored benchmarks: ``image, candidate, references, human_score, rater, category`` (one row per judgment;
``rater`` is the rater's index where each rating is its own row; a null ``human_score`` is a missing judgment,
read as NaN). Pairwise benchmarks: ``image, candidate_a,
candidate_b, references, preference, votes_a, votes_b, category`` (``preference`` 0: A, 1: B, -1: tied votes,
broken at random per draw). Images are path strings as in the release. The protocol (statistic, references
sampled per draw, number of draws) travels in the parquet schema metadata under ``capeval``.
"""

from __future__ import annotations

import json
from typing import Dict, Union

from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.pairwise import PairwiseBenchmark
from capeval.core.errors import InputError

METADATA_KEY = b"capeval"


def arrow_schema(kind: str):
    import pyarrow as pa

    common = [("image", pa.string())]
    if kind == "scored":
        fields = common + [("candidate", pa.string()), ("references", pa.list_(pa.string())),
                           ("human_score", pa.float64()), ("rater", pa.int32()), ("category", pa.string())]
    elif kind == "pairwise":
        fields = common + [("candidate_a", pa.string()), ("candidate_b", pa.string()),
                           ("references", pa.list_(pa.string())), ("preference", pa.int8()),
                           ("votes_a", pa.int32()), ("votes_b", pa.int32()), ("category", pa.string())]
    else:
        raise ValueError(f"unknown benchmark kind {kind!r}")
    return pa.schema(fields)


def _optional(values, n):
    return list(values) if values is not None else [None] * n


def to_table(benchmark: Union[Benchmark, PairwiseBenchmark]):
    """The benchmark as a pyarrow table in the uniform schema, its protocol in the schema metadata."""
    import pyarrow as pa

    if isinstance(benchmark, PairwiseBenchmark):
        kind, n = "pairwise", len(benchmark.candidates_a)
        columns = {"image": benchmark.images, "candidate_a": benchmark.candidates_a,
                   "candidate_b": benchmark.candidates_b, "references": benchmark.references,
                   "preference": benchmark.preference, "votes_a": _optional(benchmark.votes_a, n),
                   "votes_b": _optional(benchmark.votes_b, n), "category": _optional(benchmark.categories, n)}
        protocol = {"references_per_draw": benchmark.references_per_draw, "draws": benchmark.draws}
    else:
        kind, n = "scored", len(benchmark.candidates)
        columns = {"image": benchmark.images, "candidate": benchmark.candidates,
                   "references": benchmark.references, "human_score": benchmark.human,
                   "rater": _optional(benchmark.raters, n), "category": _optional(benchmark.categories, n)}
        protocol = {"corpus_per_category": benchmark.corpus_per_category}
    metadata = {"name": benchmark.name, "kind": kind, "statistic": benchmark.statistic,
                "protocol": benchmark.protocol, **protocol}
    schema = arrow_schema(kind).with_metadata({METADATA_KEY: json.dumps(metadata).encode()})
    return pa.table(columns, schema=schema)


def _none_if_all_null(values):
    return None if all(v is None for v in values) else values


def from_table(table) -> Union[Benchmark, PairwiseBenchmark]:
    """A benchmark from a table written by :func:`to_table` (its metadata gives the protocol)."""
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise InputError("this parquet table carries no capeval benchmark metadata (write it with convert_to_parquet)")
    meta: Dict = json.loads(raw)
    expected = arrow_schema(meta["kind"]).names
    if table.schema.names != expected:
        raise InputError(f"benchmark table columns {table.schema.names} differ from the schema {expected}")
    cols = table.to_pydict()
    if meta["kind"] == "pairwise":
        bad = [k for k, p in enumerate(cols["preference"]) if p not in (0, 1, -1)]
        if bad:
            raise InputError(f"{meta['name']} table: record {bad[0]}: field 'preference': "
                             f"{cols['preference'][bad[0]]!r} is not 0 (A), 1 (B) or -1 (tied) "
                             f"({len(bad)} such records)")
        return PairwiseBenchmark(meta["name"], cols["candidate_a"], cols["candidate_b"], cols["references"],
                                 cols["image"], cols["preference"], meta["protocol"],
                                 categories=_none_if_all_null(cols["category"]),
                                 votes_a=_none_if_all_null(cols["votes_a"]), votes_b=_none_if_all_null(cols["votes_b"]),
                                 references_per_draw=meta["references_per_draw"], draws=meta["draws"],
                                 statistic=meta["statistic"])
    return Benchmark(meta["name"], cols["candidate"], cols["references"], cols["image"], cols["human_score"],
                     statistic=meta["statistic"], protocol=meta["protocol"],
                     raters=_none_if_all_null(cols["rater"]), categories=_none_if_all_null(cols["category"]),
                     corpus_per_category=meta.get("corpus_per_category", False))
