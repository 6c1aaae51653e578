"""``capeval benchmark <metric> <dataset>``: score a benchmark with its literature protocol and compare with people
(a correlation over judgment rows, or a pairwise accuracy per category over seeded draws).

Per-sample scores are cached (``<capeval cache>/benchmarks``), so re-running with another statistic is instant.

A statistic that is undefined (e.g. constant metric scores) is NaN with its CI (NaN, NaN) and the cause under
``undefined``. A missing (NaN/null) human judgment or metric score is an ``InputError`` naming the benchmark, the
column and the rows, unless ``nan_policy="omit"`` drops those rows (pairs) and reports how many (``omitted``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from capeval.benchmarks.catalog import load
from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.pairwise import PairwiseBenchmark
from capeval.benchmarks.plots import category_bar_plot, scatter_plot
from capeval.core.errors import InputError
from capeval.functional.agreement import krippendorff_alpha, reliability_table
from capeval.functional.correlation import (
    NAN_POLICIES, STATISTICS, bootstrap_interval, describe_rows, finite_rows, pairwise_accuracy, undefined_reason,
)
from capeval.core.hub import default_cache_dir
from capeval.core.scoring import canonical_metric, scorer_of
from capeval.core.disk_cache import write_atomically

ENSEMBLE_TEXT = "ensembeval-text"


def scorer_and_key(metric: str) -> Tuple[str, str]:
    """``bleu1`` → (``bleu``, ``bleu_1``); any other metric → (its scorer, its key), in capeval's spelling."""
    return scorer_of(metric), canonical_metric(metric)


def _cache_path(metric: str, benchmark: Benchmark, cache_dir: Path, scorer_hashcode: str) -> Path:
    """Per-row scores of ``metric`` on ``benchmark``, keyed by the rows and the scorer's hashcode (its weights and
    number-changing options: scores of other weights are never reused)."""
    corpora = benchmark.categories if benchmark.corpus_per_category else None
    digest = hashlib.sha256(json.dumps([benchmark.candidates, benchmark.references, benchmark.images, corpora,
                                        scorer_hashcode]).encode())
    return cache_dir / "benchmarks" / f"{benchmark.name}-{metric}-{digest.hexdigest()[:16]}.json"


def _score_rows(scorer, key: str, rows: List[Tuple], images_dir: Optional[Path]) -> List[float]:
    """One scorer call over (candidate, references, image) rows → the per-sample values of ``key``."""
    images = None if images_dir is None else [str(Path(images_dir) / Path(row[2]).name) for row in rows]
    references = [list(row[1]) for row in rows]
    if scorer.references == "unused" or (scorer.references == "optional" and not all(references)):
        references = None  # a reference-free metric (or its reference-free score) is given none
    result = scorer.score([row[0] for row in rows], images=images, references=references)
    if f"{key}_per_sample" not in result:
        raise InputError(f"{key} needs references for every row; {scorer.name} scored these rows without them")
    return list(result[f"{key}_per_sample"])


def metric_scores(metric: str, benchmark: Benchmark, *, images_dir: Optional[Path] = None, cache_dir=None,
                  device: str = "auto", batch_size: int = 64, loaded: Optional[Dict] = None) -> List[float]:
    """Per-judgment metric scores, cached. Corpus-level metrics (CIDEr's IDF) see the whole benchmark in one call,
    or each category's rows where the benchmark's protocol says so (``corpus_per_category``). ``loaded``: a dict
    that keeps the scorer (its model and embedding cache) for further calls, e.g. over seeded draws."""
    from capeval.core.scoring import load_scorer, scorers

    name, key = scorer_and_key(metric)
    if loaded is not None and getattr(loaded.get(name), "replayed", False):  # a judge cache (benchmarks.replay)
        return loaded[name].rows(benchmark)
    if name not in scorers():
        raise InputError(f"unknown metric {metric!r}; use bleu1..bleu4 or one of {sorted(scorers())}")
    if scorers()[name].needs_references and not all(benchmark.references):
        raise InputError(f"{benchmark.name} has no reference captions for some rows; {metric} needs them "
                         f"(use a reference-free metric)")
    if scorers()[name].needs_images and images_dir is None:
        raise InputError(f"{metric} needs the benchmark images: pass --images DIR")
    images_dir = images_dir if scorers()[name].needs_images else None
    loaded = {} if loaded is None else loaded
    scorer = loaded.get(name) or loaded.setdefault(name, load_scorer(name, device=device, batch_size=batch_size))
    path = _cache_path(key, benchmark, default_cache_dir(cache_dir), scorer.hashcode)
    if path.exists():
        return json.loads(path.read_text())
    keys = [(c, tuple(r), i) for c, r, i in zip(benchmark.candidates, benchmark.references, benchmark.images)]
    if not scorers()[name].is_corpus_level():  # identical rows (several raters of one caption) are scored once
        unique = list(dict.fromkeys(keys))
        values = dict(zip(unique, _score_rows(scorer, key, unique, images_dir)))
        scores = [values[k] for k in keys]
    elif benchmark.corpus_per_category and benchmark.categories:  # one corpus per category, rows kept in order
        scores = [0.0] * len(keys)
        for category in dict.fromkeys(benchmark.categories):
            rows = [j for j, c in enumerate(benchmark.categories) if c == category]
            for j, value in zip(rows, _score_rows(scorer, key, [keys[j] for j in rows], images_dir)):
                scores[j] = value
    else:  # corpus statistics (CIDEr's IDF) over every row, as the literature computes them
        scores = _score_rows(scorer, key, keys, images_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text(json.dumps(scores)))  # a concurrent reader sees all or none
    return scores


