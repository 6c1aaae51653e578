"""The ``capeval`` command line: score, merge, benchmark, convert, push, publish-spaces, train, bench, install-modules."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from capeval.core.errors import ConversionError, InputError, ModelNotAvailableError
from capeval.core.records import DEFAULT_CHUNK_ROWS, RecordFingerprint, iter_records, parse_shard

SHARD_RUN_KEYS = ("input", "records", "metric", "options")  # the "shard_of" stamp of every `capeval score --shard` row


def _columns(records: List[Dict], images_dir: Optional[Path], scorer):
    """A chunk of records → (captions, images, references) for the scorer's input policy (``scorer.images`` /
    ``scorer.references``: EnsembEval's depends on its weights); a field the metric uses must be in every record
    (errors name the record number), a field it does not use is left out."""
    def column(field: str, need: str):
        if need == "unused":
            return None
        having = [r for r in records if field in r and r[field] is not None]
        if not having and need == "optional":
            return None
        if len(having) < len(records):
            missing = next(r["index"] for r in records if field not in r or r[field] is None)
            raise InputError(f"record {missing}: no '{field}' field" + (f" ({scorer.name} needs {field})"
                                                                      if need == "required" else
                                                                      " (give it in every record or in none)"))
        return [r[field] for r in records]

    captions = column("caption", "required")
    images = column("image", scorer.images)
    if images is not None and images_dir is not None:
        images = [str(images_dir / image) if isinstance(image, str) else image for image in images]
    return captions, images, column("references", scorer.references)


def _batches(records: Iterator[Dict], size: Optional[int]) -> Iterator[List[Dict]]:
    batch: List[Dict] = []
    for record in records:
        batch.append(record)
        if size and len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


class RunningSummary:
    """Means of per-sample scores over streamed chunks, NaN (undefined, e.g. HICE-S's local term of a caption
    without phrases) left out, and sums of counters such as ``truncated_texts``."""

    def __init__(self):
        self.sums: Dict[str, float] = {}
        self.counts: Dict[str, int] = {}
        self.totals: Dict[str, float] = {}

    def add_scores(self, scores: Dict[str, List[float]]) -> None:
        for key, values in scores.items():
            defined = [float(v) for v in values if v == v]
            self.sums[key] = self.sums.get(key, 0.0) + sum(defined)
            self.counts[key] = self.counts.get(key, 0) + len(defined)

    def add_counter(self, key: str, value: float) -> None:
        self.totals[key] = self.totals.get(key, 0) + value

    def result(self) -> Dict[str, float]:
        means = {k: self.sums[k] / self.counts[k] if self.counts[k] else float("nan") for k in self.sums}
        return {**means, **self.totals}


def _json_value(value):
    """Values of dataset records that JSON does not know: numpy scalars/arrays, dates."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    raise InputError(f"cannot write a {type(value).__name__} field to the JSONL output; drop that column first")


def cmd_score_features(args) -> int:
    """``capeval score vcrscore --from-features FILE [--model DIR]``: precomputed feature rows → scores."""
    from capeval.vcrscore.regressor import score_feature_file

    if args.metric != "vcrscore":
        raise InputError("--from-features is supported for vcrscore only")
    scores = score_feature_file(args.from_features, args.model)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            for row, score in zip(scores.rows, scores):
                out.write(json.dumps({**row, "scores": {"vcrscore": score}}) + "\n")
    print(json.dumps({"metric": "vcrscore", "n": len(scores), "vcrscore": sum(scores) / len(scores)}, indent=2))
    return 0


def _stamp_rows(partial: Path, stamp: Dict) -> None:
    """Add ``"shard_of": stamp`` to every row of the finished ``partial`` output (rewritten under a second temporary
    name, then renamed over it)."""
    stamped = partial.with_name(partial.name + ".stamped")
    try:
        with open(partial, encoding="utf-8") as rows, open(stamped, "w", encoding="utf-8") as out:
            for line in rows:
                out.write(json.dumps({**json.loads(line), "shard_of": stamp}) + "\n")
        os.replace(stamped, partial)
    finally:
        stamped.unlink(missing_ok=True)


