"""The leaderboard: values are the literature statistic of the runner's cached per-sample scores, CIs and ranks come
from the cluster computation, scores are reused (no scorer loaded on a second run), and the CLI writes markdown,
CSV, JSON and a plot; on the real THumB data it reproduces the published cells."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.runner import metric_scores
from capeval.benchmarks.schema import to_table
from capeval.functional.correlation import STATISTICS
from capeval.meta_eval.metric_clusters import correlation_clusters
from capeval.meta_eval.leaderboard import Scores, benchmark_units, leaderboard, to_markdown

CAPTIONS = ["a dog runs on the grass", "a cat sleeps on a sofa", "two people ride bikes", "a red car on a road",
            "a child plays with a ball", "a bird sits on a branch"]


def _benchmark(n_images=8):
    rng = np.random.default_rng(0)
    rows = []
    for image in range(n_images):
        refs = [CAPTIONS[image % 6], CAPTIONS[(image + 1) % 6]]
        for k in range(3):
            candidate = CAPTIONS[(image + k) % 6] if k < 2 else CAPTIONS[(image + 3) % 6]
            rows.append((candidate, refs, f"img{image}.jpg", float(rng.integers(1, 5) + (k == 0))))
    c, r, i, h = map(list, zip(*rows))
    return Benchmark("thumb", c, r, i, h, statistic="pearson", protocol="fabricated")


def test_leaderboard_values_ranks_and_score_reuse(tiny_hub, tmp_path):
    benchmark = _benchmark()
    metrics = ["rouge_l", "mpnet_score"]
    board = leaderboard(metrics, ["thumb"], resamples=60, seed=1, scores=Scores(cache_dir=tmp_path, device="cpu"),
                        loaded_benchmarks={"thumb": benchmark})
    per_sample = {m: metric_scores(m, benchmark, cache_dir=tmp_path, device="cpu") for m in metrics}
    expected = correlation_clusters(per_sample, benchmark.human, statistic="pearson", units=benchmark.images,
                                    resamples=60, seed=1)
    rows = {r["metric"]: r for r in board["rows"]}
    for metric in metrics:
        assert rows[metric]["value"] == pytest.approx(100 * STATISTICS["pearson"](per_sample[metric], benchmark.human))
        assert [rows[metric]["ci_low"], rows[metric]["ci_high"]] == pytest.approx(
            [100 * v for v in expected["ci"][metric]])
        assert rows[metric]["rank"] == expected["ranks"][metric]
        assert rows[metric]["units"] == 8
    assert rows["rouge_l"]["published"] == 18.7 and "Table 4" in rows["rouge_l"]["published_source"]
    cached = {p: p.stat().st_mtime_ns for p in (tmp_path / "benchmarks").iterdir()}
    assert len(cached) == 2
    again = Scores(cache_dir=tmp_path, device="cpu")
    assert leaderboard(metrics, ["thumb"], resamples=60, seed=1, scores=again,
                       loaded_benchmarks={"thumb": benchmark})["rows"] == board["rows"]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "benchmarks").iterdir()} == cached  # nothing rescored
    assert "| 1 |" in to_markdown(board)


def test_units_of_a_benchmark():
    benchmark = _benchmark(2)
    assert benchmark_units(benchmark, "image") == benchmark.images
    assert benchmark_units(benchmark, "item") == list(zip(benchmark.images, benchmark.candidates))
    assert benchmark_units(benchmark, "row") is None


def test_cli_writes_markdown_csv_json_and_plot(tiny_hub, tmp_path, monkeypatch, capsys):
    import pyarrow.parquet as pq

    from capeval.cli import main

    folder = tmp_path / "data" / "thumb" / "data"
    folder.mkdir(parents=True)
    pq.write_table(to_table(_benchmark()), str(folder / "test-00000-of-00001.parquet"))
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "board"
    assert main(["leaderboard", "--metrics", "rouge_l", "mpnet_score", "--benchmarks", "thumb", "--data-dir",
                 str(tmp_path / "data"), "--output", str(out), "--resamples", "30", "--device", "cpu",
                 "--test", "bootstrap", "--correction", "none"]) == 0
    assert "### thumb" in capsys.readouterr().out
    board = json.loads((out / "leaderboard.json").read_text())
    with open(out / "leaderboard.csv") as handle:
        table = list(csv.DictReader(handle))
    assert [r["metric"] for r in table] == [r["metric"] for r in board["rows"]]
    assert float(table[0]["value"]) == pytest.approx(board["rows"][0]["value"])
    assert (out / "leaderboard.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["leaderboard", "--benchmarks", "thumb", "--weights", "mpnet_score"]) == 2  # not METRIC=PATH


def test_thumb_leaderboard_reproduces_the_published_cells(shared_data, tmp_path):
    board = leaderboard(["bleu1", "cider"], ["thumb"], data_dir=shared_data / "benchmarks", resamples=50,
                        scores=Scores(cache_dir=tmp_path))
    rows = {r["metric"]: r for r in board["rows"]}
    for metric in ("bleu1", "cider"):
        assert round(rows[metric]["value"], 1) == rows[metric]["published"]
        assert rows[metric]["ci_low"] < rows[metric]["value"] < rows[metric]["ci_high"]
    assert Path(board["rows"][0]["benchmark"]) == Path("thumb")
