"""The DetailCaps meta-evaluation (Dong et al. 2024): a metric's consistency with the judgments of the captions of
several LVLMs, as three statistics reported together:

- ``pcc``: Pearson's r between metric and judgment over all rows (every image × LVLM caption);
- ``kendall_tau``: Kendall's τ over all rows (caption level, pooled: not a system-level τ);
- ``sample_tau``: Kendall's τ among the captions of each image, averaged over the images where it is defined (an
  image whose judgments or metric scores are all tied, or with fewer than 2 judged captions, has none: it is left
  out of the mean and counted in ``sample_tau_undefined``).

The authors publish no code for this evaluation: the τ variant is τ-b (scipy's default) unless
``statistic="kendall_tau_c"``; both handle ties. Values are fractions, as the paper reports them (not ×100). The
paper's fourth statistic, 1−R², is not computed: its definition is not published. The authors' published values
(``PUBLISHED``) are the mean over DetailCaps-100 and DetailCaps-4870 and are unverified here.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from capeval.benchmarks.catalog import load
from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.plots import scatter_plot
from capeval.benchmarks.runner import judged_scores, metric_scores, scorer_and_key
from capeval.core.errors import InputError
from capeval.core.scoring import canonical_metric
from capeval.functional.correlation import (
    NAN_POLICIES, kendall_tau, pearson, quiet, resampled_interval, undefined_reason, warn_undefined,
)

TAU_VARIANTS = {"kendall_tau_b": "b", "kendall_tau_c": "c"}
STATISTICS = ("pcc", "kendall_tau", "sample_tau")
PUBLISHED_SOURCE = ("foundation-multimodal-models/CAPTURE README @ 52eeb2781e8b4b1854c07a57b573c75edfd45688, "
                    "'average consistency scores on DetailCaps-100 and DetailCaps-4870'")
# metric -> (PCC, 1-R^2, Kendall tau, sample tau); BLEU (order not stated: 0.2608, 54.75, 0.1866, 0.2462) is left out
PUBLISHED: Dict[str, tuple] = {
    "rouge_l": (0.2951, 134.12, 0.2149, 0.3383), "cider": (0.1148, 2.6e7, 0.1165, 0.0991),
    "meteor": (0.4022, 290.38, 0.2927, 0.4062), "spice": (0.4386, 155.95, 0.3244, 0.4718),
    "clip_s": (0.3558, 21.46, 0.2479, 0.3841), "capture": (0.5091, 8.29, 0.3861, 0.6018),
}


def image_groups(benchmark: Benchmark, rows: np.ndarray) -> List[np.ndarray]:
    """Positions (within ``rows``) of each image's rows, images in order of first appearance; an image with two rows
    of one category (the same LVLM twice) is an ``InputError`` naming it."""
    positions: Dict[str, List[int]] = {}
    for position, row in enumerate(rows):
        positions.setdefault(benchmark.images[row], []).append(position)
    if benchmark.categories is not None:
        for image, members in positions.items():
            seen = [benchmark.categories[rows[p]] for p in members]
            if len(set(seen)) != len(seen):
                raise InputError(f"{benchmark.name}: image {image!r} has two rows of one category "
                                 f"({seen}, rows {[int(rows[p]) for p in members]}); sample tau ranks each image's "
                                 f"captions of different LVLMs")
    return [np.asarray(p) for p in positions.values()]


def per_image_tau(metric: np.ndarray, human: np.ndarray, groups: Sequence[np.ndarray], variant: str) -> np.ndarray:
    """Kendall's τ among each image's captions; NaN where undefined (fewer than 2 captions, all tied)."""
    return np.array([quiet(kendall_tau, metric[g], human[g], variant) for g in groups])


def consistency(metric: np.ndarray, human: np.ndarray, image_taus: np.ndarray, variant: str) -> Dict[str, float]:
    """PCC and τ over the rows, and the mean of the defined per-image τ (NaN with a warning where none is)."""
    defined = image_taus[~np.isnan(image_taus)]
    if not len(defined):
        warn_undefined("sample tau", "no image has a defined Kendall tau among its captions")
    return {"pcc": pearson(metric, human), "kendall_tau": kendall_tau(metric, human, variant),
            "sample_tau": float(defined.mean()) if len(defined) else float("nan")}


def image_bootstrap(metric: np.ndarray, human: np.ndarray, groups: Sequence[np.ndarray], image_taus: np.ndarray,
                    variant: str, *, resamples: int, seed: int) -> Dict[str, List[float]]:
    """Percentile 95% intervals of the three statistics over images resampled with replacement (seeded): an
    image's rows stay together."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        drawn = rng.integers(0, len(groups), len(groups))
        rows = np.concatenate([groups[k] for k in drawn])
        taus = image_taus[drawn]
        taus = taus[~np.isnan(taus)]
        values.append([quiet(pearson, metric[rows], human[rows]),
                       quiet(kendall_tau, metric[rows], human[rows], variant),
                       float(taus.mean()) if len(taus) else float("nan")])
    low, high = resampled_interval(np.array(values), 0.95, "a DetailCaps statistic")
    return {name: [float(lo), float(hi)] for name, lo, hi in zip(STATISTICS, low, high)}