def _pairwise_draws(metric: str, benchmark: PairwiseBenchmark, loaded: Dict,
                    **scoring) -> List[Tuple[np.ndarray, ...]]:
    """(people prefer A?, metric score of A, metric score of B) per seeded draw; A and B are scored in one call by
    the scorer kept in ``loaded`` (one for every draw: each distinct text is encoded once)."""
    n = len(benchmark.candidates_a)
    draws = []
    for seed in range(benchmark.draws):
        prefers_a, references = benchmark.draw(seed)
        rows = Benchmark(f"{benchmark.name}-draw{seed}", benchmark.candidates_a + benchmark.candidates_b,
                         references + references, benchmark.images * 2, [], statistic="", protocol="")
        scores = np.asarray(metric_scores(metric, rows, loaded=loaded, **scoring), dtype=float)
        draws.append((prefers_a, scores[:n], scores[n:]))
    return draws


def _scored_pairs(draws, benchmark: PairwiseBenchmark, metric: str, nan_policy: str) -> np.ndarray:
    """The pairs whose two scores are present in every draw; a missing one is an error naming the pairs, unless
    ``nan_policy="omit"`` (then those pairs are left out)."""
    missing = np.zeros(len(benchmark.candidates_a), dtype=bool)
    for seed, (_, a, b) in enumerate(draws):
        absent = np.isnan(a) | np.isnan(b)
        if absent.any() and nan_policy == "raise":
            raise InputError(f"{benchmark.name}: {metric} scores missing (NaN) in draw {seed} at pair "
                             f"{describe_rows(np.flatnonzero(absent), len(absent))}; pass --nan-policy omit to "
                             f"drop those pairs")
        missing |= absent
    if missing.all():
        raise InputError(f"{benchmark.name}: {metric} scored no pair in every draw")
    return np.flatnonzero(~missing)


def _category_accuracies(draws, categories: np.ndarray, rows: np.ndarray, ties: str) -> Dict[str, np.ndarray]:
    """Per category, the accuracy of each draw over the pairs ``rows``."""
    picked = categories[rows]
    return {c: np.array([pairwise_accuracy(a[rows][picked == c], b[rows][picked == c],
                                           prefers_a[rows][picked == c], ties=ties) for prefers_a, a, b in draws])
            for c in sorted(set(picked))}


def run_pairwise(metric: str, benchmark: PairwiseBenchmark, *, ties: str = "wrong", resamples: int = 1000,
                 seed: int = 0, plot: Optional[str] = None, nan_policy: str = "raise", loaded: Optional[Dict] = None,
                 **scoring) -> Dict:
    """Pairwise accuracy per category and the mean over categories, each a mean (± std) over the draws.
    ``loaded``: scorers already built, by scorer name (e.g. a replayed judge cache)."""
    loaded = {} if loaded is None else loaded
    draws = _pairwise_draws(metric, benchmark, loaded, **scoring)
    everything = _scored_pairs(draws, benchmark, metric, nan_policy)
    n = len(everything)
    categories = np.asarray(benchmark.categories or ["all"] * len(benchmark.candidates_a))

    def value(rows: np.ndarray) -> float:
        per_category = _category_accuracies(draws, categories, rows, ties)
        return float(np.mean(np.mean(list(per_category.values()), axis=0)))

    per_category = _category_accuracies(draws, categories, everything, ties)
    overall = np.mean(list(per_category.values()), axis=0)  # per draw, the mean over categories
    out = {"metric": metric, "dataset": benchmark.name, "statistic": benchmark.statistic, "ties": ties,
           "value": 100 * float(overall.mean()), "std": 100 * float(overall.std()), "n": n,
           "omitted": len(benchmark.candidates_a) - n,
           "draws": benchmark.draws, "protocol": benchmark.protocol,
           "references_sampled_per": benchmark.sample_references_per if benchmark.references_per_draw else None,
           "categories": {c: {"mean": 100 * float(v.mean()), "std": 100 * float(v.std()),
                              "per_draw": [100 * float(x) for x in v]} for c, v in per_category.items()},
           **_provenance_of(metric, loaded)}
    if resamples:  # percentile bootstrap over pairs (the same resampled pairs in every draw)
        low, high = bootstrap_interval(lambda rows, _: value(rows.astype(int)), everything.astype(float),
                                       np.zeros(n), resamples=resamples, seed=seed)
        out["ci95"] = [100 * low, 100 * high]
    if plot:
        category_bar_plot(plot, out["categories"], title=f"{metric} on {benchmark.name}: "
                                                         f"{out['value']:.1f} ± {out['std']:.1f}")
        out["plot"] = str(plot)
    return out


