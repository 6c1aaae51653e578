"""``capeval benchmark ensembeval-text``: an EnsembEval refit restricted to text-only components, fit on one
benchmark with the official procedure (:func:`capeval.ensembeval.fit.fit_weights`) and evaluated zero-shot on
others with each benchmark's literature statistic (×100), beside every single component.

Component scores come from the runner's cached :func:`~capeval.benchmarks.runner.metric_scores`; the four
noun/verb overlaps come from one cached spaCy pass per benchmark. MPNetScore joins only when its weights resolve.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from capeval.benchmarks.catalog import load
from capeval.benchmarks.loaders import CORRELATION_LOADERS, Benchmark
from capeval.benchmarks.runner import metric_scores, scorer_and_key
from capeval.core.errors import InputError, ModelNotAvailableError
from capeval.functional.correlation import STATISTICS, bootstrap_interval
from capeval.core.hub import default_cache_dir
from capeval.core.disk_cache import write_atomically

OVERLAP_COMPONENTS = ("exact_noun_overlap", "fuzzy_noun_overlap", "exact_verb_overlap", "fuzzy_verb_overlap")
RUNNER_METRICS = {  # component (EnsembEval output key) -> the runner's metric name
    "bleu_1": "bleu1", "bleu_2": "bleu2", "bleu_3": "bleu3", "bleu_4": "bleu4",
    "meteor": "meteor", "rouge_l": "rouge_l", "cider": "cider", "mpnet_score": "mpnet_score",
}
TEXT_COMPONENTS = ("bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor", "rouge_l", "cider", *OVERLAP_COMPONENTS,
                   "mpnet_score")


def _overlap_cache_path(benchmark: Benchmark, cache_dir: Path) -> Path:
    digest = hashlib.sha256(json.dumps([benchmark.candidates, benchmark.references]).encode()).hexdigest()[:16]
    return cache_dir / "benchmarks" / f"{benchmark.name}-noun_verb_overlap-{digest}.json"


def overlap_scores(benchmark: Benchmark, *, cache_dir=None) -> Dict[str, List[float]]:
    """The four noun/verb overlaps per judgment row, from one spaCy pass over the distinct rows, cached."""
    from capeval.core.scoring import load_scorer

    path = _overlap_cache_path(benchmark, default_cache_dir(cache_dir))
    if path.exists():
        return json.loads(path.read_text())
    if not all(benchmark.references):
        raise InputError(f"{benchmark.name} has no reference captions for some rows; the overlaps need them")
    keys = [(c, tuple(r)) for c, r in zip(benchmark.candidates, benchmark.references)]
    unique = list(dict.fromkeys(keys))
    result = load_scorer("noun_verb_overlap").score([u[0] for u in unique], references=[list(u[1]) for u in unique])
    row_of = {k: i for i, k in enumerate(unique)}
    scores = {name: [result[f"{name}_per_sample"][row_of[k]] for k in keys] for name in OVERLAP_COMPONENTS}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda tmp: tmp.write_text(json.dumps(scores)))  # a concurrent reader sees all or none
    return scores


def component_scores(benchmark: Benchmark, components: Sequence[str], *, cache_dir=None,
                     device: str = "auto", batch_size: int = 64, loaded: Optional[Dict] = None
                     ) -> Tuple[Dict[str, List[float]], Dict[str, str]]:
    """Per-row scores of each component, and ``{component: reason}`` for those whose model is not available.
    ``loaded``: a dict that keeps the scorers (and so their provenance) for further calls."""
    unknown = [c for c in components if c not in TEXT_COMPONENTS]
    if unknown:
        raise InputError(f"not text-only components: {unknown}; choose from {list(TEXT_COMPONENTS)}")
    scores: Dict[str, List[float]] = {}
    skipped: Dict[str, str] = {}
    if any(c in OVERLAP_COMPONENTS for c in components):
        overlaps = overlap_scores(benchmark, cache_dir=cache_dir)
        scores.update({c: overlaps[c] for c in components if c in OVERLAP_COMPONENTS})
    for component in components:
        if component in OVERLAP_COMPONENTS:
            continue
        try:
            scores[component] = metric_scores(RUNNER_METRICS[component], benchmark, cache_dir=cache_dir,
                                              device=device, batch_size=batch_size, loaded=loaded)
        except ModelNotAvailableError as exc:
            skipped[component] = f"weights not available: {str(exc).splitlines()[0]}"
    return {c: scores[c] for c in components if c in scores}, skipped


def _tiny_components(components: Sequence[str], loaded: Dict) -> List[str]:
    """The components whose scorer (kept in ``loaded``) loaded tiny random test weights."""
    tiny = []
    for component in components:
        scorer = loaded.get(scorer_and_key(RUNNER_METRICS[component])[0]) if component in RUNNER_METRICS else None
        if scorer is not None and (scorer.provenance or {}).get("tiny_random_weights"):
            tiny.append(component)
    return tiny


def _correlation_benchmark(name: str, data_dir) -> Benchmark:
    if name not in CORRELATION_LOADERS:
        raise InputError(f"{name!r} is not a correlation benchmark; use one of {sorted(CORRELATION_LOADERS)}")
    benchmark = load(name, data_dir)
    if not all(benchmark.references):
        raise InputError(f"{name} has no reference captions for some rows: text-only components cannot score it")
    return benchmark


def _value(statistic: str, scores, human) -> float:
    return 100 * STATISTICS[statistic](scores, human)


def _intervals(benchmark: Benchmark, ensemble: np.ndarray, best: Sequence[float], resamples: int, seed: int) -> Dict:
    """Percentile-bootstrap 95% intervals of the ensemble's value and of its paired margin over ``best``."""
    statistic = STATISTICS[benchmark.statistic]
    low, high = bootstrap_interval(statistic, ensemble, benchmark.human, resamples=resamples, seed=seed)
    pair = np.column_stack([ensemble, np.asarray(best, dtype=float)])  # resampled together, row by row
    margin = bootstrap_interval(lambda m, h: statistic(m[:, 0], h) - statistic(m[:, 1], h), pair, benchmark.human,
                                resamples=resamples, seed=seed)
    return {"ensemble_ci95": [100 * low, 100 * high], "margin_over_best_ci95": [100 * margin[0], 100 * margin[1]]}


