"""Type-I error calibration of capeval's paired tests: two metrics with the same true correlation with people, many
seeds; the share of seeds where a test rejects at alpha should be ≈ alpha (binomial 95% band printed).

Two synthetic designs (Kendall τ-c, 4 human levels like expert ratings; Pearson for Williams):
- ``independent``: every row independent;
- ``clustered``: rows of an image share an image effect in each metric (as captions of one image share its
  references), so rows are not independent: resampling images is calibrated, resampling rows is not.

    python benchmarks/significance_calibration.py --seeds 400 --resamples 200
"""

import argparse
import json

import numpy as np
from scipy import stats

from capeval.meta_eval.significance import paired_bootstrap, paired_permutation, williams


def synthetic(seed: int, design: str, n_images: int = 60, rows_per_image: int = 5):
    rng = np.random.default_rng(10_000 + seed)
    n = n_images * rows_per_image
    images = np.repeat(np.arange(n_images), rows_per_image)
    latent = rng.normal(size=n)
    human = np.digitize(latent, [-0.7, 0.0, 0.7]).astype(float)  # 4 levels
    shared = design == "clustered"
    metric = []
    for _ in range(2):  # same distribution: equal true correlation
        image_effect = rng.normal(0, 0.8, n_images)[images] if shared else 0.0
        metric.append(latent + image_effect + rng.normal(0, 1.0, n))
    return metric[0], metric[1], human, images


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args()
    low, high = stats.binom.ppf([0.025, 0.975], args.seeds, args.alpha) / args.seeds
    report = {"seeds": args.seeds, "resamples": args.resamples, "alpha": args.alpha,
              "binomial_95_band": [float(low), float(high)], "rejection_rate": {}}
    for design in ("independent", "clustered"):
        rejections = {}
        for seed in range(args.seeds):
            a, b, human, images = synthetic(seed, design)
            for unit, units in (("image", images), ("row", None)):
                options = dict(statistic="kendall_tau_c", units=units, resamples=args.resamples, seed=seed)
                for test, fn in (("permutation", paired_permutation), ("bootstrap", paired_bootstrap)):
                    key = f"{test} over {unit}s (tau-c)"
                    rejections[key] = rejections.get(key, 0) + (fn(a, b, human, **options)["p_value"] <= args.alpha)
            rejections["williams (pearson, rows)"] = rejections.get("williams (pearson, rows)", 0) + (
                williams(a, b, human)["p_value"] <= args.alpha)
        report["rejection_rate"][design] = {k: v / args.seeds for k, v in rejections.items()}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