def _provenance_of(metric: str, loaded: Dict) -> Dict:
    """The ``hashcode`` and ``provenance`` of the scorer that produced ``metric``'s values."""
    scorer = loaded[scorer_and_key(metric)[0]]
    return {"hashcode": scorer.hashcode, "provenance": scorer.provenance}


def raters_agreement(benchmark: Benchmark, rows: Optional[np.ndarray] = None) -> Dict[str, float]:
    """Krippendorff's α of the benchmark's raters (×100, ordinal and interval), items = (image, candidate), over
    ``rows`` (default: all of them)."""
    rows = np.arange(len(benchmark.human)) if rows is None else rows
    items = [(benchmark.images[k], benchmark.candidates[k]) for k in rows]
    table = reliability_table(items, [benchmark.raters[k] for k in rows], [benchmark.human[k] for k in rows])
    return {level: 100 * krippendorff_alpha(table, level) for level in ("ordinal", "interval")}


def judged_scores(metric: str, scores, benchmark: Benchmark, nan_policy: str):
    """(metric scores, human scores, indices of the rows kept) without missing values (:func:`finite_rows`; the
    error names the benchmark)."""
    try:
        kept, omitted = finite_rows({"human": benchmark.human, metric: scores}, nan_policy)
    except InputError as exc:
        raise InputError(f"{benchmark.name}: {exc}".replace("nan_policy='omit'", "--nan-policy omit")) from exc
    rows = np.setdiff1d(np.arange(len(benchmark.human)), omitted)
    return kept[metric], kept["human"], rows


def run_correlation(metric: str, benchmark: Benchmark, *, statistic: Optional[str] = None, resamples: int = 1000,
                    seed: int = 0, plot: Optional[str] = None, nan_policy: str = "raise",
                    loaded: Optional[Dict] = None, **scoring) -> Dict:
    statistic = statistic or benchmark.statistic
    if statistic not in STATISTICS:
        raise InputError(f"unknown statistic {statistic!r}; use one of {sorted(STATISTICS)}")
    loaded = {} if loaded is None else loaded
    scores, human, rows = judged_scores(metric, metric_scores(metric, benchmark, loaded=loaded, **scoring),
                                        benchmark, nan_policy)
    value = STATISTICS[statistic](scores, human)
    out = {"metric": metric, "dataset": benchmark.name, "statistic": statistic, "value": 100 * value,
           "n": len(scores), "omitted": len(benchmark.human) - len(scores), "protocol": benchmark.protocol,
           **_provenance_of(metric, loaded)}
    reason = undefined_reason(scores, human)
    if reason is not None:
        out["undefined"] = reason
    if resamples:
        low, high = bootstrap_interval(STATISTICS[statistic], scores, human, resamples=resamples, seed=seed)
        out["ci95"] = [100 * low, 100 * high]
    if benchmark.raters is not None:
        out["krippendorff_alpha"] = raters_agreement(benchmark, rows)
    if plot:
        scatter_plot(plot, scores, human, metric=metric,
                     title=f"{metric} on {benchmark.name}: {statistic} {out['value']:.1f}")
        out["plot"] = str(plot)
    return out


def run_benchmark(metric: str, dataset: str, *, data_dir=None, images_dir=None, statistic: Optional[str] = None,
                  ties: str = "wrong", resamples: int = 1000, seed: int = 0, plot: Optional[str] = None,
                  revision: Optional[str] = None, cache_dir=None, device: str = "auto", batch_size: int = 64,
                  sample_references_per: Optional[str] = None, nan_policy: str = "raise") -> Dict:
    """``sample_references_per`` (pairwise benchmarks that sample references): ``"image"`` (the default, the
    EnsembEval code's Pascal-50S protocol) or ``"pair"`` (an independent sample for every pair).
    ``nan_policy``: ``"raise"`` (missing judgments or scores are an error naming the rows) or ``"omit"``."""
    if nan_policy not in NAN_POLICIES:
        raise InputError(f"nan_policy: {nan_policy!r} is not one of {NAN_POLICIES}")
    benchmark = load(dataset, data_dir, revision=revision)
    scoring = dict(images_dir=images_dir, cache_dir=cache_dir, device=device, batch_size=batch_size)
    if sample_references_per is not None and not isinstance(benchmark, PairwiseBenchmark):
        raise InputError(f"{dataset} is not a pairwise benchmark: it samples no references")
    if isinstance(benchmark, PairwiseBenchmark):
        if statistic not in (None, benchmark.statistic):
            raise InputError(f"{dataset} is a pairwise benchmark: its statistic is {benchmark.statistic}")
        if sample_references_per is not None:
            benchmark.sample_references_per = sample_references_per
        return run_pairwise(metric, benchmark, ties=ties, resamples=resamples, seed=seed, plot=plot,
                            nan_policy=nan_policy, **scoring)
    return run_correlation(metric, benchmark, statistic=statistic, resamples=resamples, seed=seed, plot=plot,
                           nan_policy=nan_policy, **scoring)
