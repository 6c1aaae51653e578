"""`capeval score vcrscore --from-features` says where its numbers came from: the regressor's hashcode in every row,
the summary and a provenance sidecar, flagged when the regressor is a tiny random test model."""

import json

import pytest
from capeval.cli import main


def test_from_features_rows_summary_and_sidecar_carry_hashcode_and_tiny_flag(tiny_hub, tmp_path, capsys):
    rows = [{"id": "a", "features": [70.0, 0.4, 0.7]}, {"id": "b", "features": [10.0, -1.0, 0.1]}]
    (tmp_path / "f.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    capsys.readouterr()
    with pytest.warns(UserWarning, match="TINY RANDOM TEST WEIGHTS"):
        assert main(["score", "vcrscore", "--from-features", str(tmp_path / "f.jsonl"), "--output", str(out)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["tiny_random_weights"] is True and summary["hashcode"].endswith("|TINY-RANDOM-WEIGHTS")
    assert summary["provenance"]["weights"][0]["ref"] == "vcrscore-gbr"
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["hashcode"] for r in written] == [summary["hashcode"]] * 2
    sidecar = json.loads((tmp_path / "out.jsonl.provenance.json").read_text())
    assert sidecar["hashcode"] == summary["hashcode"] and sidecar["provenance"] == summary["provenance"]
    assert sidecar["tiny_random_weights"] is True and sidecar["rows"] == 2
