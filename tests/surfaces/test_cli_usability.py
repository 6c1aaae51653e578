"""The command line as a person meets it: one spelling per metric with the usual others accepted, --dtype, field
mapping for other datasets' layouts, one-line JSON from `capeval benchmark --json`, and the hashcode of every run."""

import json
import subprocess
import sys

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
    takers = sorted(name for name, spec in capeval.core.scoring.scorers().items() if "precision" in spec.options)
    assert "clip_s" in takers and "bleu" not in takers
    assert f"--precision applies to {', '.join(takers)}, not bleu" in capsys.readouterr().err


def _scores(tmp_path, capsys, *args):
    out = tmp_path / "out.jsonl"
    assert main(["score", *args, "--output", str(out)]) == 0
    capsys.readouterr()
    return [json.loads(line)["scores"] for line in out.read_text().splitlines()]


def test_csv_references_through_a_mapped_field_score_like_jsonl(tiny_hub, tmp_path, capsys):
    """A CSV list cell of the field mapped with --references-field is a reference list, as in JSONL (it was scored
    as one reference string)."""
    names = _images(tmp_path)
    rows = [{"image": n, "caption": f"caption {i}", "gt": [f"reference {i} a", f"another reference {i}"]}
            for i, n in enumerate(names)]
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    pd.DataFrame([{**r, "gt": json.dumps(r["gt"])} for r in rows]).to_csv(tmp_path / "in.csv", index=False)
    common = ["clip_s", "--images", str(tmp_path), "--device", "cpu", "--references-field", "gt"]
    expected = _scores(tmp_path, capsys, "--input", str(tmp_path / "in.jsonl"), *common)
    assert all("refclip_s" in row for row in expected)
    assert _scores(tmp_path, capsys, "--input", str(tmp_path / "in.csv"), *common) == expected


def test_null_fields_and_image_dicts_of_the_wrong_type_are_one_line_errors_naming_the_record(tiny_hub, tmp_path,
                                                                                           capsys):
    names = _images(tmp_path)
    path = tmp_path / "in.jsonl"
    base = ["score", "clip_s", "--input", str(path), "--images", str(tmp_path), "--device", "cpu"]
    path.write_text("\n".join([json.dumps({"image": names[0], "caption": "a dog"}),
                               json.dumps({"image": names[1], "caption": None})]))
    assert main(base) == 2
    assert capsys.readouterr().err == "capeval score: error: record 1: 'caption' is null (clip_s needs caption)\n"
    path.write_text("\n".join([json.dumps({"image": names[0], "caption": "a dog"}),
                               json.dumps({"image": {"path": 7}, "caption": "a cat"})]))
    assert main(base) == 2
    assert capsys.readouterr().err == ("capeval score: error: images[1]: image dict 'path' is an int (7), expected a "
                                       "file path\n")


def test_a_references_look_alike_field_is_warned_about_once_or_hinted_in_the_error(tiny_hub, tmp_path, capsys):
    names = _images(tmp_path)
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps({"image": n, "caption": f"caption {i}", "refs": ["a ref"]})
                                                 for i, n in enumerate(names)))
    base = ["--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path), "--device", "cpu"]
    with pytest.warns(UserWarning) as caught:
        assert main(["score", "clip_s", *base, "--chunk-size", "1"]) == 0
    assert "refclip_s" not in _summary(capsys)
    mapping = [str(w.message) for w in caught if "references are read from" in str(w.message)]
    assert mapping == ["record 0 has field 'refs' but references are read from 'references' (--references-field): "
                       "clip_s scores without references"]
    assert main(["score", "bleu", *base]) == 2
    assert capsys.readouterr().err == ("capeval score: error: record 0: no 'references' field (bleu needs references); "
                                       "it has 'refs': map it with --references-field refs\n")


def _forbid_model_loading(monkeypatch):
    import capeval.core.scoring

    def refuse(*args, **kwargs):
        raise AssertionError("a model loaded before the options were checked")

    monkeypatch.setattr(capeval.core.scoring, "load_scorer", refuse)


def _usage_error(argv, capsys) -> str:
    """The one line a usage error prints (exit 2)."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("option, message", [
    (["--output", "{dir}"], "argument --output: {dir} is a directory"),
    (["--output", "{dir}/missing/out.jsonl"], "argument --output: cannot write {dir}/missing/out.jsonl: folder "),
    (["--dtype", "float64"], "argument --dtype: unsupported dtype 'float64'"),
    (["--batch-size", "0"], "argument --batch-size: must be a positive integer, not 0"),
    (["--chunk-size", "0"], "argument --chunk-size: must be a positive integer, not 0"),
    (["--device", "gpu0"], "argument --device: unknown device 'gpu0'"),
    (["--device", "cuda:64"], "argument --device: cuda:64: ")])
def test_score_options_are_checked_before_any_model_loads(option, message, tmp_path, capsys, monkeypatch):
    _forbid_model_loading(monkeypatch)
    (tmp_path / "in.jsonl").write_text(json.dumps({"caption": "a dog", "references": ["a dog"]}))
    option = [part.format(dir=tmp_path) for part in option]
    err = _usage_error(["score", "bleu", "--input", str(tmp_path / "in.jsonl"), *option], capsys)
    assert err.startswith(f"capeval score: error: {message.format(dir=tmp_path)}")
    assert not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("argv", [
    ["throughput", "--batch-size", "0"], ["throughput", "--dtype", "float64"], ["throughput", "--device", "cuda:64"],
    ["throughput", "--images", "0"], ["benchmark", "bleu", "thumb", "--batch-size", "0"],
    ["benchmark", "bleu", "thumb", "--resamples", "-1"], ["leaderboard", "--device", "gpu0"],
    ["leaderboard", "--resamples", "-1"],
    ["ray-score", "clip_s", "--input", "in.parquet", "--output", "out", "--batch-size", "0"],
    ["train", "polos", "--train", "t.csv", "--val", "v.csv", "--output", "out", "--device", "cuda:64"],
    ["train", "polos-features", "--data", "t.csv", "--output", "out", "--batch-size", "-1"]])
def test_every_command_checks_device_dtype_and_batch_size_alike(argv, capsys, monkeypatch):
    _forbid_model_loading(monkeypatch)
    err = _usage_error(argv, capsys)
    command = " ".join(argv[:2] if argv[0] == "train" else argv[:1])
    assert err.startswith(f"capeval {command}: error: argument --")


def test_output_piped_into_a_reader_that_stops_early_ends_quietly():
    """`capeval weights | head`: the reader is gone before the command writes; no BrokenPipeError traceback."""
    process = subprocess.Popen([sys.executable, "-m", "capeval.cli", "weights"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.close()  # the reader stops at once
    with process.stderr:
        err = process.stderr.read().decode()
    assert process.wait() == 141 and err == ""  # the status of a Unix tool stopped by SIGPIPE, silently
