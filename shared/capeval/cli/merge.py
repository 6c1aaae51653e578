"""``capeval merge``: join shard outputs in input order."""

from __future__ import annotations

import json
from typing import Dict, Optional

from capeval.cli.score import SHARD_RUN_KEYS, RunningSummary
from capeval.core.errors import InputError
from capeval.core.records import iter_records, parse_shard


def configure(merge) -> None:
    merge.add_argument("shards", nargs="+", help="per-shard JSONL outputs, or Polos feature folders")
    merge.add_argument("--output", required=True)


def _shard_run(path, row) -> Optional[Dict]:
    """The ``shard_of`` stamp of a ``capeval score --shard`` row (None for unsharded rows), checked."""
    if "shard" not in row:
        return None
    stamp = row.pop("shard_of", None)
    if stamp is None:
        raise InputError(f"{path}: record {row['index']} of shard {row['shard']} carries no 'shard_of' stamp (the "
                         "input fingerprint, metric and options of its run); it was written by an older capeval, "
                         "so it cannot be checked against the other shards: score that shard again")
    if not isinstance(stamp, dict) or sorted(stamp) != sorted(SHARD_RUN_KEYS):
        raise InputError(f"{path}: record {row['index']}: malformed 'shard_of' stamp {stamp!r}")
    return stamp


def _different_runs(first_path, first: Dict, path, other: Dict) -> str:
    differences = []
    if (first["input"], first["records"]) != (other["input"], other["records"]):
        differences.append(f"input fingerprint {first['input']} of {first['records']} records vs {other['input']} "
                           f"of {other['records']} records")
    if first["metric"] != other["metric"]:
        differences.append(f"metric {first['metric']} vs {other['metric']}")
    if first["options"] != other["options"]:
        differences.append(f"options {json.dumps(first['options'], sort_keys=True)} vs "
                           f"{json.dumps(other['options'], sort_keys=True)}")
    where = f"{first_path} and {path}" if str(first_path) != str(path) else f"rows of {path}"
    return (f"{where} come from different runs: {'; '.join(differences)}. Score the stale shard(s) again from the "
            "same input with the same metric and options")


def run(args) -> int:
    """Join shard outputs in input order; fail on missing or duplicated records. Shards of ``capeval score --shard``
    (JSONL) or feature folders of ``capeval train polos-features --shard``.

    Shards of different runs are refused: every row of ``capeval score --shard i/n`` carries ``"shard": "i/n"`` and
    ``"shard_of": {"input", "records", "metric", "options"}``: a fingerprint of the whole input (sha256 over every
    record's canonical JSON in input order, :class:`capeval.core.records.RecordFingerprint`; every shard streams
    the whole input, so all shards of one input agree), its number of records, the metric and the options that
    change scores (``weights``, ``cider_idf``; not device or batch size). The fingerprint is complete only at the
    end of the stream, so the shard writes its rows to ``<output>.partial``, rewrites them with the stamp once the
    input is read, and renames the result to ``<output>``: one self-describing file, which appears complete or not
    at all. All stamps must be equal; they and the shard tags are dropped from the merged rows, which equal those of
    a one-process run. Rows without a shard tag (unsharded outputs) merge as before; shard rows without a stamp
    (older outputs) are refused, since they cannot be checked."""
    from capeval.polos.training import is_feature_folder, merge_features

    folders = [is_feature_folder(path) for path in args.shards]
    if any(folders):
        if not all(folders):
            raise InputError("merge either `capeval score` outputs or Polos feature folders, not both")
        out = merge_features(args.shards, args.output)
        print(json.dumps({"merged": str(out), "shards": len(args.shards)}, indent=2))
        return 0
    rows: Dict[int, Dict] = {}
    shards_seen: Dict[int, set] = {}
    run, run_path = None, None  # the stamp of the first shard row, and its file
    for path in args.shards:
        for row in iter_records(path):
            if "index" not in row or "scores" not in row:
                raise InputError(f"{path}: not a `capeval score` output (rows need 'index' and 'scores')")
            stamp = _shard_run(path, row)
            if stamp is not None:
                if run is None:
                    run, run_path = stamp, path
                elif stamp != run:
                    raise InputError(_different_runs(run_path, run, path, stamp))
            if row["index"] in rows:
                raise InputError(f"record {row['index']} appears in more than one shard ({path})")
            if "shard" in row:
                i, n = parse_shard(row.pop("shard"))
                shards_seen.setdefault(n, set()).add(i)
            rows[row["index"]] = row
    if len(shards_seen) > 1:
        raise InputError(f"the shards were cut in different ways ({sorted(shards_seen)} shards); use one --shard i/n")
    for n, seen in shards_seen.items():
        absent = sorted(set(range(n)) - seen)
        if absent:
            raise InputError(f"shard(s) {', '.join(f'{i}/{n}' for i in absent)} are missing (no rows); "
                             "run them and merge again")
    total = max(max(rows, default=-1) + 1, run["records"] if run else 0)  # the stamp knows the input's last record
    missing = sorted(set(range(total)) - set(rows))
    if missing:
        raise InputError(f"{len(missing)} records are missing (first: {missing[:5]}); re-run the shard(s) holding them")
    hashcodes = sorted({str(row.get("hashcode")) for row in rows.values()})
    if len(hashcodes) > 1:
        raise InputError(f"the shards were scored with different weights or options (hashcodes {hashcodes}); "
                         "score them again with the same ones")
    summary = RunningSummary()
    with open(args.output, "w", encoding="utf-8") as out:
        for index in sorted(rows):
            out.write(json.dumps(rows[index]) + "\n")
            summary.add_scores({k: [v] for k, v in rows[index]["scores"].items()})
    print(json.dumps({"n": len(rows), **summary.result(), "hashcode": next(iter(rows.values())).get("hashcode")},
                     indent=2))
    return 0
