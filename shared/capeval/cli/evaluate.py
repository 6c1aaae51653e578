"""``capeval evaluate``: systems' captions on an annotated image set, a metric suite in one pass, the systems compared
(:func:`capeval.suite.run.evaluate_captions`). stdout: the Markdown table, or the report as one JSON document
(``--json``); ``--output DIR``: report.json, scores.csv, table.tex and report.html. Progress and warnings go to
stderr; every input problem is one line (exit 2) before any model loads."""

from __future__ import annotations

import argparse
import json
import os
import sys

from capeval.cli.options import device, dtype, non_negative_int, positive_int
from capeval.core.errors import InputError


def configure(parser) -> None:
    truth = parser.add_mutually_exclusive_group(required=True)
    truth.add_argument("--annotations", metavar="A.json",
                       help="COCO caption annotations (captions_val2014.json: images[].id/file_name, "
                            "annotations[].image_id/caption), or a Karpathy split file with --split")
    truth.add_argument("--karpathy", metavar="dataset_coco.json",
                       help="a Karpathy split file (dataset_coco.json, dataset_flickr30k.json) with --split")
    truth.add_argument("--records", nargs="+", metavar="SOURCE",
                       help="one record source per system, references inline: anything `capeval score --input` "
                            "reads (JSONL, CSV, parquet, datasets folder, hub id)")
    parser.add_argument("--results", nargs="+", metavar="R.json",
                        help='one COCO results file per system: [{"image_id": ..., "caption": "..."}]')
    parser.add_argument("--split", help="the Karpathy split (train, val, test, restval), or the split of a "
                                        "--records datasets folder / hub dataset")
    parser.add_argument("--config", help="--records: config (subset) name of a hub dataset")
    parser.add_argument("--images", help="the image root: the folder of COCO file_name paths, or the folder "
                                         "holding Karpathy's filepath folders (val2014/)")
    parser.add_argument("--metrics", nargs="+", default=["coco"], metavar="METRIC",
                        help="'coco' (BLEU-1..4, METEOR, ROUGE-L, CIDEr-D, SPICE where its jars exist) and any "
                             "registered metric (clip_s, pac_s, polos, ...); default: coco")
    parser.add_argument("--names", nargs="+", metavar="NAME", help="one name per system (default: file stems)")
    parser.add_argument("--baseline", metavar="NAME", help="the system the table's significance marks compare with")
    parser.add_argument("--require-all", action="store_true",
                        help="refuse results that do not caption every annotated image (of the split)")
    parser.add_argument("--resamples", type=non_negative_int, default=10000,
                        help="bootstrap / randomization resamples, the same for every metric (default: 10000, "
                             "sacrebleu's --paired-ar default: with R resamples no Holm-adjusted p-value of a family "
                             "of m metric x pair tests goes below m/(R+1))")
    parser.add_argument("--seed", type=int, default=12345, help="seed of the resamples (default: 12345)")
    parser.add_argument("--output", type=output_folder, metavar="DIR",
                        help="write report.json, scores.csv, table.tex and report.html here")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON document, not the table")
    parser.add_argument("--caption-field", help="--records: the records' caption field (default: caption)")
    parser.add_argument("--image-field", help="--records: the records' image field (default: image)")
    parser.add_argument("--references-field", help="--records: the records' references field (default: references)")
    parser.add_argument("--image-format", help="--records: build each image path from the record's fields, e.g. "
                                               "'COCO_val2014_{image_id:012d}.jpg'")
    parser.add_argument("--device", type=device, default="auto")
    parser.add_argument("--dtype", type=dtype, help="model dtype (float32, float16, bfloat16; default: each scorer's)")
    parser.add_argument("--precision", choices=["official"],
                        help="every metric of the suite that has it (clip_s, pac_s, polos, ...): the official "
                             "pipeline's numerics, to reproduce a paper's numbers; default fp32")
    parser.add_argument("--batch-size", type=positive_int)
    parser.add_argument("--preprocess-workers", type=non_negative_int, default=0,
                        help="every metric of the suite that has it: the official CLIP image preprocessing in N "
                             "worker processes")


def output_folder(text: str) -> str:
    """argparse type of ``--output``: a folder to write into (made if missing), not a file."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a file: give a folder to write the report into")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"cannot make {text}: folder {parent} does not exist")
    return text


def run(args) -> int:
    from capeval.suite.run import evaluate_captions

    fields = {role: value for role, value in (("caption", args.caption_field), ("image", args.image_field),
                                              ("references", args.references_field)) if value}
    report = evaluate_captions(args.results or (), annotations=args.annotations or args.karpathy, split=args.split,
                               records=args.records or (), images=args.images, metrics=args.metrics, names=args.names,
                               baseline=args.baseline, require_all=args.require_all, resamples=args.resamples,
                               seed=args.seed, output=args.output, options=_metric_options(args),
                               device=args.device, dtype=args.dtype, batch_size=args.batch_size,
                               fields=fields or None, image_format=args.image_format, config=args.config)
    print(report["coverage"]["text"], file=sys.stderr)
    if args.json:
        from capeval.report.write import json_ready

        print(json.dumps(json_ready(report), ensure_ascii=False, allow_nan=False))
    else:
        from capeval.report import markdown_table

        print(markdown_table(report, baseline=args.baseline))
    return 0


def _metric_options(args) -> dict:
    """``--precision`` and ``--preprocess-workers`` for every metric of the suite that has the option (refused when
    none has it)."""
    from capeval.core.scoring import get_scorer_spec
    from capeval.suite.metrics import expand_metrics

    wanted = {"precision": args.precision, "preprocess_workers": args.preprocess_workers or None}
    options: dict = {}
    names = expand_metrics(args.metrics)
    for option, value in wanted.items():
        if value is None:
            continue
        takers = [name for name in names if option in get_scorer_spec(name).options]
        if not takers:
            raise InputError(f"--{option.replace('_', '-')} applies to none of the metrics {names}")
        for name in takers:
            options.setdefault(name, {})[option] = value
    return options
