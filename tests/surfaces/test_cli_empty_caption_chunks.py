"""``capeval score --empty-caption`` gives the same means and rows whatever the chunk size (a chunk of empty
captions only gets its fixed score, or its null scores, in every score column)."""

import json

import pytest

from capeval.cli import main

RECORDS = [{"caption": "a dog on the grass", "references": ["a dog runs on the grass"]},
           {"caption": " ", "references": ["a cat"]},
           {"caption": "", "references": ["a red car parked", "a car"]}]


def _score(path, tmp_path, capsys, policy, *chunking):
    out = tmp_path / f"out{len(chunking)}.jsonl"
    capsys.readouterr()
    assert main(["score", "rouge_l", "--input", str(path), "--empty-caption", policy, "--output", str(out),
                 *chunking]) == 0
    summary = json.loads(capsys.readouterr().out)
    return summary, [json.loads(line)["scores"] for line in out.read_text().splitlines()]


@pytest.mark.parametrize("policy, empty_score", [("0", 0.0), ("skip", None)])
def test_chunk_size_does_not_change_means_or_rows(tmp_path, capsys, policy, empty_score):
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in RECORDS))
    whole, whole_rows = _score(path, tmp_path, capsys, policy)
    chunked, chunked_rows = _score(path, tmp_path, capsys, policy, "--chunk-size", "1")
    assert chunked == whole and chunked_rows == whole_rows
    assert [row["rouge_l"] for row in whole_rows[1:]] == [empty_score, empty_score]
    assert whole["rouge_l"] == pytest.approx(whole_rows[0]["rouge_l"] / (3 if policy == "0" else 1), abs=1e-12)