def cmd_score(args) -> int:
    from capeval.core.scoring import RUNTIME_OPTIONS, load_scorer, scorers

    if args.from_features:
        return cmd_score_features(args)
    spec = scorers().get(args.metric)
    if spec is None:
        raise InputError(f"unknown metric {args.metric!r}; known: {sorted(scorers())}")
    if not args.input:
        raise InputError("--input is required (or --from-features for vcrscore)")
    shard, num_shards = parse_shard(args.shard)
    chunk_size = args.chunk_size
    options = {"device": args.device, "batch_size": args.batch_size}
    if args.weights:
        options["weights"] = args.weights
    if args.cider_idf:
        if "cider_idf" not in spec.options:
            raise InputError(f"--cider-idf applies to ensembeval, not {args.metric}")
        options["cider_idf"] = args.cider_idf
    corpus_level = spec.is_corpus_level(options)
    if corpus_level and (num_shards > 1 or chunk_size):
        hint = (" (or fix CIDEr's IDF: --cider-idf <folder of `capeval train cider-idf`>)"
                if "cider_idf" in spec.options else "")
        raise InputError(f"{args.metric} is corpus-level (its per-sample values depend on the whole corpus): "
                         f"score the whole input in one process, without --shard or --chunk-size{hint}")
    scorer = load_scorer(args.metric, **options)
    images_dir = Path(args.images) if args.images else None
    if chunk_size is not None and chunk_size < 1:
        raise InputError(f"--chunk-size must be a positive number of records, got {chunk_size}")
    source = iter_records(args.input, chunk_size=chunk_size or DEFAULT_CHUNK_ROWS, split=args.split, name=args.config)
    fingerprint = RecordFingerprint()
    if num_shards > 1:  # every shard streams the whole input: each fingerprints all of it, so all shards agree
        source = fingerprint.watch(source)
    records = ({**record, "index": index} for index, record in enumerate(source) if index % num_shards == shard)
    summary, n, corpus_values = RunningSummary(), 0, {}
    # written under a temporary name and renamed once complete: a killed shard leaves no output to merge
    partial = Path(f"{args.output}.partial") if args.output else None
    out = open(partial, "w", encoding="utf-8") if partial else None
    try:
        for batch in _batches(records, chunk_size):
            captions, images, references = _columns(batch, images_dir, scorer)
            inputs = scorer.validate(captions, images, references, indices=[r["index"] for r in batch])
            result = scorer.score_inputs(inputs)
            per_sample = {k[: -len("_per_sample")]: v for k, v in result.items() if k.endswith("_per_sample")}
            summary.add_scores(per_sample)
            for key, value in result.items():
                if key in per_sample:
                    corpus_values[key] = value  # the scorer's own corpus value for this chunk
                elif not key.endswith("_per_sample") and isinstance(value, (int, float)):
                    summary.add_counter(key, value)
            if out:
                for i, record in enumerate(batch):
                    row = {**record, "scores": {k: v[i] for k, v in per_sample.items()}}
                    if num_shards > 1:
                        row["shard"] = f"{shard}/{num_shards}"
                    if isinstance(row.get("image"), dict):  # embedded image bytes: keep the path only
                        row["image"] = row["image"].get("path")
                    out.write(json.dumps(row, default=_json_value) + "\n")
                out.flush()
            n += len(batch)
        if out:
            out.close()
            if num_shards > 1 and n:  # the input is read to its end: its fingerprint is complete
                _stamp_rows(partial, {"input": fingerprint.hexdigest(), "records": fingerprint.records,
                                      "metric": args.metric,
                                      "options": {k: v for k, v in options.items() if k not in RUNTIME_OPTIONS}})
    except BaseException:
        if out:
            out.close()
            partial.unlink(missing_ok=True)
        raise
    if n == 0:
        if partial:
            partial.unlink(missing_ok=True)
        raise InputError(f"{args.input} holds no records" + (f" for shard {args.shard}" if num_shards > 1 else ""))
    if partial:
        os.replace(partial, args.output)
    means = summary.result()
    if corpus_level:
        means.update(corpus_values)  # e.g. BLEU's corpus value is not the mean of its per-sample values
    print(json.dumps({"metric": args.metric, "n": n, **({"shard": args.shard} if num_shards > 1 else {}), **means},
                     indent=2))
    return 0


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


