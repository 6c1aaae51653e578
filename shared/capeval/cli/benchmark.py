"""``capeval benchmark``: correlate a metric with human judgments on a benchmark."""

from __future__ import annotations

import json


def configure(parser) -> None:
    from capeval.benchmarks.command import configure as configure_benchmark

    configure_benchmark(parser)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")


def run(args) -> int:
    from capeval.benchmarks.command import run as run_benchmark
    from capeval.meta_eval.leaderboard import json_safe

    print(json.dumps(json_safe(run_benchmark(args)), indent=None if args.json else 2, allow_nan=False))
    return 0
