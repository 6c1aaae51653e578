"""``capeval score --empty-caption``: the scorer's empty-caption policy at the command line."""

import json

import numpy as np
import pytest

from capeval.cli import main
from capeval.core.scoring import load_scorer

RECORDS = [{"caption": "a dog on the grass", "references": ["a dog runs on the grass"]},
           {"caption": " ", "references": ["a cat"]},
           {"caption": "a red car", "references": ["a red car parked", "a car"]}]


@pytest.fixture
def records(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in RECORDS))
    return path


def test_skip_gives_null_scores_and_scores_the_others_as_the_corpus(records, tmp_path, capsys):
    # "error": refused naming the record (the default, "score", scores it as pycocoevalcap: test_coco_empty_texts.py)
    assert main(["score", "bleu", "--input", str(records), "--empty-caption", "error"]) == 2
    assert "predictions[1] is an empty caption" in capsys.readouterr().err
    out = tmp_path / "out.jsonl"
    assert main(["score", "bleu", "--input", str(records), "--empty-caption", "skip", "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    kept = load_scorer("bleu").score([RECORDS[0]["caption"], RECORDS[2]["caption"]],
                                     references=[RECORDS[0]["references"], RECORDS[2]["references"]])
    assert summary["skipped_empty_captions"] == 1 and summary["n"] == 3
    assert summary["bleu_4"] == kept["bleu_4"]  # corpus BLEU of the non-empty captions
    assert [r["scores"]["bleu_4"] for r in rows] == [kept["bleu_4_per_sample"][0], None, kept["bleu_4_per_sample"][1]]


def test_a_fixed_score_counts_in_the_mean(records, capsys):
    assert main(["score", "rouge_l", "--input", str(records), "--empty-caption", "0"]) == 0
    summary = json.loads(capsys.readouterr().out)
    kept = load_scorer("rouge_l").score([RECORDS[0]["caption"], RECORDS[2]["caption"]],
                                        references=[RECORDS[0]["references"], RECORDS[2]["references"]])
    assert summary["empty_captions"] == 1
    assert summary["rouge_l"] == pytest.approx(np.mean(kept["rouge_l_per_sample"] + [0.0]), rel=1e-12)


@pytest.mark.parametrize("value, message", [("nan", "use score, error, skip or a finite score"),
                                            ("none", "use score, error, skip or a finite score")])
def test_bad_policies_are_usage_errors(records, capsys, value, message):
    with pytest.raises(SystemExit) as exit_:
        main(["score", "rouge_l", "--input", str(records), "--empty-caption", value])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_fixed_score_for_a_corpus_level_metric_is_refused_before_scoring(records, capsys):
    assert main(["score", "cider", "--input", str(records), "--empty-caption", "0"]) == 2
    err = capsys.readouterr().err
    assert "cider is corpus-level" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
