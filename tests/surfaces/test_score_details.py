"""``capeval score capture --output``: each row carries its sample's record (matched, missed and invented objects,
attributes and relations) beside its scores, equal to the scorer's own on the whole input, in streamed chunks too
(issue #41 item 4); a skipped empty caption's record is null; a metric without records writes none."""

import json

import pytest

from capeval.cli import main
from capeval.core.scoring import load_scorer
from scene_graph_oracles import SENTENCE_GRAPHS

GRAPHS = SENTENCE_GRAPHS
RECORDS = [{"caption": "A red car is on the street. Two men walk a dog.",
            "references": ["A red automobile is on a road.", "Two men and a dog are near a car."]},
           {"caption": "A dog sits on a red car.", "references": ["A puppy is on a car."]},
           {"caption": "The man sits on a bench.", "references": ["A man is sitting on a bench. The bench is wooden."]},
           {"caption": "Two men walk a dog.", "references": ["Two men and a dog are near a car."]},
           {"caption": "A puppy is on a car.", "references": ["The bench is wooden."]}]
RUNTIME = ["--device", "cpu", "--batch-size", "6"]  # a parser of its own settings: no other test's parses cached


@pytest.fixture
def capture(tiny_hub, monkeypatch):
    """The scorer the command loads (the same shared parser), its parser's model answering GRAPHS."""
    scorer = load_scorer("capture", device="cpu", batch_size=6)
    monkeypatch.setattr(scorer.parser, "generate", lambda texts, input_limits=None: [GRAPHS[t.strip()] for t in texts])
    return scorer


def scored_rows(tmp_path, records, *options):
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    assert main(["score", "capture", "--input", str(source), "--output", str(out), *RUNTIME, *options]) == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("chunk", [[], ["--chunk-size", "2"]])
def test_each_row_carries_its_sample_s_record(capture, tmp_path, capsys, chunk):
    rows = scored_rows(tmp_path, RECORDS, *chunk)
    expected = capture.score([r["caption"] for r in RECORDS], references=[r["references"] for r in RECORDS])
    assert [row["details"] for row in rows] == [{"capture": record} for record in expected["capture_details"]]
    assert [row["scores"]["capture"] for row in rows] == expected["capture_per_sample"]
    objects = rows[0]["details"]["capture"]["objects"]
    assert ["car", "automobile"] in objects["matched"] and objects["missed"] == ["road"]
    assert objects["invented"] == ["street"]
    assert "capture_details" not in json.loads(capsys.readouterr().out)  # the summary: means only


def test_a_skipped_empty_caption_has_no_record(capture, tmp_path, capsys):
    records = [RECORDS[0], {"caption": " ", "references": ["A puppy is on a car."]}, RECORDS[2]]
    rows = scored_rows(tmp_path, records, "--empty-caption", "skip")
    kept = capture.score([records[0]["caption"], records[2]["caption"]],
                         references=[records[0]["references"], records[2]["references"]])["capture_details"]
    assert [row["details"]["capture"] for row in rows] == [kept[0], None, kept[1]]


def test_a_metric_without_records_writes_none(tmp_path, capsys):
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(record) + "\n" for record in RECORDS), encoding="utf-8")
    assert main(["score", "rouge_l", "--input", str(source), "--output", str(out)]) == 0
    assert all("details" not in json.loads(line) for line in out.read_text(encoding="utf-8").splitlines())
