"""The command line as a person meets it: one spelling per metric with the usual others accepted, --dtype, field
mapping for other datasets' layouts, one-line JSON from `capeval benchmark --json`, and the hashcode of every run."""

import json

import datasets
import pandas as pd
import pytest
from PIL import Image

import capeval
from capeval.cli import main
from capeval.core.scoring import canonical_metric, get_scorer_spec, scorer_of


def _images(tmp_path, n=3):
    for i in range(n):
        Image.new("RGB", (20 + i, 16), (60 * i, 120, 200)).save(tmp_path / f"{i}.png")
    return [f"{i}.png" for i in range(n)]


@pytest.mark.parametrize("spelling, canonical, scorer", [
    ("PAC-S", "pac_s", "pac_s"), ("pacscore", "pac_s", "pac_s"), ("clip-s", "clip_s", "clip_s"),
    ("CLIPScore", "clip_s", "clip_s"), ("bleu1", "bleu_1", "bleu"), ("BLEU-4", "bleu_4", "bleu"),
    ("CIDEr-D", "cider", "cider"), ("ROUGE-L", "rouge_l", "rouge_l"), ("rouge_l", "rouge_l", "rouge_l")])
def test_one_spelling_per_metric_and_the_usual_others_accepted(spelling, canonical, scorer):
    assert canonical_metric(spelling) == canonical and scorer_of(spelling) == scorer
    assert get_scorer_spec(spelling).name == scorer


def test_an_alias_loads_the_same_scorer_with_the_same_hashcode(tiny_hub):
    assert capeval.load_scorer("PAC-S", device="cpu").hashcode == capeval.load_scorer("pac_s", device="cpu").hashcode
    result = capeval.load_scorer("BLEU-1").score(["a dog runs"], references=[["a dog runs fast"]])
    assert result["provenance"]["metric"] == "bleu" and "bleu_1" in result


def _summary(capsys):
    return json.loads(capsys.readouterr().out)


def test_dtype_reaches_the_model_and_the_hashcode(tiny_hub, tmp_path, capsys):
    names = _images(tmp_path)
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps({"image": n, "caption": f"caption {i}"})
                                                 for i, n in enumerate(names)))
    base = ["score", "clip-s", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path), "--device", "cpu"]
    assert main(base) == 0
    default = _summary(capsys)
    assert main(base + ["--dtype", "bfloat16"]) == 0
    bf16 = _summary(capsys)
    assert default["metric"] == bf16["metric"] == "clip_s"
    assert default["provenance"]["dtype"] == "float32" and bf16["provenance"]["dtype"] == "bfloat16"
    assert default["hashcode"] == capeval.load_scorer("clip_s", device="cpu").hashcode != bf16["hashcode"]


def test_merge_refuses_shards_scored_in_another_dtype(tiny_hub, tmp_path, capsys):
    names = _images(tmp_path)
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps({"image": names[i % 3], "caption": f"caption {i}"})
                                                 for i in range(4)))
    base = ["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path), "--device", "cpu"]
    assert main(base + ["--shard", "0/2", "--output", str(tmp_path / "s0.jsonl")]) == 0
    assert main(base + ["--shard", "1/2", "--output", str(tmp_path / "s1.jsonl"), "--dtype", "bfloat16"]) == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "s0.jsonl"), str(tmp_path / "s1.jsonl"),
                 "--output", str(tmp_path / "merged.jsonl")]) == 2
    assert "scored with different weights or options" in capsys.readouterr().err
    assert not (tmp_path / "merged.jsonl").exists()