def ensemble_text_transfer(fit_on: str, evaluate_on: Sequence[str], *, data_dir=None,
                           components: Sequence[str] = TEXT_COMPONENTS, cache_dir=None, resamples: int = 0,
                           seed: int = 0, device: str = "auto", batch_size: int = 64) -> Dict:
    """Refit a text-only ensemble on ``fit_on``; report it and every component on ``fit_on`` (in-sample) and on
    each benchmark of ``evaluate_on`` (zero-shot), with the benchmark's literature statistic ×100.

    ``resamples`` > 0 adds seeded percentile-bootstrap 95% intervals for the ensemble's value and for its margin
    over the benchmark's best single component (``best_component``; a component whose statistic is undefined is
    never the best), resampling the same rows for both. ``tiny_random_weights`` lists the components scored with
    tiny random test weights.
    """
    import pandas as pd

    from capeval.ensembeval.fit import fit_weights

    names = list(dict.fromkeys([fit_on, *evaluate_on]))
    benchmarks = {name: _correlation_benchmark(name, data_dir) for name in names}
    scored, skipped, loaded = {}, {}, {}
    for name, benchmark in benchmarks.items():
        scored[name], missing = component_scores(benchmark, components, cache_dir=cache_dir, device=device,
                                                 batch_size=batch_size, loaded=loaded)
        skipped.update(missing)
    used = [c for c in components if c not in skipped]
    tiny = _tiny_components(used, loaded)
    table = pd.DataFrame({**{c: scored[fit_on][c] for c in used}, "human_score": benchmarks[fit_on].human})
    fit = fit_weights(table, used, "human_score")
    weights = np.array(list(fit.weights.values()))
    report = {}
    for name, benchmark in benchmarks.items():
        x = np.column_stack([np.asarray(scored[name][c], dtype=float) for c in fit.weights])
        ensemble = np.nan_to_num(x) @ weights  # Σ w·x, no intercept; missing values as 0, as in the fit
        entry = {"statistic": benchmark.statistic, "n": len(benchmark.human),
                 "role": "fit (in-sample)" if name == fit_on else "zero-shot",
                 "ensemble": _value(benchmark.statistic, ensemble, benchmark.human),
                 "components": {c: _value(benchmark.statistic, scored[name][c], benchmark.human) for c in used}}
        defined = {c: v for c, v in entry["components"].items() if not np.isnan(v)}  # undefined: never ranked
        entry["best_component"] = max(defined, key=defined.get) if defined else None
        if resamples and defined:
            entry.update(_intervals(benchmark, ensemble, scored[name][entry["best_component"]], resamples, seed))
        report[name] = entry
    return {"fit_on": fit_on, "n_fit": fit.rows, "candidates": used, "skipped": skipped, "tiny_random_weights": tiny,
            "selected": list(fit.weights), "weights": fit.weights, "dropped_intercept": fit.intercept,
            "cv_r2": fit.cv_r2, "train_r2_without_intercept": fit.train_r2, "benchmarks": report}


def configure_ensembeval_text(parser: argparse.ArgumentParser) -> None:
    """Options of ``capeval benchmark ensembeval-text <dataset>`` (added to the benchmark parser)."""
    parser.add_argument("--fit-on", default="flickr8k_expert", choices=sorted(CORRELATION_LOADERS),
                        help="ensembeval-text: benchmark the text-only ensemble is refit on (default flickr8k_expert)")
    parser.add_argument("--components", nargs="+", default=list(TEXT_COMPONENTS), choices=TEXT_COMPONENTS,
                        help="ensembeval-text: candidate components (default: every text-only one)")


def run_ensembeval_text(args: argparse.Namespace) -> Dict:
    return ensemble_text_transfer(args.fit_on, [args.dataset], data_dir=args.data_dir, components=args.components,
                                  resamples=args.resamples, device=args.device, batch_size=args.batch_size)
