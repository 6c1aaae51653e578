"""Speed of the vectorised paired resampling: 10,000 paired bootstrap resamples (and permutations) of a
47,830-row benchmark (Flickr8k-CF's size and shape: 1,000 images of ~48 rows, 12 human levels), τ-b and Pearson.

With ``--data-dir`` the real Flickr8k-CF rows and two cached metrics (``capeval benchmark bleu1 flickr8k_cf`` …)
are used; otherwise synthetic scores of the same shape.

    python benchmarks/bootstrap_speed.py [--data-dir ../shared/data/benchmarks] [--resamples 10000]
"""

import argparse
import json
import time

import numpy as np

from capeval.meta_eval.significance import paired_bootstrap, paired_permutation


def rows(data_dir, metrics):
    if data_dir is None:
        rng = np.random.default_rng(0)
        images = np.repeat(np.arange(1000), 48)[:47_830]
        human = rng.integers(0, 12, len(images)) / 11
        a, b = human + rng.normal(0, 1, len(images)), human + rng.normal(0, 1.1, len(images))
        return a, b, human, images, "synthetic"
    from capeval.benchmarks import load
    from capeval.benchmarks.runner import metric_scores

    benchmark = load("flickr8k_cf", data_dir)
    a, b = (np.asarray(metric_scores(m, benchmark), float) for m in metrics)
    return a, b, np.asarray(benchmark.human), benchmark.images, f"flickr8k_cf {metrics[0]} vs {metrics[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir")
    parser.add_argument("--metrics", nargs=2, default=["cider", "meteor"])
    parser.add_argument("--resamples", type=int, default=10_000)
    args = parser.parse_args()
    a, b, human, images, source = rows(args.data_dir, args.metrics)
    report = {"rows": len(human), "units": len(set(images)), "resamples": args.resamples, "data": source}
    for statistic in ("kendall_tau_b", "pearson"):
        for name, fn in (("paired_bootstrap", paired_bootstrap), ("paired_permutation", paired_permutation)):
            start = time.perf_counter()
            out = fn(a, b, human, statistic=statistic, units=images, resamples=args.resamples, seed=0)
            report[f"{name} {statistic} (image units) s"] = round(time.perf_counter() - start, 2)
            report[f"{name} {statistic} p"] = out["p_value"]
    start = time.perf_counter()
    paired_bootstrap(a, b, human, statistic="pearson", resamples=args.resamples, seed=0)
    report["paired_bootstrap pearson (row units) s"] = round(time.perf_counter() - start, 2)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