def published(metric: str) -> Optional[Dict]:
    values = PUBLISHED.get(canonical_metric(metric))
    if values is None:
        return None
    return {"pcc": values[0], "one_minus_r2": values[1], "kendall_tau": values[2], "sample_tau": values[3],
            "source": PUBLISHED_SOURCE, "unverified": True,
            "scope": "the mean over DetailCaps-100 (unreleased) and DetailCaps-4870, not DetailCaps-4870's own "
                     "value"}


def run_detailcaps(metric: str, benchmark: Benchmark, *, statistic: Optional[str] = None, resamples: int = 1000,
                   seed: int = 0, plot: Optional[str] = None, nan_policy: str = "raise",
                   loaded: Optional[Dict] = None, **scoring) -> Dict:
    """The three statistics of ``metric`` on ``benchmark`` (per-row scores from the runner's cache)."""
    statistic = statistic or "kendall_tau_b"
    if statistic not in TAU_VARIANTS:
        raise InputError(f"{benchmark.name} reports PCC, Kendall tau and sample tau together; --statistic picks the "
                         f"tau variant: one of {sorted(TAU_VARIANTS)}, not {statistic!r}")
    if nan_policy not in NAN_POLICIES:
        raise InputError(f"nan_policy: {nan_policy!r} is not one of {NAN_POLICIES}")
    variant = TAU_VARIANTS[statistic]
    loaded = {} if loaded is None else loaded
    scores, human, rows = judged_scores(metric, metric_scores(metric, benchmark, loaded=loaded, **scoring),
                                        benchmark, nan_policy)
    scorer = loaded[scorer_and_key(metric)[0]]
    groups = image_groups(benchmark, rows)
    image_taus = per_image_tau(scores, human, groups, variant)
    values = consistency(scores, human, image_taus, variant)
    out = {"metric": metric, "dataset": benchmark.name, "statistic": benchmark.statistic, "tau_variant": variant,
           "scale": "fraction, as the paper reports", "values": values, "n": len(scores),
           "omitted": len(benchmark.human) - len(scores), "images": len(groups),
           "sample_tau_images": int((~np.isnan(image_taus)).sum()),
           "sample_tau_undefined": int(np.isnan(image_taus).sum()), "protocol": benchmark.protocol,
           "hashcode": scorer.hashcode, "provenance": scorer.provenance}
    reason = undefined_reason(scores, human)
    if reason is not None:
        out["undefined"] = reason
    if resamples:
        out["ci95"] = image_bootstrap(scores, human, groups, image_taus, variant, resamples=resamples, seed=seed)
    reference = published(metric)
    if reference is not None:
        out["published"] = reference
    if plot:
        scatter_plot(plot, scores, human, metric=metric,
                     title=f"{metric} on {benchmark.name}: PCC {values['pcc']:.3f}, tau-{variant} "
                           f"{values['kendall_tau']:.3f}, sample tau {values['sample_tau']:.3f}")
        out["plot"] = str(plot)
    return out


def run_detailcaps_benchmark(metric: str, dataset: str, *, data_dir=None, revision: Optional[str] = None,
                             images_dir=None, cache_dir=None, device: str = "auto", batch_size: int = 64,
                             **protocol) -> Dict:
    """``capeval benchmark <metric> <dataset>`` for a DetailCaps benchmark (loaded by name)."""
    benchmark = load(dataset, data_dir, revision=revision)
    return run_detailcaps(metric, benchmark, images_dir=images_dir, cache_dir=cache_dir, device=device,
                          batch_size=batch_size, **protocol)
