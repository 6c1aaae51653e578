"""The leaderboard never ranks an undefined statistic (listed as undefined, no value/CI/rank, in the table, CSV and
JSON), flags scores from tiny random test weights in every output, and meets a missing human rating with a one-line
error naming the benchmark, column and rows, or drops it with --nan-policy omit (issue #27)."""

import csv
import json

import numpy as np
import pytest

from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.runner import metric_scores
from capeval.meta_eval.metric_clusters import correlation_clusters
from capeval.meta_eval.leaderboard import Scores, leaderboard, to_markdown, write

from degenerate_thumb import degenerate_rows, write_raw_thumb


def _benchmark():
    c, r, i, h = map(list, zip(*degenerate_rows()))
    return Benchmark("thumb", c, r, i, h, statistic="pearson", protocol="fabricated")


def _strict_json(path):
    def refuse(constant):
        raise AssertionError(f"{path.name} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_a_constant_metric_is_listed_as_undefined_and_never_ranked(tmp_path):
    benchmark = _benchmark()
    scores = Scores(cache_dir=tmp_path / "cache", device="cpu")
    board = leaderboard(["cider", "bleu1", "rouge_l"], ["thumb"], resamples=60, scores=scores,
                        loaded_benchmarks={"thumb": benchmark})
    per_sample = {m: metric_scores(m, benchmark, cache_dir=tmp_path / "cache") for m in ("cider", "bleu1", "rouge_l")}
    assert len(set(per_sample["cider"])) == 1  # the premise: CIDEr is constant here
    expected = correlation_clusters({m: per_sample[m] for m in ("bleu1", "rouge_l")}, benchmark.human,
                                    statistic="pearson", units=benchmark.images, resamples=60)
    rows = {r["metric"]: r for r in board["rows"]}
    assert rows["cider"]["rank"] is None and rows["cider"]["value"] is None and rows["cider"]["ci_low"] is None
    assert "metric scores are constant" in rows["cider"]["undefined"]
    assert {m: rows[m]["rank"] for m in ("bleu1", "rouge_l")} == expected["ranks"]
    assert [r["metric"] for r in board["rows"]][-1] == "cider"  # after every ranked metric
    assert "| undefined | cider | undefined: the metric scores are constant" in to_markdown(board)
    files = write(board, tmp_path / "board")
    with open(files["csv"]) as handle:
        table = {r["metric"]: r for r in csv.DictReader(handle)}
    assert table["cider"]["rank"] == "" and "constant" in table["cider"]["undefined"]
    assert table["bleu1"]["rank"] in ("1", "2") and table["bleu1"]["undefined"] == ""
    saved = _strict_json(tmp_path / "board" / "leaderboard.json")
    assert {r["metric"]: r["rank"] for r in saved["rows"]}["cider"] is None


def test_scores_of_tiny_random_weights_are_flagged_in_every_output(tiny_hub, tmp_path):
    board = leaderboard(["rouge_l", "mpnet_score"], ["thumb"], resamples=30,
                        scores=Scores(cache_dir=tmp_path / "cache", device="cpu"),
                        loaded_benchmarks={"thumb": _benchmark()})
    rows = {r["metric"]: r for r in board["rows"]}
    assert rows["mpnet_score"]["tiny_random_weights"] is True and rows["rouge_l"]["tiny_random_weights"] is False
    markdown = to_markdown(board)
    assert "TINY RANDOM TEST WEIGHTS**: the scores of mpnet_score" in markdown
    assert "| mpnet_score (TINY RANDOM TEST WEIGHTS) |" in markdown
    files = write(board, tmp_path / "board")
    with open(files["csv"]) as handle:
        table = {r["metric"]: r for r in csv.DictReader(handle)}
    assert table["mpnet_score"]["tiny_random_weights"] == "True" and table["rouge_l"]["tiny_random_weights"] == "False"
    saved = _strict_json(tmp_path / "board" / "leaderboard.json")
    assert saved["tiny_random_weights"] == ["mpnet_score"]
    # a second run reads the cached scores: the flag still comes from the scorer's provenance
    again = leaderboard(["mpnet_score"], ["thumb"], resamples=30,
                        scores=Scores(cache_dir=tmp_path / "cache", device="cpu"),
                        loaded_benchmarks={"thumb": _benchmark()})
    assert again["rows"][0]["tiny_random_weights"] is True


def test_cli_leaderboard_on_a_release_with_a_null_rating(tmp_path, monkeypatch, capsys):
    from capeval.cli import main

    ratings = [r[3] for r in degenerate_rows()]
    ratings[3] = None
    write_raw_thumb(tmp_path / "data", ratings)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    command = ["leaderboard", "--metrics", "bleu1", "rouge_l", "--benchmarks", "thumb", "--data-dir",
               str(tmp_path / "data"), "--output", str(tmp_path / "board"), "--resamples", "30"]
    assert main(command) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "Traceback" not in error
    assert "thumb: human: missing value (NaN) at row 3 (1 of 24 rows)" in error and "--nan-policy omit" in error
    assert main(command + ["--nan-policy", "omit"]) == 0
    with open(tmp_path / "board" / "leaderboard.csv") as handle:
        table = list(csv.DictReader(handle))
    assert {(r["n"], r["omitted"]) for r in table} == {("23", "1")}
    kept = [k for k in range(24) if k != 3]
    bleu = metric_scores("bleu1", _benchmark(), cache_dir=tmp_path / "cache")
    human = [r[3] for r in degenerate_rows()]
    value = float({r["metric"]: r for r in table}["bleu1"]["value"])
    assert value == pytest.approx(100 * np.corrcoef([bleu[k] for k in kept], [human[k] for k in kept])[0, 1])


def test_a_rating_that_is_not_a_number_names_the_file_record_and_field(tmp_path, capsys):
    from capeval.cli import main

    ratings = [r[3] for r in degenerate_rows()]
    ratings[4] = "four"
    write_raw_thumb(tmp_path / "data", ratings)
    assert main(["leaderboard", "--metrics", "bleu1", "--benchmarks", "thumb", "--data-dir", str(tmp_path / "data"),
                 "--output", str(tmp_path / "board")]) == 2
    assert "THumB-1.0.jsonl: record line 5: field 'human_score': 'four' is not a finite number" in \
        capsys.readouterr().err