def test_field_mapping_scores_benchmark_parquet_datasets_and_coco_results_like_plain_records(tiny_hub, tmp_path,
                                                                                               capsys):
    names = _images(tmp_path)
    captions = ["a dog", "a red car", "two people"]
    refs = [["a dog running"], ["a car"], ["people walking", "two persons"]]
    plain = tmp_path / "plain.jsonl"
    plain.write_text("\n".join(json.dumps({"image": n, "caption": c, "references": r})
                               for n, c, r in zip(names, captions, refs)))
    common = ["--images", str(tmp_path), "--device", "cpu"]

    def rows(*args):
        out = tmp_path / "out.jsonl"
        assert main(["score", "clip_s", *args, *common, "--output", str(out)]) == 0
        capsys.readouterr()
        return [json.loads(line)["scores"] for line in out.read_text().splitlines()]

    expected = rows("--input", str(plain))
    # capeval's own benchmark parquet layout: image, candidate, references
    pd.DataFrame({"image": names, "candidate": captions, "references": refs}).to_parquet(tmp_path / "bench.parquet")
    assert rows("--input", str(tmp_path / "bench.parquet"), "--caption-field", "candidate") == expected
    # a datasets folder with image/text/refs columns
    datasets.Dataset.from_dict({"file": names, "text": captions, "refs": refs}).save_to_disk(str(tmp_path / "ds"))
    assert rows("--input", str(tmp_path / "ds"), "--caption-field", "text", "--image-field", "file",
                "--references-field", "refs") == expected
    # COCO-style results: [{"image_id", "caption"}], image paths built from the id
    (tmp_path / "results.json").write_text(json.dumps([{"image_id": i, "caption": c} for i, c in enumerate(captions)]))
    without_refs = [{k: v for k, v in row.items() if not k.startswith("ref")} for row in expected]
    assert rows("--input", str(tmp_path / "results.json"), "--image-format", "{image_id}.png") == without_refs


def test_field_mapping_errors_name_the_record_and_the_field(tiny_hub, tmp_path, capsys):
    names = _images(tmp_path)
    (tmp_path / "in.jsonl").write_text("\n".join([json.dumps({"image": names[0], "text": "a dog"}),
                                                  json.dumps({"image": names[1], "caption": "a cat"})]))
    base = ["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path), "--device", "cpu"]
    assert main(base + ["--caption-field", "text"]) == 2
    assert "record 1: no 'text' field (clip_s needs caption)" in capsys.readouterr().err
    (tmp_path / "in.jsonl").write_text(json.dumps({"image": names[0], "caption": "a dog"}))
    assert main(base + ["--image-format", "{image_id}.png"]) == 2
    assert "record 0: --image-format '{image_id}.png' does not apply to its fields" in capsys.readouterr().err


def test_benchmark_json_prints_one_line_and_the_default_stays_indented(tmp_path, capsys):
    thumb = tmp_path / "thumb"
    thumb.mkdir()
    rows = [("1", "a dog runs on grass", 4.0), ("1", "a cat", 1.0), ("2", "a red car parked", 3.5),
            ("2", "a blue boat", 1.5)]
    refs = {"1": ["a dog running on the grass"], "2": ["a red car parked on the street"]}
    (thumb / "THumB-1.0.jsonl").write_text("\n".join(
        json.dumps({"seg_id": s, "hyp": h, "image": f"{s}.jpg", "human_score": y}) for s, h, y in rows))
    (thumb / "references.json").write_text("\n".join(json.dumps({"seg_id": s, "refs": r}) for s, r in refs.items()))
    args = ["benchmark", "BLEU-1", "thumb", "--data-dir", str(tmp_path), "--resamples", "10"]
    assert main(args + ["--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    one_line = json.loads(out)
    assert main(args) == 0
    indented = capsys.readouterr().out
    assert indented.count("\n") > 5 and json.loads(indented) == one_line
    assert one_line["hashcode"] == capeval.load_scorer("bleu").hashcode


def test_precision_official_from_the_command_line_equals_the_python_api(tiny_hub, tmp_path, capsys):
    names = _images(tmp_path)
    captions = [f"caption {i}" for i in range(3)]
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps({"image": n, "caption": c}) for n, c in zip(names, captions)))
    base = ["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path), "--device", "cpu",
            "--output", str(tmp_path / "out.jsonl")]
    assert main(base + ["--precision", "official"]) == 0
    summary = _summary(capsys)
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    api = capeval.load_scorer("clip_s", device="cpu", precision="official")
    expected = api.score(captions, [str(tmp_path / n) for n in names])
    assert [row["scores"]["clip_s"] for row in rows] == expected["clip_s_per_sample"]
    assert summary["hashcode"] == api.hashcode != capeval.load_scorer("clip_s", device="cpu").hashcode
    assert summary["provenance"]["options"]["precision"] == "official"
    assert main(["score", "bleu", "--input", str(tmp_path / "in.jsonl"), "--precision", "official"]) == 2
    assert "unknown option(s) ['precision']" in capsys.readouterr().err
