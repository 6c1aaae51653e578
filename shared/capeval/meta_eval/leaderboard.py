"""``capeval leaderboard``: every metric × benchmark with the literature's statistic (×100), a bootstrap CI, its
significance-cluster rank (:mod:`capeval.meta_eval.metric_clusters`) and the published value where one exists;
markdown, CSV and a plot.

Per-sample scores come from the benchmark runner's cache (:func:`capeval.benchmarks.runner.metric_scores`, the
noun/verb overlaps from :func:`capeval.benchmarks.ensemble_transfer.overlap_scores`): a metric is scored once per
benchmark (per draw on Pascal-50S) and reused for every statistic, resample and later run (the runner keys the
cache by the rows and the scorer's weights and options).

A metric whose statistic is undefined on a benchmark (e.g. constant scores) is listed as ``undefined`` with the
cause and gets no value, CI or rank. Scores that came from tiny random test weights are flagged
(``tiny_random_weights``) in every output. Missing (NaN) scores or human judgments are refused, naming the
benchmark, the column and the rows, unless ``nan_policy="omit"`` drops their rows (``omitted``: how many).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from capeval.benchmarks.catalog import load
from capeval.benchmarks.ensemble_transfer import OVERLAP_COMPONENTS, overlap_scores
from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.pairwise import PairwiseBenchmark
from capeval.benchmarks.replay import NoRowInCache, ReplayedJudge
from capeval.benchmarks.runner import metric_scores, scorer_and_key
from capeval.core.errors import InputError, ModelNotAvailableError
from capeval.functional.correlation import NAN_POLICIES, describe_rows
from capeval.meta_eval.metric_clusters import accuracy_clusters, correlation_clusters
from capeval.meta_eval.significance import correct_pairs

TEXT_METRICS = ("bleu1", "bleu2", "bleu3", "bleu4", "meteor", "rouge_l", "cider", *OVERLAP_COMPONENTS, "mpnet_score")
BENCHMARKS = ("flickr8k_expert", "flickr8k_cf", "composite", "thumb", "pascal50s")
UNITS = ("image", "item", "row")
_PACS, _T4, _T5 = "PAC-S repository", "EnsembEval Table 4", "EnsembEval Table 5"
PUBLISHED: Dict[str, Dict[str, tuple]] = {  # benchmark -> metric -> (value ×100 in the literature statistic, source)
    "flickr8k_expert": {"bleu1": (32.324, _PACS), "bleu2": (32.5, _T4), "bleu3": (31.5, _T4),
                        "bleu4": (30.776, _PACS), "rouge_l": (32.314, _PACS), "meteor": (41.822, _PACS),
                        "cider": (43.891, _PACS), "mpnet_score": (54.7, _T4)},
    "flickr8k_cf": {"bleu1": (17.946, _PACS), "bleu2": (17.9, _T4), "bleu3": (17.0, _T4), "bleu4": (16.863, _PACS),
                    "rouge_l": (19.903, _PACS), "meteor": (22.269, _PACS), "cider": (24.619, _PACS),
                    "mpnet_score": (35.3, _T4)},
    "composite": {"bleu1": (31.4, _T4), "bleu2": (31.1, _T4), "bleu3": (30.9, _T4), "bleu4": (30.6, _T4),
                  "rouge_l": (32.5, _T4), "meteor": (39.0, _T4), "cider": (37.5, _T4), "mpnet_score": (54.7, _T4)},
    "thumb": {"bleu1": (19.5, _T4), "bleu2": (15.8, _T4), "bleu3": (11.8, _T4), "bleu4": (10.4, _T4),
              "rouge_l": (18.7, _T4), "meteor": (18.5, _T4), "cider": (22.4, _T4), "mpnet_score": (40.4, _T4)},
    "pascal50s": {"bleu1": (77.3, _T5), "bleu4": (73.7, _T5), "rouge_l": (77.6, _T5), "meteor": (80.4, _T5),
                  "cider": (79.8, _T5), "mpnet_score": (86.7, _T5)},
}
PUBLISHED["flickr8k_expert"]["fleur"] = (53.0, "FLEUR paper")
PUBLISHED["composite"]["fleur"] = (63.5, "FLEUR paper")
# the mean of the per-category accuracies FLEUR's results files count (true count / 1000: 61.3, 99.7, 97.6, 74.2)
PUBLISHED["pascal50s"]["fleur"] = (83.2, "FLEUR results files")
COLUMNS = ("benchmark", "statistic", "metric", "value", "ci_low", "ci_high", "rank", "undefined",
           "tiny_random_weights", "replayed", "published", "published_source", "n", "omitted", "units", "test",
           "correction")
TINY_NOTE = "TINY RANDOM TEST WEIGHTS"
REPLAYED_NOTE = "replayed"


def benchmark_units(benchmark, unit: str) -> Optional[List]:
    """Unit label per row: ``image`` (all of an image's rows), ``item`` (a caption's rater rows; a pair on pairwise
    benchmarks) or ``row`` (``None``: every row alone)."""
    if unit not in UNITS:
        raise InputError(f"unit: {unit!r} is not one of {UNITS}")
    if unit == "image":
        return list(benchmark.images)
    if unit == "item" and isinstance(benchmark, Benchmark):
        return list(zip(benchmark.images, benchmark.candidates))
    return None


class Scores:
    """Per-sample scores of metrics on benchmarks, from the runner's cache; scorers are kept for reuse.
    ``replays``: metric → judge cache whose recorded outputs replace the metric's model
    (:class:`capeval.benchmarks.replay.ReplayedJudge`); rows not in the cache are an error, or NaN with
    ``replay_unmatched="nan"`` (then the leaderboard's ``nan_policy="omit"`` drops them)."""

    def __init__(self, *, weights: Optional[Mapping[str, str]] = None, cache_dir=None, images_dir=None,
                 device: str = "auto", batch_size: int = 64, replays: Optional[Mapping[str, str]] = None,
                 replay_unmatched: str = "raise"):
        self.weights, self.cache_dir, self.images_dir = dict(weights or {}), cache_dir, images_dir
        self.device, self.batch_size, self.loaded = device, batch_size, {}
        self.replays, self.replay_unmatched = dict(replays or {}), replay_unmatched

    def rows(self, metric: str, benchmark: Benchmark) -> List[float]:
        if metric in OVERLAP_COMPONENTS:
            return overlap_scores(benchmark, cache_dir=self.cache_dir)[metric]
        name, _ = scorer_and_key(metric)
        if metric in self.replays and name not in self.loaded:
            self.loaded[name] = ReplayedJudge(name, self.replays[metric], unmatched=self.replay_unmatched)
        if metric in self.weights and name not in self.loaded:
            from capeval.core.scoring import load_scorer

            self.loaded[name] = load_scorer(name, weights=self.weights[metric], device=self.device,
                                            batch_size=self.batch_size)
        return metric_scores(metric, benchmark, images_dir=self.images_dir, cache_dir=self.cache_dir,
                             device=self.device, batch_size=self.batch_size, loaded=self.loaded)

    def tiny(self, metric: str) -> bool:
        """Whether ``metric``'s scores came from tiny random test weights (its scorer's provenance says so)."""
        if metric in OVERLAP_COMPONENTS:
            return False  # spaCy pipelines, no capeval weights
        scorer = self.loaded.get(scorer_and_key(metric)[0])
        return bool(scorer is not None and (scorer.provenance or {}).get("tiny_random_weights"))

    def replayed(self, metric: str) -> bool:
        """Whether ``metric``'s scores are a judge cache's recorded outputs (no model was run)."""
        return metric not in OVERLAP_COMPONENTS and bool(getattr(self.loaded.get(scorer_and_key(metric)[0]),
                                                                 "replayed", False))

    def correct(self, metric: str, benchmark: PairwiseBenchmark, *, ties: str = "wrong",
                nan_policy: str = "raise") -> np.ndarray:
        """draws × pairs: whether the metric orders each pair as people did, in each seeded draw (A and B scored in
        one call per draw, as :func:`capeval.benchmarks.runner.run_pairwise`). A pair with a missing score is an
        error, or NaN with ``nan_policy="omit"`` (the caller drops it)."""
        n, out = len(benchmark.candidates_a), []
        for seed in range(benchmark.draws):
            prefers_a, references = benchmark.draw(seed)
            rows = Benchmark(f"{benchmark.name}-draw{seed}", benchmark.candidates_a + benchmark.candidates_b,
                             references + references, benchmark.images * 2, [], statistic="", protocol="")
            scores = np.asarray(self.rows(metric, rows), dtype=float)
            missing = np.isnan(scores[:n]) | np.isnan(scores[n:])
            if missing.any() and nan_policy == "raise":
                raise InputError(f"{benchmark.name}: {metric} scores missing (NaN) in draw {seed} at pair "
                                 f"{describe_rows(np.flatnonzero(missing), n)}; pass nan_policy='omit' "
                                 f"(--nan-policy omit) to drop those pairs")
            correct = np.full(n, np.nan)
            correct[~missing] = correct_pairs(scores[:n][~missing], scores[n:][~missing], prefers_a[~missing],
                                              ties=ties)
            out.append(correct)
        return np.stack(out)


def _complete_pairs(per_metric: Dict[str, np.ndarray], benchmark: PairwiseBenchmark, units: Optional[List]):
    """The pairs every metric scored in every draw (``nan_policy="omit"`` marks the others NaN): outcomes,
    categories and units of those pairs, and the number dropped."""
    n = len(benchmark.candidates_a)
    keep = np.ones(n, dtype=bool)
    for correct in per_metric.values():
        keep &= ~np.isnan(correct).any(axis=0)
    if not keep.any():
        raise InputError(f"{benchmark.name}: no pair left after dropping the pairs with missing scores")
    categories = None if benchmark.categories is None else [c for c, k in zip(benchmark.categories, keep) if k]
    units = None if units is None else [u for u, k in zip(units, keep) if k]
    return {m: c[:, keep] for m, c in per_metric.items()}, categories, units, int(n - keep.sum())


def _benchmark_scores(scores: Scores, metrics: Sequence[str], benchmark, ties: str, nan_policy: str):
    """Per metric, its per-row scores (or draws × pairs outcomes), and ``{metric: reason}`` for those skipped."""
    per_metric, skipped = {}, {}
    for metric in metrics:
        try:
            per_metric[metric] = (scores.correct(metric, benchmark, ties=ties, nan_policy=nan_policy)
                                  if isinstance(benchmark, PairwiseBenchmark) else scores.rows(metric, benchmark))
        except ModelNotAvailableError as exc:
            skipped[metric] = f"weights not available: {str(exc).splitlines()[0]}"
        except NoRowInCache as exc:
            skipped[metric] = str(exc)
        except InputError as exc:
            if "reference" not in str(exc):
                raise
            skipped[metric] = str(exc)
    return per_metric, skipped


def _clusters(benchmark, per_metric: Dict, units, nan_policy: str, options: Dict) -> Dict:
    if isinstance(benchmark, PairwiseBenchmark):
        per_metric, categories, units, omitted = _complete_pairs(per_metric, benchmark, units)
        return {**accuracy_clusters(per_metric, categories=categories, units=units, **options), "omitted": omitted}
    try:
        return correlation_clusters(per_metric, benchmark.human, statistic=benchmark.statistic, units=units,
                                    nan_policy=nan_policy, **options)
    except InputError as exc:
        raise InputError(f"{benchmark.name}: {exc}".replace("nan_policy='omit'",
                                                             "nan_policy='omit' (--nan-policy omit)")) from exc


def _rows(name: str, benchmark, result: Dict, scores: Scores, test: str, correction: str) -> List[Dict]:
    """The table rows of one benchmark: ranked metrics in cluster order, then the undefined ones (no rank)."""
    n = len(benchmark.candidates_a) if isinstance(benchmark, PairwiseBenchmark) else len(benchmark.human)
    rows = []
    for metric in [*result["order"], *result["undefined"]]:
        published = PUBLISHED.get(name, {}).get(metric, (None, None))
        defined = metric not in result["undefined"]
        low, high = result["ci"][metric]
        rows.append({"benchmark": name, "statistic": result["statistic"], "metric": metric,
                     "value": 100 * result["values"][metric] if defined else None,
                     "ci_low": 100 * low if defined else None, "ci_high": 100 * high if defined else None,
                     "rank": result["ranks"][metric] if defined else None,
                     "undefined": None if defined else result["undefined"][metric],
                     "tiny_random_weights": scores.tiny(metric), "replayed": scores.replayed(metric),
                     "published": published[0],
                     "published_source": published[1], "n": n - result["omitted"], "omitted": result["omitted"],
                     "units": result["units"], "test": test, "correction": correction})
    return rows


def leaderboard(metrics: Sequence[str] = TEXT_METRICS, benchmarks: Sequence[str] = BENCHMARKS, *, data_dir=None,
                unit: str = "image", test: str = "bootstrap", resamples: int = 1000, seed: int = 0,
                alpha: float = 0.05, correction: str = "holm", ties: str = "wrong", scores: Optional[Scores] = None,
                loaded_benchmarks: Optional[Mapping[str, object]] = None, nan_policy: str = "raise") -> Dict:
    """The table (``rows``, one per metric × benchmark), each benchmark's clusters and p-values, and the metrics
    skipped per benchmark with the reason (weights not available, no references in the release)."""
    if nan_policy not in NAN_POLICIES:
        raise InputError(f"nan_policy: {nan_policy!r} is not one of {NAN_POLICIES}")
    scores = scores or Scores()
    loaded_benchmarks = dict(loaded_benchmarks or {})
    rows, details, skipped = [], {}, {}
    for name in benchmarks:
        benchmark = loaded_benchmarks.get(name) or load(name, data_dir)
        units = benchmark_units(benchmark, unit)
        per_metric, skipped[name] = _benchmark_scores(scores, metrics, benchmark, ties, nan_policy)
        if not per_metric:
            continue
        options = dict(test=test, resamples=resamples, seed=seed, alpha=alpha, correction=correction)
        details[name] = _clusters(benchmark, per_metric, units, nan_policy, options)
        rows += _rows(name, benchmark, details[name], scores, test, correction)
    return {"rows": rows, "benchmarks": details, "skipped": {k: v for k, v in skipped.items() if v},
            "tiny_random_weights": sorted({r["metric"] for r in rows if r["tiny_random_weights"]}),
            "replayed": {m: scores.loaded[scorer_and_key(m)[0]].provenance for m in
                         sorted({r["metric"] for r in rows if r["replayed"]})},
            "unit": unit, "test": test, "resamples": resamples, "seed": seed, "alpha": alpha,
            "correction": correction, "nan_policy": nan_policy}


def _metric_label(row: Dict) -> str:
    marks = [TINY_NOTE] * bool(row["tiny_random_weights"]) + [REPLAYED_NOTE] * bool(row.get("replayed"))
    return f"{row['metric']} ({', '.join(marks)})" if marks else row["metric"]


def to_markdown(board: Dict) -> str:
    """One table per benchmark: cluster rank, metric, ours ×100 with its CI, published value; undefined metrics
    last, without a rank; metrics scored with tiny random test weights marked in the header and in their row."""
    lines = [f"Clusters: one-sided paired {board['test']} tests over {board['unit']} units, {board['resamples']} "
             f"resamples, seed {board['seed']}, alpha {board['alpha']}, {board['correction']} correction over each "
             f"benchmark's pairs. 95% CI: paired bootstrap over the same units."]
    if board["tiny_random_weights"]:
        lines.append(f"\n**{TINY_NOTE}**: the scores of {', '.join(board['tiny_random_weights'])} come from tiny "
                     f"random test weights; their values, CIs and ranks mean nothing.")
    for metric, provenance in board.get("replayed", {}).items():
        lines.append(f"\n**{REPLAYED_NOTE}**: {metric}'s scores are recorded outputs of the judge model "
                     f"{provenance.get('model')} replayed from "
                     f"{provenance['cache']} (sha256 {provenance['cache_sha256'][:12]}; "
                     f"{', '.join(provenance['origins'])}); no model was run.")
    for name in dict.fromkeys(r["benchmark"] for r in board["rows"]):
        rows = [r for r in board["rows"] if r["benchmark"] == name]
        omitted = f", {rows[0]['omitted']} omitted (missing values)" if rows[0]["omitted"] else ""
        lines += ["", f"### {name} ({rows[0]['statistic']} ×100, {rows[0]['n']} rows{omitted}, {rows[0]['units']} "
                      f"units)", "", "| rank | metric | ours | 95% CI | published |", "|---|---|---|---|---|"]
        for r in rows:
            published = "" if r["published"] is None else f"{r['published']:g} ({r['published_source']})"
            if r["undefined"] is not None:
                lines.append(f"| undefined | {_metric_label(r)} | undefined: {r['undefined']} | | {published} |")
                continue
            lines.append(f"| {r['rank']} | {_metric_label(r)} | {r['value']:.2f} | {r['ci_low']:.2f}–"
                         f"{r['ci_high']:.2f} | {published} |")
        for metric, reason in board["skipped"].get(name, {}).items():
            lines.append(f"| – | {metric} | skipped: {reason} | | |")
    return "\n".join(lines) + "\n"


def to_csv(board: Dict, path: os.PathLike) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(board["rows"])


def json_safe(value):
    """``value`` with every NaN as ``None`` (JSON has no NaN)."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def plot(board: Dict, path: os.PathLike) -> None:
    """One panel per benchmark: each ranked metric's value with its CI, coloured by cluster rank, published values
    as ×."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ModelNotAvailableError("the leaderboard plot needs matplotlib: pip install 'capeval[plot]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranked = [r for r in board["rows"] if r["undefined"] is None]
    names = list(dict.fromkeys(r["benchmark"] for r in ranked))
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 0.35 * len(ranked) / len(names) + 2),
                             squeeze=False, dpi=100)
    colours = plt.get_cmap("tab10")
    for ax, name in zip(axes[0], names):
        rows = [r for r in ranked if r["benchmark"] == name][::-1]
        y = np.arange(len(rows))
        for k, r in enumerate(rows):
            ax.errorbar(r["value"], k, xerr=[[r["value"] - r["ci_low"]], [r["ci_high"] - r["value"]]], fmt="o",
                        color=colours((r["rank"] - 1) % 10), capsize=3)
            if r["published"] is not None:
                ax.plot(r["published"], k, "x", color="black")
        ax.set_yticks(y, [f"{_metric_label(r)} ({r['rank']})" for r in rows])
        ax.set_title(f"{name} ({rows[0]['statistic']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def write(board: Dict, output_dir: os.PathLike) -> Dict[str, str]:
    """``leaderboard.md``, ``leaderboard.csv``, ``leaderboard.json`` and ``leaderboard.png`` in ``output_dir``."""
    import json

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {kind: str(out / f"leaderboard.{kind}") for kind in ("md", "csv", "json", "png")}
    Path(files["md"]).write_text(to_markdown(board))
    to_csv(board, files["csv"])
    Path(files["json"]).write_text(json.dumps(json_safe(board), indent=1, allow_nan=False))
    if any(r["undefined"] is None for r in board["rows"]):
        plot(board, files["png"])
    return files
