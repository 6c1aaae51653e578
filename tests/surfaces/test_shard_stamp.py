"""`capeval score --shard` / `capeval merge`: every shard is stamped with what it scored (input fingerprint, scorer
hashcode, field mapping, images folder), each row with a digest of its resolved content, and every output has a
provenance sidecar; merge refuses shards of different runs and joins empty shards."""

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
from capeval.cli import main
from PIL import Image


def _pictures(folder: Path, seed: int, n: int = 4):
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(folder / f"{i}.png")


def _input(tmp_path: Path, n: int = 3) -> list:
    _pictures(tmp_path / "pics", 0)
    records = [{"image": f"{i % 3}.png", "id": i, "caption": f"caption {i}", "alt": f"other {i}",
                "references": [f"ref {i}", "ref"]} for i in range(n)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return ["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--device", "cpu"]


def _rows(path) -> list:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _merge_error(capsys, *shards, output) -> str:
    assert main(["merge", *map(str, shards), "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("capeval merge: error: ") and err.count("\n") == 1, err
    assert not Path(output).exists()
    return err


def test_three_records_in_four_shards_merge_to_the_single_run(tiny_hub, tmp_path, capsys):
    base = _input(tmp_path) + ["--images", str(tmp_path / "pics")]
    assert main(base + ["--output", str(tmp_path / "single.jsonl")]) == 0
    shards = [tmp_path / f"s{i}.jsonl" for i in range(4)]
    for i, shard in enumerate(shards):
        capsys.readouterr()
        assert main(base + ["--shard", f"{i}/4", "--output", str(shard)]) == 0
    empty = json.loads(capsys.readouterr().out)  # shard 3/4 holds no record: a clear summary
    assert empty["n"] == 0 and empty["shard"] == "3/4"
    assert shards[3].read_text() == ""
    sidecar = json.loads(Path(f"{shards[3]}.provenance.json").read_text())
    assert sidecar["rows"] == 0 and sidecar["shard"] == "3/4" and sidecar["shard_of"]["records"] == 3
    assert main(["merge", *map(str, shards), "--output", str(tmp_path / "merged.jsonl")]) == 0
    single, merged = _rows(tmp_path / "single.jsonl"), _rows(tmp_path / "merged.jsonl")
    assert [{k: v for k, v in r.items() if k != "scores"} for r in merged] == \
        [{k: v for k, v in r.items() if k != "scores"} for r in single]
    for a, b in zip(single, merged):
        assert b["scores"] == pytest.approx(a["scores"], abs=1e-5)
    # the empty shard still counts: without it, shard 3/4 is missing
    assert "shard(s) 3/4 are missing" in _merge_error(capsys, *shards[:3], output=tmp_path / "m.jsonl")


def test_merge_refuses_shards_scored_with_another_caption_field_policy_image_folder_or_format(tiny_hub, tmp_path,
                                                                                             capsys):
    base = _input(tmp_path, 4)
    images = ["--images", str(tmp_path / "pics")]
    s0, s1, merged = tmp_path / "s0.jsonl", tmp_path / "s1.jsonl", tmp_path / "merged.jsonl"
    assert main(base + images + ["--shard", "0/2", "--output", str(s0)]) == 0

    assert main(base + images + ["--caption-field", "alt", "--shard", "1/2", "--output", str(s1)]) == 0
    err = _merge_error(capsys, s0, s1, output=merged)
    assert f"{s0} and {s1} come from different runs" in err and "caption field caption vs alt" in err

    assert main(base + images + ["--empty-caption", "skip", "--shard", "1/2", "--output", str(s1)]) == 0
    assert "empty captions score vs skip" in _merge_error(capsys, s0, s1, output=merged)

    _pictures(tmp_path / "other", seed=1)  # other pictures under the same names
    assert main(base + ["--images", str(tmp_path / "other"), "--shard", "1/2", "--output", str(s1)]) == 0
    err = _merge_error(capsys, s0, s1, output=merged)
    assert f"images folder {tmp_path / 'pics'} vs {tmp_path / 'other'}" in err

    assert main(base + images + ["--image-format", "{id}.png", "--shard", "1/2", "--output", str(s1)]) == 0
    err = _merge_error(capsys, s0, s1, output=merged)
    assert "image field image vs format {id}.png" in err

    assert main(base + images + ["--shard", "1/2", "--output", str(s1)]) == 0  # the same run: merges
    capsys.readouterr()
    assert main(["merge", str(s0), str(s1), "--output", str(merged)]) == 0


def test_each_row_carries_a_digest_of_what_was_scored(tiny_hub, tmp_path, capsys):
    """The digest covers the caption, the references as scored (a bare string is one reference) and the decoded
    image (mode, size, pixels): computed here independently."""
    _input(tmp_path)
    records = [{"image": "0.png", "caption": "a caption", "references": "one reference"},
               {"image": "1.png", "caption": "another", "references": ["r1", "r2"]}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path / "pics"),
                 "--device", "cpu", "--output", str(tmp_path / "out.jsonl")]) == 0

    def digest(record):
        image = Image.open(tmp_path / "pics" / record["image"])
        pixels = hashlib.sha256(f"{image.mode}{image.size}".encode() + image.tobytes()).hexdigest()
        refs = record["references"] if isinstance(record["references"], list) else [record["references"]]
        scored = {"caption": record["caption"], "image": pixels, "references": refs}
        return hashlib.sha256(json.dumps(scored, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]

    assert [row["scored_digest"] for row in _rows(tmp_path / "out.jsonl")] == [digest(r) for r in records]


def test_outputs_and_summaries_carry_hashcode_tiny_flag_and_a_provenance_sidecar(tiny_hub, tmp_path, capsys):
    base = _input(tmp_path, 4) + ["--images", str(tmp_path / "pics")]
    s0, s1, merged = tmp_path / "s0.jsonl", tmp_path / "s1.jsonl", tmp_path / "merged.jsonl"
    assert main(base + ["--shard", "0/2", "--output", str(s0)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["tiny_random_weights"] is True and summary["hashcode"].endswith("|TINY-RANDOM-WEIGHTS")
    sidecar = json.loads(Path(f"{s0}.provenance.json").read_text())
    assert sidecar["hashcode"] == summary["hashcode"] and sidecar["provenance"] == summary["provenance"]
    assert sidecar["tiny_random_weights"] is True and sidecar["rows"] == 2 and sidecar["shard"] == "0/2"
    assert {row["hashcode"] for row in _rows(s0)} == {summary["hashcode"]}
    assert main(base + ["--shard", "1/2", "--output", str(s1)]) == 0
    capsys.readouterr()
    assert main(["merge", str(s0), str(s1), "--output", str(merged)]) == 0
    merged_summary = json.loads(capsys.readouterr().out)
    assert merged_summary["tiny_random_weights"] is True and merged_summary["hashcode"] == summary["hashcode"]
    merged_sidecar = json.loads(Path(f"{merged}.provenance.json").read_text())
    assert merged_sidecar["provenance"] == summary["provenance"] and merged_sidecar["rows"] == 4
    assert merged_sidecar["tiny_random_weights"] is True and "shard" not in merged_sidecar
    # merge verifies each sidecar against its rows
    Path(f"{s1}.provenance.json").unlink()
    assert f"{s1} has no provenance sidecar" in _merge_error(capsys, s0, s1, output=tmp_path / "m.jsonl")
    assert main(base + ["--shard", "1/2", "--output", str(s1)]) == 0
    capsys.readouterr()
    edited = {**json.loads(Path(f"{s1}.provenance.json").read_text()), "hashcode": "clip_s|other"}
    Path(f"{s1}.provenance.json").write_text(json.dumps(edited))
    assert "its sidecar" in _merge_error(capsys, s0, s1, output=tmp_path / "m.jsonl")


def test_shards_naming_the_same_weights_by_registry_name_and_by_folder_merge(tiny_hub, tmp_path, capsys):
    """The stamp holds the scorer's hashcode (the weights' content), not the spelling of --weights."""
    base = _input(tmp_path, 4) + ["--images", str(tmp_path / "pics")]
    snapshot = next(Path(os.environ["HF_HUB_CACHE"]).glob("models--timm--vit_base_patch32_clip_224.openai/snapshots/*"))
    s0, s1 = tmp_path / "s0.jsonl", tmp_path / "s1.jsonl"
    assert main(base + ["--weights", "openai-clip-vit-b-32", "--shard", "0/2", "--output", str(s0)]) == 0
    assert main(base + ["--weights", str(snapshot), "--shard", "1/2", "--output", str(s1)]) == 0
    capsys.readouterr()
    assert main(["merge", str(s0), str(s1), "--output", str(tmp_path / "merged.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 4


def test_a_failed_rerun_leaves_the_previous_output_with_its_own_sidecar(tiny_hub, tmp_path, capsys):
    base = _input(tmp_path, 2) + ["--images", str(tmp_path / "pics")]
    out, sidecar = tmp_path / "out.jsonl", tmp_path / "out.jsonl.provenance.json"
    assert main(base + ["--output", str(out)]) == 0
    before = out.read_text(), sidecar.read_text()
    with open(tmp_path / "in.jsonl", "a") as f:
        f.write(json.dumps({"image": "gone.png", "caption": "x", "references": ["y"]}) + "\n")
    assert main(base + ["--output", str(out)]) == 2
    assert "image file not found" in capsys.readouterr().err
    assert (out.read_text(), sidecar.read_text()) == before
    assert not Path(f"{out}.partial").exists()
