"""``capeval merge``: join shard outputs in input order."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Optional

from capeval.cli.arguments import add_json, print_result
from capeval.cli.score import SHARD_RUN_KEYS, RunningSummary
from capeval.cli.sidecar import identity, read_sidecar, sidecar_path, write_sidecar
from capeval.core.errors import InputError
from capeval.core.record_sources import iter_records, parse_shard


def configure(merge) -> None:
    merge.add_argument("shards", nargs="+", help="per-shard JSONL outputs, or Polos feature folders")
    merge.add_argument("--output", required=True, help="the merged JSONL output (with its provenance sidecar), or "
                                                        "the merged feature folder")
    add_json(merge, "the summary (means, n, hashcode, provenance)")


def _shard_run(path, row) -> Optional[Dict]:
    """The ``shard_of`` stamp of a ``capeval score --shard`` row (None for unsharded rows), checked."""
    if "shard" not in row:
        return None
    stamp = row.pop("shard_of", None)
    if stamp is None:
        raise InputError(f"{path}: record {row['index']} of shard {row['shard']} carries no 'shard_of' stamp (the "
                         "input fingerprint, scorer hashcode and field mapping of its run); it was written by an older "
                         "capeval, so it cannot be checked against the other shards: score that shard again")
    _check_stamp(f"{path}: record {row['index']}", stamp)
    return stamp


def _check_stamp(where: str, stamp) -> None:
    if not isinstance(stamp, dict) or sorted(stamp) != sorted(SHARD_RUN_KEYS) or not isinstance(stamp["fields"], dict):
        raise InputError(f"{where}: its 'shard_of' stamp {json.dumps(stamp, sort_keys=True):.200} does not hold "
                         f"{', '.join(SHARD_RUN_KEYS)} (written by another capeval version?): score that shard again")


def _different_runs(first_path, first: Dict, path, other: Dict) -> str:
    differences = []
    if (first["input"], first["records"]) != (other["input"], other["records"]):
        differences.append(f"input fingerprint {first['input']} of {first['records']} records vs {other['input']} "
                           f"of {other['records']} records")
    if first["metric"] != other["metric"]:
        differences.append(f"metric {first['metric']} vs {other['metric']}")
    if first["hashcode"] != other["hashcode"]:
        differences.append(f"hashcode {first['hashcode']} vs {other['hashcode']} (scored with different weights or "
                           "options)")
    for key in sorted(set(first["fields"]) | set(other["fields"])):
        if first["fields"].get(key) != other["fields"].get(key):
            differences.append(f"{key} {first['fields'].get(key)} vs {other['fields'].get(key)}")
    where = f"{first_path} and {path}" if str(first_path) != str(path) else f"rows of {path}"
    return (f"{where} come from different runs: {'; '.join(differences)}. Score the stale shard(s) again from the "
            "same input with the same metric, options and field mapping")


class _ShardFile:
    """One input of ``capeval merge``: its rows (stamps checked and removed), its shard tag and its sidecar."""

    def __init__(self, path):
        self.path, self.rows, self.stamps, self.tags = path, [], [], set()
        for row in iter_records(path):
            if "index" not in row or "scores" not in row:
                raise InputError(f"{path}: not a `capeval score` output (rows need 'index' and 'scores')")
            stamp = _shard_run(path, row)
            if stamp is not None:
                self.stamps.append(stamp)
            if "shard" in row:
                self.tags.add(row.pop("shard"))
            self.rows.append(row)
        self.sidecar = read_sidecar(path)
        if not self.rows and self.sidecar.get("shard"):  # a shard without records: only its sidecar speaks for it
            _check_stamp(f"{path} (sidecar)", self.sidecar.get("shard_of"))
            self.stamps, self.tags = [self.sidecar["shard_of"]], {self.sidecar["shard"]}

    def check_sidecar(self) -> None:
        """The sidecar describes these rows: their number, hashcode, shard tag and stamp."""
        sidecar, name = self.sidecar, f"its sidecar {sidecar_path(self.path).name}"
        if len(self.rows) != sidecar["rows"]:
            raise InputError(f"{self.path} holds {len(self.rows)} rows but {name} says {sidecar['rows']}: the file "
                             "was cut or edited after it was written; score it again")
        hashcodes = {row.get("hashcode") for row in self.rows} - {sidecar["hashcode"]}
        if hashcodes:
            raise InputError(f"rows of {self.path} carry hashcode {sorted(map(str, hashcodes))[0]} but {name} says "
                             f"{sidecar['hashcode']}: score it again")
        if self.tags - {sidecar.get("shard")} or any(stamp != sidecar.get("shard_of") for stamp in self.stamps):
            raise InputError(f"the shard tag or stamp of the rows of {self.path} differ from those of {name}: "
                             "score it again")


def run(args) -> int:
    """Join shard outputs in input order; fail on missing or duplicated records. Shards of ``capeval score --shard``
    (JSONL, each with its provenance sidecar) or feature folders of ``capeval train polos-features --shard``.

    Shards of different runs are refused: every row of ``capeval score --shard i/n`` carries ``"shard": "i/n"`` and
    ``"shard_of": {"input", "records", "metric", "hashcode", "fields"}``: a fingerprint of the whole input (sha256
    over every record's canonical JSON in input order, :class:`capeval.cli.fingerprint.RecordFingerprint`; every shard
    streams the whole input, so all shards of one input agree), its number of records, the metric, the scorer's
    hashcode (weights and every option that changes a value) and how records map to what is scored (caption,
    references and image fields or ``--image-format``, the resolved ``--images`` folder). Each row also carries
    ``scored_digest``, a digest of what it scored (caption, references, decoded image). A shard without records
    writes an empty file whose sidecar holds its tag and stamp. The fingerprint is complete only at the end of the
    stream, so the shard writes its rows to ``<output>.partial``, rewrites them with the stamp once the input is
    read, and renames the result to ``<output>``: one self-describing file, which appears complete or not at all.
    All stamps must be equal and every sidecar must describe its file; stamps and shard tags are dropped from the
    merged rows, which equal those of a one-process run, and the merged output gets its own sidecar. Rows without a
    shard tag (unsharded outputs) merge as before; shard rows without a stamp (older outputs) are refused, and so are
    outputs of a corpus-level metric (their summary's corpus value is no mean of the rows)."""
    from capeval.polos.training import is_feature_folder, merge_features

    folders = [is_feature_folder(path) for path in args.shards]
    if any(folders):
        if not all(folders):
            raise InputError("merge either `capeval score` outputs or Polos feature folders, not both")
        out = merge_features(args.shards, args.output)
        print_result(args, {"merged": str(out), "shards": len(args.shards)})
        return 0
    rows: Dict[int, Dict] = {}
    shards_seen: Dict[int, set] = {}
    run, run_path = None, None  # the first stamp, and its file
    files = [_ShardFile(path) for path in args.shards]
    for file in files:
        if file.sidecar.get("corpus_level"):
            raise InputError(f"{file.path}: {file.sidecar.get('metric')} is corpus-level (its corpus value is not the "
                             "mean of its per-sample values, and it cannot be sharded): its output is complete as "
                             "written, with the corpus value in the summary of `capeval score`")
    for file in files:
        for stamp in file.stamps:
            if run is None:
                run, run_path = stamp, file.path
            elif stamp != run:
                raise InputError(_different_runs(run_path, run, file.path, stamp))
        for row in file.rows:
            if row["index"] in rows:
                raise InputError(f"record {row['index']} appears in more than one shard ({file.path})")
            rows[row["index"]] = row
        for tag in file.tags:
            i, n = parse_shard(tag)
            shards_seen.setdefault(n, set()).add(i)
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
    for file in files:
        file.check_sidecar()
    hashcodes = sorted({str(file.sidecar["hashcode"]) for file in files})
    if len(hashcodes) > 1:
        raise InputError(f"the shards were scored with different weights or options (hashcodes {hashcodes}); "
                         "score them again with the same ones")
    print_result(args, _write_merged(args.output, rows, files[0].sidecar, [file.path for file in files]))
    return 0


def _write_merged(output, rows: Dict[int, Dict], sidecar: Dict, shards) -> Dict:
    """Write the merged rows in input order (under a temporary name, renamed once complete) and their sidecar; the
    summary."""
    summary = RunningSummary()
    partial = Path(f"{output}.partial")
    with open(partial, "w", encoding="utf-8") as out:
        for index in sorted(rows):
            out.write(json.dumps(rows[index]) + "\n")
            summary.add_scores({k: [v] for k, v in rows[index]["scores"].items()})
    write_sidecar(output, rows=len(rows), hashcode=sidecar["hashcode"], provenance=sidecar["provenance"],
                  **({"metric": sidecar["metric"]} if "metric" in sidecar else {}),
                  merged_from=[Path(path).name for path in shards])
    os.replace(partial, output)
    return {"n": len(rows), **summary.result(), **identity(sidecar["hashcode"], sidecar["provenance"])}
