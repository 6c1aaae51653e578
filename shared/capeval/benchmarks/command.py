"""``capeval benchmark``: its arguments and its dispatch (a metric on a benchmark, or the text-only EnsembEval
transfer experiment)."""

from __future__ import annotations

import argparse
from typing import Dict

from capeval.benchmarks.catalog import BENCHMARKS
from capeval.benchmarks.detailcaps import DETAILCAPS_LOADERS
from capeval.benchmarks.detailcaps_protocol import run_detailcaps_benchmark
from capeval.benchmarks.ensemble_transfer import configure_ensembeval_text, run_ensembeval_text
from capeval.benchmarks.replay import LABELS, OUTPUTS, UNMATCHED, run_replayed
from capeval.benchmarks.runner import ENSEMBLE_TEXT, run_benchmark
from capeval.core.errors import InputError
from capeval.functional.correlation import STATISTICS


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("metric", help="bleu1..bleu4, rouge_l, meteor, cider, any registered scorer name, or "
                                       f"{ENSEMBLE_TEXT} (a text-only EnsembEval refit on --fit-on, evaluated here)")
    parser.add_argument("dataset", choices=sorted(BENCHMARKS), help="the benchmark of human judgments")
    parser.add_argument("--data-dir", help="folder holding the raw releases or converted folders (default "
                                           "$CAPEVAL_BENCHMARK_DIR; without one: the hub dataset capeval/<name>, "
                                           "or the authors' for detailcaps_4870, at its pinned commit)")
    parser.add_argument("--revision", help="hub dataset revision (commit) when no data dir is given")
    parser.add_argument("--images", help="benchmark images (image metrics only)")
    parser.add_argument("--statistic", choices=sorted(STATISTICS), help="default: the one the literature reports "
                                                                       "(DetailCaps: the Kendall tau variant)")
    parser.add_argument("--ties", choices=["wrong", "half"], default="wrong",
                        help="pairwise benchmarks: a metric tie counts as wrong (the literature) or as half")
    parser.add_argument("--sample-references-per", choices=["image", "pair"],
                        help="pairwise benchmarks that sample references (Pascal-50S): one sample per image, shared "
                             "by its pairs (default, the EnsembEval code), or an independent sample per pair")
    parser.add_argument("--plot", metavar="PATH", help="write a PNG: metric vs human scores (correlation "
                                                         "benchmarks) or accuracy per category (pairwise)")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples for the CI (0: none)")
    parser.add_argument("--nan-policy", choices=["raise", "omit"], default="raise",
                        help="missing (NaN/null) human judgments or metric scores: an error naming the rows "
                             "(default), or drop those rows (pairs) and report how many")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--batch-size", type=int, default=64, help="inputs per model batch (default: 64)")
    parser.add_argument("--replay", metavar="CACHE", help="a judge metric's recorded outputs (a judge cache, e.g. "
                                                          "from `capeval judges import-fleur`) instead of its model: "
                                                          "rows joined by image file name and caption")
    parser.add_argument("--replay-unmatched", choices=UNMATCHED, help="rows not in the cache: an error listing them "
                                                                      "(default), or compute on the matched rows only")
    parser.add_argument("--replay-labels", choices=LABELS, help="pairwise benchmarks: the benchmark's own human "
                                                                "labels (default) or those recorded with published "
                                                                "outputs (FLEUR's Pascal-50S files)")
    parser.add_argument("--replay-output", choices=OUTPUTS, help="the recorded judge score (default) or the raw "
                                                                 "generated number")
    configure_ensembeval_text(parser)


def run(args: argparse.Namespace) -> Dict:
    replay_options = {"replay_unmatched": "unmatched", "replay_labels": "labels", "replay_output": "output"}
    chosen = {option: getattr(args, option) for option in replay_options if getattr(args, option) is not None}
    if chosen and not args.replay:
        raise InputError(f"--{next(iter(chosen)).replace('_', '-')} needs --replay CACHE")
    if args.replay and args.metric == ENSEMBLE_TEXT:
        raise InputError(f"--replay replays a judge metric's cache; {ENSEMBLE_TEXT} is refitted, not replayed")
    if args.dataset in DETAILCAPS_LOADERS:
        return detailcaps_command(args)
    if args.metric == ENSEMBLE_TEXT:
        return run_ensembeval_text(args)
    if args.replay:
        return run_replayed(args.metric, args.dataset, args.replay, data_dir=args.data_dir, revision=args.revision,
                            statistic=args.statistic, ties=args.ties, resamples=args.resamples, plot=args.plot,
                            nan_policy=args.nan_policy, **{replay_options[k]: v for k, v in chosen.items()})
    return run_benchmark(args.metric, args.dataset, data_dir=args.data_dir, revision=args.revision,
                         images_dir=args.images, statistic=args.statistic, ties=args.ties,
                         resamples=args.resamples, plot=args.plot, device=args.device, batch_size=args.batch_size,
                         sample_references_per=args.sample_references_per, nan_policy=args.nan_policy)


def detailcaps_command(args: argparse.Namespace) -> Dict:
    """A DetailCaps benchmark: PCC, Kendall tau and sample tau (:mod:`capeval.benchmarks.detailcaps_protocol`);
    the options of other protocols are refused."""
    refused = {"--replay": args.replay, "--sample-references-per": args.sample_references_per}
    given = [flag for flag, value in refused.items() if value is not None]
    if given or args.metric == ENSEMBLE_TEXT:
        raise InputError(f"{args.dataset} runs the DetailCaps protocol on a metric's scores; "
                         f"{given[0] if given else ENSEMBLE_TEXT} does not apply to it")
    return run_detailcaps_benchmark(args.metric, args.dataset, data_dir=args.data_dir, revision=args.revision,
                                    images_dir=args.images, statistic=args.statistic, resamples=args.resamples,
                                    plot=args.plot, device=args.device, batch_size=args.batch_size,
                                    nan_policy=args.nan_policy)