def cmd_merge(args) -> int:
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
    summary = RunningSummary()
    with open(args.output, "w", encoding="utf-8") as out:
        for index in sorted(rows):
            out.write(json.dumps(rows[index]) + "\n")
            summary.add_scores({k: [v] for k, v in rows[index]["scores"].items()})
    print(json.dumps({"n": len(rows), **summary.result()}, indent=2))
    return 0


def cmd_convert(args) -> int:
    from capeval.core.convert import convert

    out = convert(args.artifact, args.official_file, args.out_dir)
    print(f"wrote {out}")
    return 0


def cmd_push(args) -> int:
    from huggingface_hub import HfApi

    folder = Path(args.out_dir)
    if not folder.is_dir():
        raise InputError(f"not a directory: {folder}")
    api = HfApi(library_name="capeval")
    api.create_repo(args.repo_id, repo_type=args.repo_type, private=args.private, exist_ok=True)
    info = api.upload_folder(folder_path=str(folder), repo_id=args.repo_id, repo_type=args.repo_type,
                             commit_message=args.message)
    print(f"pushed {folder} to {args.repo_id}; pin revision {info.oid}")
    return 0


def cmd_train(args) -> int:
    from capeval.core.training import trainers

    out = trainers()[args.name](args)
    print(f"wrote {out}")
    return 0


def cmd_bench(args) -> int:
    from capeval.bench import run_clip_bench

    print(json.dumps(run_clip_bench(arch=args.arch, n_images=args.images, n_captions=args.captions,
                                    device=args.device, batch_size=args.batch_size, dtype=args.dtype,
                                    naive_samples=args.naive_samples), indent=2))
    return 0


def cmd_benchmark(args) -> int:
    from capeval.benchmarks.command import run

    print(json.dumps(run(args), indent=2))
    return 0


def cmd_publish_spaces(args) -> int:
    """Push every module folder (card, script, app.py, requirements.txt) as a Gradio Space ``<org>/<name>``."""
    from huggingface_hub import HfApi

    from capeval.modules import available_modules

    modules = available_modules()
    names = args.modules or sorted(modules)
    unknown = [n for n in names if n not in modules]
    if unknown:
        raise InputError(f"unknown modules {unknown}; known: {sorted(modules)}")
    without_app = [n for n in names if not (modules[n] / "app.py").exists()]
    if without_app:
        raise InputError(f"modules without app.py cannot be Spaces: {without_app}")
    api = None if args.dry_run else HfApi(library_name="capeval")
    for name in names:
        repo_id = f"{args.org}/{name}"
        if api is None:
            print(f"would push {modules[name]} -> spaces/{repo_id}")
            continue
        api.create_repo(repo_id, repo_type="space", space_sdk="gradio", exist_ok=True)
        info = api.upload_folder(folder_path=str(modules[name]), repo_id=repo_id, repo_type="space",
                                 commit_message=f"capeval: publish {name}")
        print(f"pushed spaces/{repo_id} at {info.oid}")
    return 0


