"""`capeval merge` of a corpus-level metric's output: its corpus value is not the mean of its per-sample values, so
a merge (whose summary is such a mean) is refused instead of printing another number under the metric's name."""

import json
from pathlib import Path

from capeval.cli import main

RECORDS = [{"caption": "a man rides a horse on a beach", "references": ["a man riding a horse", "a horse on sand"]},
           {"caption": "a cat", "references": ["a cat sleeping on a red sofa in the sun"]},
           {"caption": "two dogs play in the snow", "references": ["two dogs playing in snow", "dogs in the snow"]}]


def test_merging_a_corpus_level_output_is_refused_not_averaged(tmp_path, capsys):
    source, scored, merged = tmp_path / "in.jsonl", tmp_path / "bleu.jsonl", tmp_path / "merged.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert main(["score", "bleu", "--input", str(source), "--output", str(scored)]) == 0
    capsys.readouterr()
    assert main(["merge", str(scored), "--output", str(merged)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("capeval merge: error: ") and err.count("\n") == 1, err
    assert "bleu is corpus-level" in err and str(scored) in err
    assert not Path(merged).exists()
