"""``capeval score``: score records {image, caption, references?} from a file, a datasets folder or a hub dataset;
``--output``: one row per record with its ``scores`` and, for a metric that reports them
(:attr:`capeval.core.scoring.Scorer.detail_keys`), its ``details`` (per key, the sample's record)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from capeval.cli.arguments import add_json, add_scoring_options, print_result, record_fields, scorer_options
from capeval.cli.fingerprint import RecordFingerprint
from capeval.cli.options import output_file, positive_int
from capeval.cli.sidecar import identity, write_sidecar
from capeval.core.errors import InputError
from capeval.core.record_columns import RecordColumns
from capeval.core.record_sources import DEFAULT_CHUNK_ROWS, iter_records, parse_shard

# the "shard_of" stamp of every `capeval score --shard` output (in each row and in the sidecar): the input's
# fingerprint and number of records, the metric, the scorer's hashcode and how records map to what is scored
SHARD_RUN_KEYS = ("input", "records", "metric", "hashcode", "fields")


def configure(score) -> None:
    from capeval.core.scoring import scorers

    score.add_argument("metric", help=f"one of {sorted(scorers())} (any case, '-' for '_'; cider is CIDEr-D)")
    score.add_argument("--input", help="records with 'caption', 'image', optional 'references': a JSONL, CSV or "
                                       "parquet file, a datasets save_to_disk folder, a folder of data files or a "
                                       "hub dataset id (streamed)")
    score.add_argument("--split", help="split of a datasets folder / hub dataset (default: its only split)")
    score.add_argument("--config", help="config (subset) name of a hub dataset")
    score.add_argument("--from-features", help='vcrscore: JSONL of {"features": [f1, f2, f3]} rows')
    score.add_argument("--model", help="vcrscore --from-features: converted or retrained regressor (dir or hub id)")
    score.add_argument("--output", type=output_file, help="JSONL file for per-sample scores, with each sample's "
                                                          "detail record where the metric reports one (capture: its "
                                                          "matched, missed and invented objects, attributes and "
                                                          "relations) and its provenance sidecar "
                                                          "<output>.provenance.json")
    score.add_argument("--shard", help="i/n: score only records with index %% n == i (then `capeval merge`)")
    score.add_argument("--chunk-size", type=positive_int,
                       help="stream the input in chunks of this many records (bounded memory)")
    add_scoring_options(score)
    add_json(score, "the summary (means, n, hashcode, provenance)")


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
            defined = [float(v) for v in values if v is not None and v == v]  # None: a skipped empty caption
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


def _score_features(args) -> int:
    """``capeval score vcrscore --from-features FILE [--model DIR]``: precomputed feature rows → scores, each row
    with the regressor's hashcode, the output with its provenance sidecar."""
    from capeval.core.hub import recording_resolutions
    from capeval.core.provenance import build_provenance, hashcode
    from capeval.core.scoring import canonical_metric
    from capeval.vcrscore.regressor import score_feature_file

    if canonical_metric(args.metric) != "vcrscore":
        raise InputError("--from-features is supported for vcrscore only")
    with recording_resolutions() as loaded:
        scores = score_feature_file(args.from_features, args.model)
    provenance = build_provenance("vcrscore", {"from_features": True, "model": args.model or "vcrscore-gbr"},
                                  loaded, None)
    code = hashcode(provenance)
    if args.output:
        partial = Path(f"{args.output}.partial")
        with open(partial, "w", encoding="utf-8") as out:
            for row, score in zip(scores.rows, scores):
                out.write(json.dumps({**row, "scores": {"vcrscore": score}, "hashcode": code}) + "\n")
        write_sidecar(args.output, rows=len(scores), hashcode=code, provenance=provenance, metric="vcrscore")
        os.replace(partial, args.output)
    print_result(args, {"metric": "vcrscore", "n": len(scores), "vcrscore": sum(scores) / len(scores),
                        **identity(code, provenance)})
    return 0


def scored_fields(args, scorer) -> Dict[str, Optional[str]]:
    """How records become what ``scorer`` scores: the caption and references fields, the empty-caption policy, the
    image field or ``--image-format``, and the resolved ``--images`` folder (roles the scorer does not use are left
    out)."""
    mapped = record_fields(args)
    fields = {"caption field": mapped["caption"], "empty captions": str(args.empty_caption)}
    if scorer.references != "unused":
        fields["references field"] = mapped["references"]
    if scorer.images != "unused":
        fields["image field"] = f"format {args.image_format}" if args.image_format else mapped["image"]
        fields["images folder"] = str(Path(args.images).resolve()) if args.images else None
    return fields