def cmd_install_modules(args) -> int:
    from capeval.modules import install_modules

    for name, path in install_modules(args.modules_cache).items():
        print(f"capeval/{name} -> {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from capeval.core.convert import converters
    from capeval.core.scoring import scorers
    from capeval.core.training import trainers

    parser = argparse.ArgumentParser(prog="capeval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    score = sub.add_parser("score", help="score captions from a file, a datasets folder or a hub dataset",
                           description="Score records {image, caption, references?} and write per-sample scores.")
    score.add_argument("metric", help=f"one of {sorted(scorers())}")
    score.add_argument("--input", help="records with 'caption', 'image', optional 'references': a JSONL, CSV or "
                                       "parquet file, a datasets save_to_disk folder, a folder of data files or a "
                                       "hub dataset id (streamed)")
    score.add_argument("--split", help="split of a datasets folder / hub dataset (default: its only split)")
    score.add_argument("--config", help="config (subset) name of a hub dataset")
    score.add_argument("--from-features", help='vcrscore: JSONL of {"features": [f1, f2, f3]} rows')
    score.add_argument("--model", help="vcrscore --from-features: converted or retrained regressor (dir or hub id)")
    score.add_argument("--images", help="directory the 'image' paths are relative to")
    score.add_argument("--output", help="JSONL file for per-sample scores")
    score.add_argument("--weights", help="registry name, hub id or directory of the weights")
    score.add_argument("--cider-idf", help="ensembeval: CIDEr with document frequencies fixed by this folder/file "
                                           "(`capeval train cider-idf`); makes every score per-sample, so "
                                           "--shard/--chunk-size are allowed")
    score.add_argument("--device", default="auto")
    score.add_argument("--batch-size", type=int, default=64)
    score.add_argument("--shard", help="i/n: score only records with index %% n == i (then `capeval merge`)")
    score.add_argument("--chunk-size", type=int,
                       help="stream the input in chunks of this many records (bounded memory)")
    score.set_defaults(func=cmd_score)

    merge = sub.add_parser("merge", help="join `capeval score --shard` outputs (or `capeval train polos-features "
                                         "--shard` folders) in input order")
    merge.add_argument("shards", nargs="+", help="per-shard JSONL outputs, or Polos feature folders")
    merge.add_argument("--output", required=True)
    merge.set_defaults(func=cmd_merge)

    conv = sub.add_parser("convert", help="convert an official checkpoint to capeval's safetensors/JSON layout")
    conv.add_argument("artifact", choices=sorted(converters()),
                      help="; ".join(f"{k}: {v.help}" for k, v in sorted(converters().items())))
    conv.add_argument("official_file")
    conv.add_argument("out_dir")
    conv.set_defaults(func=cmd_convert)

    push = sub.add_parser("push", help="upload a converted/trained artifact folder to the Hugging Face Hub")
    push.add_argument("out_dir")
    push.add_argument("repo_id")
    push.add_argument("--repo-type", default="model", choices=["model", "dataset", "space"])
    push.add_argument("--private", action="store_true")
    push.add_argument("--message", default="Upload with capeval")
    push.set_defaults(func=cmd_push)

    train = sub.add_parser("train", help="train a learned metric")
    train_sub = train.add_subparsers(dest="name", required=True)
    for name, spec in sorted(trainers().items()):
        p = train_sub.add_parser(name, help=spec.help, description=spec.help)
        spec.add_arguments(p)
        p.set_defaults(func=cmd_train)

    bench = sub.add_parser("bench", help="throughput of CLIP-S on a full-size random CLIP vs a naive per-sample loop")
    bench.add_argument("--arch", default="ViT-B-32", help="open_clip architecture (random weights)")
    bench.add_argument("--images", type=int, default=20, help="distinct images")
    bench.add_argument("--captions", type=int, default=200, help="(image, caption) pairs")
    bench.add_argument("--naive-samples", type=int, default=50, help="pairs timed in the naive loop")
    bench.add_argument("--device", default="auto")
    bench.add_argument("--batch-size", type=int, default=64)
    bench.add_argument("--dtype", default="float32")
    bench.set_defaults(func=cmd_bench)
    from capeval.benchmarks.command import configure as configure_benchmark

    benchmark = sub.add_parser("benchmark", help="correlate a metric with human judgments on a benchmark")
    configure_benchmark(benchmark)
    benchmark.set_defaults(func=cmd_benchmark)

    publish = sub.add_parser("publish-spaces", help="push every module folder as a Hugging Face Space")
    publish.add_argument("--org", default="capeval")
    publish.add_argument("--modules", nargs="*", help="only these modules (default: all)")
    publish.add_argument("--dry-run", action="store_true", help="list what would be pushed")
    publish.set_defaults(func=cmd_publish_spaces)

    install = sub.add_parser("install-modules",
                             help='make evaluate.load("capeval/<name>") resolve offline from this installation')
    install.add_argument("--modules-cache", help="evaluate's modules cache (default $HF_MODULES_CACHE)")
    install.set_defaults(func=cmd_install_modules)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (InputError, ModelNotAvailableError, ConversionError, FileNotFoundError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"capeval {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
