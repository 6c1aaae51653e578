"""``capeval evaluate``: systems' captions on an annotated image set, a metric suite in one pass, the systems compared
(:func:`capeval.suite.run.evaluate_captions`'s steps, the plan resolved here once). stdout: the Markdown table, or
the report as one JSON document (``--json``); ``--output DIR``: report.json, scores.csv, summary.csv, table.tex and
report.html, written as a set (all or none). Progress and warnings go to stderr; every input problem, an output folder that cannot take a file
included, is one line (exit 2) before any model loads; a failure after scoring is one line naming the saved
``scores.json`` (exit 1)."""

from __future__ import annotations

import argparse
import os
import sys

from capeval.cli.arguments import (add_empty_caption, add_json, add_record_fields, add_runtime_options,
                                   chosen_options, given_fields, print_result)
from capeval.cli.options import positive_int


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
    parser.add_argument("--resamples", type=positive_int, default=10000,
                        help="bootstrap / randomization resamples, the same for every metric (default: 10000, "
                             "sacrebleu's --paired-ar default: with R resamples no Holm-adjusted p-value of a family "
                             "of m metric x pair tests goes below m/(R+1); at least 40 for a 95%% interval; on at "
                             "most 16 images the randomization test is exact and needs no draws)")
    parser.add_argument("--p-values", choices=("noreen", "sacrebleu"), default="noreen",
                        help="how the tests count resamples that tie the observed difference: noreen (default: "
                             "counted, valid at any number of images) or sacrebleu (sacrebleu 2's strict count, for "
                             "comparing with published MT numbers; anti-conservative on few images)")
    parser.add_argument("--seed", type=int, default=12345, help="seed of the resamples (default: 12345)")
    parser.add_argument("--output", type=output_folder, metavar="DIR",
                        help="write report.json, scores.csv, summary.csv, table.tex and report.html here, as a set "
                             "(all or none; an earlier set is replaced whole); checked writable before any model "
                             "loads")
    add_empty_caption(parser, suite=True)
    add_json(parser, "the report, not the table")
    add_record_fields(parser, images=False)  # --records only
    add_runtime_options(parser, batch_size=None)  # a shorthand sets its option on the metrics it names


def output_folder(text: str) -> str:
    """argparse type of ``--output``: a folder to write into (made if missing), not a file."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a file: give a folder to write the report into")
    parent = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"cannot make {text}: folder {parent} does not exist")
    return text


def run(args) -> int:
    from capeval.suite.plan import select_metrics
    from capeval.suite.run import prepare_evaluation, run_evaluation

    fields = given_fields(args)
    selection = select_metrics(args.metrics)
    plan = selection.plan(chosen_options(args, selection.names, selection.specs), device=args.device,
                          dtype=args.dtype, batch_size=args.batch_size)
    prepared = prepare_evaluation(plan, args.results or (), annotations=args.annotations or args.karpathy,
                                  split=args.split, records=args.records or (), images=args.images, names=args.names,
                                  baseline=args.baseline, require_all=args.require_all, resamples=args.resamples,
                                  seed=args.seed, p_values=args.p_values, output=args.output, fields=fields or None,
                                  image_format=args.image_format, config=args.config,
                                  empty_caption=args.empty_caption)
    report = run_evaluation(prepared, command=args.command_line)
    print(report["coverage"]["text"], file=sys.stderr)
    if args.json:
        print_result(args, report)
    else:
        from capeval.report import markdown_table

        print(markdown_table(report, baseline=args.baseline))
    return 0