def scored_digests(inputs) -> List[str]:
    """Per record, 16 hex of a sha256 over what was scored: the caption, the references as validated and the
    decoded image's content key (:func:`capeval.core.caches.image_keys`: mode, size and pixels)."""
    from capeval.core.caches import image_keys

    n = len(inputs)
    images = image_keys(inputs.images) if inputs.images is not None else [None] * n
    references = inputs.references if inputs.references is not None else [None] * n
    return [hashlib.sha256(json.dumps({"caption": caption, "image": image, "references": refs}, sort_keys=True,
                                      ensure_ascii=False).encode("utf-8")).hexdigest()[:16]
            for caption, image, refs in zip(inputs.predictions, images, references)]


def row_details(scorer, result: Dict, n: int) -> Dict[str, List[Optional[Dict]]]:
    """Per score key the scorer reports records for (its ``detail_keys``), one record per sample of ``result``
    (``None`` where there is none: a skipped empty caption)."""
    return {key: result.get(records, [None] * n) for key, records in scorer.detail_keys.items()}


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


def run(args) -> int:
    from capeval.core.empty_captions import empty_caption_policy
    from capeval.core.scoring import get_scorer_spec, load_scorer

    if args.from_features:
        return _score_features(args)
    spec = get_scorer_spec(args.metric)
    options = scorer_options(args, spec, args.metric)
    args.metric = spec.name  # capeval's spelling, in the output and the shard stamps
    if not args.input:
        raise InputError("--input is required (or --from-features for vcrscore)")
    shard, num_shards = parse_shard(args.shard)
    chunk_size = args.chunk_size
    corpus_level = spec.is_corpus_level(options)
    empty_caption_policy(args.empty_caption, metric=args.metric, corpus_level=corpus_level)  # before any model loads
    if corpus_level and (num_shards > 1 or chunk_size):
        hint = (" (or fix CIDEr's IDF: --cider-idf <folder of `capeval train cider-idf`>)"
                if "cider_idf" in spec.options else "")
        raise InputError(f"{args.metric} is corpus-level (its per-sample values depend on the whole corpus): "
                         f"score the whole input in one process, without --shard or --chunk-size{hint}")
    scorer = load_scorer(args.metric, **options)
    columns = RecordColumns(scorer, fields=record_fields(args), images_dir=args.images, image_format=args.image_format)
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
            captions, images, references = columns(batch)
            inputs = scorer.validate(captions, images, references, indices=[r["index"] for r in batch],
                                     empty_caption=args.empty_caption)
            result = scorer.score_inputs(inputs)
            per_sample = {k[: -len("_per_sample")]: v for k, v in result.items() if k.endswith("_per_sample")}
            summary.add_scores(per_sample)
            for key, value in result.items():
                if key in per_sample:
                    corpus_values[key] = value  # the scorer's own corpus value for this chunk
                elif not key.endswith("_per_sample") and isinstance(value, (int, float)):
                    summary.add_counter(key, value)
            if out:
                digests = scored_digests(inputs)
                details = row_details(scorer, result, len(batch))
                for i, record in enumerate(batch):
                    row = {**record, "scores": {k: v[i] for k, v in per_sample.items()}, "hashcode": result["hashcode"],
                           "scored_digest": digests[i]}
                    if details:
                        row["details"] = {key: records[i] for key, records in details.items()}
                    if num_shards > 1:
                        row["shard"] = f"{shard}/{num_shards}"
                    if isinstance(row.get("image"), dict):  # embedded image bytes: keep the path only
                        row["image"] = row["image"].get("path")
                    out.write(json.dumps(row, default=_json_value) + "\n")
                out.flush()
            n += len(batch)
        stamp = None
        if num_shards > 1:  # the input is read to its end: its fingerprint is complete
            stamp = {"input": fingerprint.hexdigest(), "records": fingerprint.records, "metric": args.metric,
                     "hashcode": scorer.hashcode, "fields": scored_fields(args, scorer)}
        if out:
            out.close()
            if stamp and n:
                _stamp_rows(partial, stamp)
    except BaseException:
        if out:
            out.close()
            partial.unlink(missing_ok=True)
        raise
    if n == 0 and not fingerprint.records:  # an empty input; a shard without records of a longer one is written
        if partial:
            partial.unlink(missing_ok=True)
        raise InputError(f"{args.input} holds no records")
    if partial:  # the sidecar just before the output: a new output never appears without its own
        shard_tag = {"shard": f"{shard}/{num_shards}", "shard_of": stamp} if stamp else {}
        write_sidecar(args.output, rows=n, hashcode=scorer.hashcode, provenance=scorer.provenance,
                      metric=args.metric, corpus_level=corpus_level, **shard_tag)
        os.replace(partial, args.output)
    means = summary.result()
    if corpus_level:
        means.update(corpus_values)  # e.g. BLEU's corpus value is not the mean of its per-sample values
    print_result(args, {"metric": args.metric, "n": n, **({"shard": args.shard} if num_shards > 1 else {}), **means,
                        **identity(scorer.hashcode, scorer.provenance)})
    return 0
