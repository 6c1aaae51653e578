"""``capeval benchmark <metric> <dataset>``: score a benchmark with its literature protocol, correlate with people.

Per-sample scores are cached (``<capeval cache>/benchmarks``), so re-running with another statistic is instant.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from capeval.benchmarks.loaders import BENCHMARKS, Benchmark, load
from capeval.errors import InputError
from capeval.functional.correlation import STATISTICS, bootstrap_interval
from capeval.hub import default_cache_dir

ALIASES = {f"bleu{n}": ("bleu", f"bleu_{n}") for n in range(1, 5)}


def scorer_and_key(metric: str) -> Tuple[str, str]:
    """``bleu1`` → (``bleu``, ``bleu_1``); any other registered scorer name is its own key."""
    return ALIASES.get(metric, (metric, metric))


def _cache_path(metric: str, benchmark: Benchmark, cache_dir: Path) -> Path:
    digest = hashlib.sha256(json.dumps([benchmark.candidates, benchmark.references, benchmark.images]).encode())
    return cache_dir / "benchmarks" / f"{benchmark.name}-{metric}-{digest.hexdigest()[:16]}.json"


def metric_scores(metric: str, benchmark: Benchmark, *, images_dir: Optional[Path] = None, cache_dir=None,
                  device: str = "auto", batch_size: int = 64) -> List[float]:
    """Per-judgment metric scores, from one call over the whole benchmark (CIDEr's IDF spans it), cached."""
    from capeval.scoring import load_scorer, scorers

    name, key = scorer_and_key(metric)
    if name not in scorers():
        raise InputError(f"unknown metric {metric!r}; use bleu1..bleu4 or one of {sorted(scorers())}")
    path = _cache_path(metric, benchmark, default_cache_dir(cache_dir))
    if path.exists():
        return json.loads(path.read_text())
    images = None
    if scorers()[name].needs_images:
        if images_dir is None:
            raise InputError(f"{metric} needs the benchmark images: pass --images DIR")
        images = [str(Path(images_dir) / Path(p).name) for p in benchmark.images]
    # identical (candidate, references, image) rows are scored once (several raters judge the same caption),
    # except for corpus-level metrics, whose statistics (CIDEr's IDF) the literature computes over every row
    keys = [(c, tuple(r), i) for c, r, i in zip(benchmark.candidates, benchmark.references, benchmark.images)]
    unique = keys if scorers()[name].corpus_level else list(dict.fromkeys(keys))
    scorer = load_scorer(name, device=device, batch_size=batch_size)
    result = scorer.score([u[0] for u in unique], images=None if images is None else
                          [str(Path(images_dir) / Path(u[2]).name) for u in unique],
                          references=[list(u[1]) for u in unique])
    values = result[f"{key}_per_sample"]
    scores = values if unique is keys else [dict(zip(unique, values))[k] for k in keys]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(scores))
    return scores


def run_benchmark(metric: str, dataset: str, *, data_dir=None, images_dir=None, statistic: Optional[str] = None,
                  resamples: int = 1000, seed: int = 0, cache_dir=None, device: str = "auto",
                  batch_size: int = 64) -> Dict:
    benchmark = load(dataset, data_dir)
    statistic = statistic or benchmark.statistic
    if statistic not in STATISTICS:
        raise InputError(f"unknown statistic {statistic!r}; use one of {sorted(STATISTICS)}")
    scores = metric_scores(metric, benchmark, images_dir=images_dir, cache_dir=cache_dir, device=device,
                           batch_size=batch_size)
    value = STATISTICS[statistic](scores, benchmark.human)
    out = {"metric": metric, "dataset": dataset, "statistic": statistic, "value": 100 * value,
           "n": len(scores), "protocol": benchmark.protocol}
    if resamples:
        low, high = bootstrap_interval(STATISTICS[statistic], scores, benchmark.human, resamples=resamples, seed=seed)
        out["ci95"] = [100 * low, 100 * high]
    return out


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("metric", help="bleu1..bleu4, rouge_l, meteor, cider, or any registered scorer name")
    parser.add_argument("dataset", choices=sorted(BENCHMARKS))
    parser.add_argument("--data-dir", help="folder holding the raw releases (default $CAPEVAL_BENCHMARK_DIR)")
    parser.add_argument("--images", help="benchmark images (image metrics only)")
    parser.add_argument("--statistic", choices=sorted(STATISTICS), help="default: the one the literature reports")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples for the CI (0: none)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=64)


def run(args: argparse.Namespace) -> Dict:
    return run_benchmark(args.metric, args.dataset, data_dir=args.data_dir, images_dir=args.images,
                         statistic=args.statistic, resamples=args.resamples, device=args.device,
                         batch_size=args.batch_size)
