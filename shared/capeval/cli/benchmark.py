"""``capeval benchmark``: correlate a metric with human judgments on a benchmark (not ``capeval throughput``, which
times CLIP-S)."""

from __future__ import annotations

from capeval.cli.arguments import add_json, print_result


def configure(parser) -> None:
    from capeval.benchmarks.command import configure as configure_benchmark

    configure_benchmark(parser)
    add_json(parser)


def run(args) -> int:
    from capeval.benchmarks.command import run as run_benchmark

    result = run_benchmark(args)
    print_result(args, result)
    return 0
