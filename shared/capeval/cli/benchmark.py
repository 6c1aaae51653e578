"""``capeval benchmark``: correlate a metric with human judgments on a benchmark (not ``capeval throughput``, which
times CLIP-S). ``--output DIR``: the result as ``result.json`` and the plot as ``plot.png`` (unless ``--plot`` names
another file)."""

from __future__ import annotations

import json
import os

from capeval.cli.arguments import add_json, print_result
from capeval.cli.evaluate import output_folder

RESULT_FILE, PLOT_FILE = "result.json", "plot.png"


def configure(parser) -> None:
    from capeval.benchmarks.command import configure as configure_benchmark

    configure_benchmark(parser)
    parser.add_argument("--output", type=output_folder, metavar="DIR",
                        help=f"write {RESULT_FILE} (the result, as --json prints it) and {PLOT_FILE} (the plot, "
                             f"unless --plot names another file) here")
    add_json(parser)


def run(args) -> int:
    from capeval.benchmarks.command import run as run_benchmark
    from capeval.benchmarks.runner import ENSEMBLE_TEXT

    if args.output is not None:
        os.makedirs(args.output, exist_ok=True)
        if args.plot is None and args.metric != ENSEMBLE_TEXT:  # the transfer experiment draws no plot
            args.plot = os.path.join(args.output, PLOT_FILE)
    result = run_benchmark(args)
    if args.output is not None:
        from capeval.report.write import json_ready

        with open(os.path.join(args.output, RESULT_FILE), "w", encoding="utf-8") as handle:
            json.dump(json_ready(result, "result"), handle, ensure_ascii=False, indent=2, allow_nan=False)
            handle.write("\n")
    print_result(args, result)
    return 0
