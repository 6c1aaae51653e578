"""``capeval compare report.json``: a saved report's CIs, p-values, significance marks and clusters recomputed from
the per-image statistics it keeps, without scoring again (:func:`capeval.suite.run.compare_report`). The options
default to the report's own: with them every number is the report's, bit for bit. stdout: the Markdown table, or the
recomputed report as one JSON document (``--json``); ``--output DIR``: report.json, scores.csv, summary.csv, table.tex
and report.html, written as a set. A report that keeps no statistics is one line (exit 2)."""

from __future__ import annotations

import json

from capeval.cli.arguments import add_json, print_result
from capeval.cli.evaluate import output_folder
from capeval.cli.options import positive_int
from capeval.core.errors import InputError


def configure(parser) -> None:
    parser.add_argument("report", metavar="report.json", help="a report.json written by capeval evaluate")
    parser.add_argument("--resamples", type=positive_int,
                        help="bootstrap / randomization resamples (default: the report's)")
    parser.add_argument("--seed", type=int, help="seed of the resamples (default: the report's)")
    parser.add_argument("--p-values", choices=("noreen", "sacrebleu"),
                        help="how the tests count resamples that tie the observed difference (default: the report's)")
    parser.add_argument("--baseline", metavar="NAME",
                        help="the system the table's significance marks compare with (default: the report's)")
    parser.add_argument("--images", help="the image root, for report.html's thumbnails with --output")
    parser.add_argument("--output", type=output_folder, metavar="DIR",
                        help="write report.json, scores.csv, summary.csv, table.tex and report.html here, as a set")
    add_json(parser, "the recomputed report, not the table")


def run(args) -> int:
    from capeval.suite.run import compare_report

    if args.output is not None:
        from capeval.report.write import check_writable

        check_writable(args.output)
    report = compare_report(read_report(args.report), resamples=args.resamples, seed=args.seed,
                            p_values=args.p_values, baseline=args.baseline, source=args.report)
    if args.output is not None:
        from capeval.report.write import write_report

        write_report(report, args.output, images_root=args.images)
    if args.json:
        print_result(args, report)
    else:
        from capeval.report import markdown_table

        print(markdown_table(report))
    return 0


def read_report(path: str):
    """``path``'s JSON document; an :class:`InputError` naming the file when it holds no JSON object."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a JSON document ({exc})") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if not isinstance(document, dict):
        raise InputError(f"{path}: not a report (a JSON {type(document).__name__}, expected an object)")
    return document
