"""`capeval leaderboard --replay fleur=CACHE`: a judge's recorded outputs ranked beside the other metrics with the
same significance machinery, marked replayed in markdown, CSV and JSON."""

import csv
import json

from scipy import stats

from capeval.cli import main
from capeval.judges.cache import JudgeCache
from degenerate_thumb import degenerate_rows, write_raw_thumb


def _judge_cache(path, rows, model="m@0"):
    cache = JudgeCache(path)
    for k, (candidate, _, image, _) in enumerate(rows):
        score = (k * 7 % 11) / 10
        inputs = {"judge": "fleur", "model": model, "prompt_sha256": "0", "image": {"sha256": None, "file": image},
                  "caption": candidate, "references": None, "generation": {"do_sample": False}}
        cache.put(inputs, {"text": str(score), "raw_score": score, "score": score, "digit_probabilities": None,
                           "explanation": None}, "generated")
    return path


def test_replayed_judge_rows_are_ranked_and_marked(tmp_path, capsys):
    rows = degenerate_rows()
    ratings = [float(k % 5) for k in range(len(rows))]
    write_raw_thumb(tmp_path / "data", ratings)
    (tmp_path / "data" / "flickr8k").mkdir()
    (tmp_path / "data" / "flickr8k" / "flickr8k_expert_clipscore_format.json").write_text(json.dumps(
        {"0": {"image_path": "x/9.jpg", "ground_truth": ["r"] * 5,
               "human_judgement": [{"caption": "a dog", "rating": r} for r in (1, 2, 3)]}}))
    cache = _judge_cache(tmp_path / "fleur.jsonl", rows)
    assert main(["leaderboard", "--metrics", "bleu1", "--replay", f"fleur={cache}", "--benchmarks", "thumb",
                 "flickr8k_expert", "--data-dir", str(tmp_path / "data"), "--output", str(tmp_path / "out"),
                 "--resamples", "50"]) == 0
    markdown = capsys.readouterr().out
    assert "| fleur (replayed) |" in markdown and f"replayed from {cache}" in markdown
    assert "| bleu1 |" in markdown
    board = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    thumb = {r["metric"]: r for r in board["rows"] if r["benchmark"] == "thumb"}
    assert thumb["fleur"]["replayed"] is True and thumb["bleu1"]["replayed"] is False
    assert thumb["fleur"]["rank"] is not None and thumb["fleur"]["ci_low"] <= thumb["fleur"]["value"]
    scores = [(k * 7 % 11) / 10 for k in range(len(rows))]
    assert abs(thumb["fleur"]["value"] - 100 * stats.pearsonr(scores, ratings).statistic) < 1e-9
    assert board["replayed"]["fleur"]["cache"] == str(cache) and board["replayed"]["fleur"]["replayed"] is True
    assert "holds no row of flickr8k_expert" in board["skipped"]["flickr8k_expert"]["fleur"]
    with open(tmp_path / "out" / "leaderboard.csv") as handle:
        table = {(r["benchmark"], r["metric"]): r["replayed"] for r in csv.DictReader(handle)}
    assert table[("thumb", "fleur")] == "True" and table[("thumb", "bleu1")] == "False"


def test_rows_missing_from_the_cache_are_refused_or_dropped_with_nan_policy_omit(tmp_path, capsys):
    rows = degenerate_rows()
    write_raw_thumb(tmp_path / "data", [float(k % 5) for k in range(len(rows))])
    cache = _judge_cache(tmp_path / "fleur.jsonl", rows[1:])  # the first row was never judged
    argv = ["leaderboard", "--metrics", "bleu1", "--replay", f"fleur={cache}", "--benchmarks", "thumb", "--data-dir",
            str(tmp_path / "data"), "--output", str(tmp_path / "out"), "--resamples", "20"]
    assert main(argv) == 2
    assert "1 of 24 rows (row 0 (image 'img0.jpg', caption 'a zz000'))" in capsys.readouterr().err
    assert main([*argv, "--nan-policy", "omit"]) == 0
    board = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    assert {r["metric"]: (r["n"], r["omitted"]) for r in board["rows"]} == {"fleur": (23, 1), "bleu1": (23, 1)}


def test_a_replay_names_its_judge_model_and_tiny_weights_records_are_marked(tmp_path, capsys):
    rows = degenerate_rows()
    write_raw_thumb(tmp_path / "data", [float(k % 5) for k in range(len(rows))])
    cache = _judge_cache(tmp_path / "fleur.jsonl", rows, model="llava-hf/llava-1.5-13b-hf@5dda288+tiny-random")
    argv = ["leaderboard", "--metrics", "bleu1", "--replay", f"fleur={cache}", "--benchmarks", "thumb", "--data-dir",
            str(tmp_path / "data"), "--output", str(tmp_path / "out"), "--resamples", "20"]
    assert main(argv) == 0
    markdown = capsys.readouterr().out
    assert "| fleur (TINY RANDOM TEST WEIGHTS, replayed) |" in markdown and "| bleu1 |" in markdown
    assert "outputs of the judge model llava-hf/llava-1.5-13b-hf@5dda288+tiny-random replayed from" in markdown
    board = json.loads((tmp_path / "out" / "leaderboard.json").read_text())
    assert board["tiny_random_weights"] == ["fleur"]
    assert board["replayed"]["fleur"]["model"] == "llava-hf/llava-1.5-13b-hf@5dda288+tiny-random"
    with open(tmp_path / "out" / "leaderboard.csv") as handle:
        table = {r["metric"]: r["tiny_random_weights"] for r in csv.DictReader(handle)}
    assert table == {"fleur": "True", "bleu1": "False"}


def test_a_cache_mixing_two_models_is_refused_one_line_and_nothing_written(tmp_path, capsys):
    rows = degenerate_rows()
    write_raw_thumb(tmp_path / "data", [float(k % 5) for k in range(len(rows))])
    cache = _judge_cache(tmp_path / "fleur.jsonl", rows[:12])
    _judge_cache(cache, rows[12:], model="other@1")
    assert main(["leaderboard", "--metrics", "bleu1", "--replay", f"fleur={cache}", "--benchmarks", "thumb",
                 "--data-dir", str(tmp_path / "data"), "--output", str(tmp_path / "out"),
                 "--resamples", "20"]) == 2
    err = capsys.readouterr().err
    assert "the records of fleur come from more than one judge: model m@0 (line 1) and model other@1 (line 13)" in err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()
