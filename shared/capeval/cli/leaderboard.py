"""``capeval leaderboard``: metrics × benchmarks with the literature's statistic, CI, significance clusters and the
published values (markdown on stdout, or the board as JSON with ``--json``; markdown, CSV, JSON and a plot in
``--output``)."""

from __future__ import annotations

import argparse

from capeval.cli.arguments import add_json, add_weights, chosen_weights, print_result
from capeval.cli.options import positive_int


def configure(parser: argparse.ArgumentParser) -> None:
    from capeval.meta_eval.leaderboard import BENCHMARKS, TEXT_METRICS, UNITS
    from capeval.meta_eval.metric_clusters import TESTS
    from capeval.statistics.corrections import CORRECTIONS

    parser.add_argument("--metrics", nargs="+", default=list(TEXT_METRICS),
                        help="bleu1..bleu4, meteor, rouge_l, cider, the noun/verb overlaps, or any registered scorer")
    parser.add_argument("--benchmarks", nargs="+", default=list(BENCHMARKS), metavar="BENCHMARK",
                        help=f"benchmarks to rank on (default: all: {', '.join(BENCHMARKS)})")
    parser.add_argument("--data-dir", help="folder holding the raw releases or converted folders (default "
                                           "$CAPEVAL_BENCHMARK_DIR; without one: the hub datasets capeval/<name>)")
    parser.add_argument("--output", default="leaderboard", metavar="DIR",
                        help="folder for leaderboard.{md,csv,json,png} (default: leaderboard)")
    parser.add_argument("--unit", choices=UNITS, default="image",
                        help="rows resampled/swapped together: an image's rows (default), a caption's rater rows "
                             "(a pair on pairwise benchmarks), or single rows")
    parser.add_argument("--test", choices=TESTS, default="bootstrap",
                        help="paired test behind the clusters: the paired bootstrap (default, one pass for all pairs) "
                             "or the PERM-BOTH permutation test (WMT; one pass per pair, slower on large benchmarks)")
    parser.add_argument("--resamples", type=positive_int, default=1000,
                        help="bootstrap resamples and permutations (default: 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resamples (default: 0)")
    parser.add_argument("--alpha", type=float, default=0.05,
                        help="significance level of the cluster tests (default: 0.05)")
    parser.add_argument("--correction", choices=CORRECTIONS, default="holm",
                        help="multiple-comparison control over each benchmark's metric pairs")
    parser.add_argument("--ties", choices=["wrong", "half"], default="wrong", help="pairwise benchmarks: metric ties")
    parser.add_argument("--nan-policy", choices=["raise", "omit"], default="raise",
                        help="missing (NaN/null) human judgments or metric scores: an error naming the rows "
                             "(default), or drop those rows from every metric of the benchmark (the count is "
                             "reported)")
    add_weights(parser, several_per_flag=True)
    parser.add_argument("--replay", nargs="*", default=[], metavar="METRIC=CACHE",
                        help="a judge metric's recorded outputs instead of its model (e.g. fleur=fleur.jsonl from "
                             "`capeval judges import-fleur`), added to --metrics and marked replayed; rows not in the "
                             "cache are an error, or dropped with --nan-policy omit; benchmarks the cache holds "
                             "nothing of are skipped")
    parser.add_argument("--images", help="benchmark images (image metrics only)")
    parser.add_argument("--device", default="auto",
                        help="auto (a GPU when there is one), cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--batch-size", type=int, default=64, help="inputs per model batch (default: 64)")
    add_json(parser, "the board")


def _pairs(option: str, items) -> dict:
    from capeval.core.errors import InputError

    pairs = {}
    for item in items:
        metric, sep, path = item.partition("=")
        if not sep or not metric or not path:
            raise InputError(f"{option}: expected METRIC=PATH, got {item!r}")
        pairs[metric] = path
    return pairs


def run(args: argparse.Namespace) -> int:
    from capeval.meta_eval.leaderboard import Scores, leaderboard, to_markdown, write

    replays = _pairs("--replay", args.replay)
    metrics = [*args.metrics, *(metric for metric in replays if metric not in args.metrics)]
    weights = chosen_weights(args.weights, metrics)
    scores = Scores(weights=weights, images_dir=args.images, device=args.device, batch_size=args.batch_size,
                    replays=replays, replay_unmatched="nan" if args.nan_policy == "omit" else "raise")
    board = leaderboard(metrics, args.benchmarks, data_dir=args.data_dir, unit=args.unit, test=args.test,
                        resamples=args.resamples, seed=args.seed, alpha=args.alpha, correction=args.correction,
                        ties=args.ties, scores=scores, nan_policy=args.nan_policy)
    files = write(board, args.output)
    print_result(args, {**board, "written": files}, to_markdown(board))
    print("written: " + ", ".join(files.values()))  # on stderr with --json
    return 0
