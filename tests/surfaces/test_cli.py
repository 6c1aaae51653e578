import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import capeval
import numpy as np
import pytest
import torch
from capeval.cli import build_parser, main
from PIL import Image


def test_score_jsonl_writes_per_sample_scores(tiny_hub, tmp_path, capsys):
    Image.new("RGB", (20, 10), "blue").save(tmp_path / "a.png")
    Image.new("RGB", (10, 20), "red").save(tmp_path / "b.png")
    records = [{"image": "a.png", "caption": "blue", "references": ["a blue image"]},
               {"image": "b.png", "caption": "red", "references": ["red", "a red picture"]}]
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    code = main(["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path),
                 "--output", str(tmp_path / "out.jsonl"), "--device", "cpu"])
    assert code == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    summary = json.loads(capsys.readouterr().out)
    assert [r["caption"] for r in rows] == ["blue", "red"]
    assert [r["index"] for r in rows] == [0, 1]
    assert summary["clip_s"] == pytest.approx(np.mean([r["scores"]["clip_s"] for r in rows]))
    assert summary["refclip_s"] == pytest.approx(np.mean([r["scores"]["refclip_s"] for r in rows]))


def _score_file(tmp_path, n):
    rng = np.random.default_rng(0)
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    lines = [json.dumps({"image": f"{i % 4}.png", "caption": f"caption {i}", "references": [f"ref {i}", "ref"]})
             for i in range(n)]
    (tmp_path / "in.jsonl").write_text("\n".join(lines))
    return ["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path), "--device", "cpu"]


def test_shards_and_merge_equal_single_run_and_a_lost_shard_can_be_rerun(tiny_hub, tmp_path, capsys):
    base = _score_file(tmp_path, 11)
    assert main(base + ["--output", str(tmp_path / "single.jsonl")]) == 0
    single_summary = json.loads(capsys.readouterr().out)
    for i in range(3):
        assert main(base + ["--shard", f"{i}/3", "--chunk-size", "2", "--output", str(tmp_path / f"s{i}.jsonl")]) == 0
    capsys.readouterr()
    (tmp_path / "s1.jsonl").write_text("")  # a killed shard ...
    shards = [str(tmp_path / f"s{i}.jsonl") for i in range(3)]
    assert main(["merge", *shards, "--output", str(tmp_path / "merged.jsonl")]) == 2
    assert "missing" in capsys.readouterr().err
    assert main(base + ["--shard", "1/3", "--output", shards[1]]) == 0  # ... is re-run alone
    capsys.readouterr()
    assert main(["merge", *shards, "--output", str(tmp_path / "merged.jsonl")]) == 0
    merged_summary = json.loads(capsys.readouterr().out)
    single = [json.loads(x) for x in (tmp_path / "single.jsonl").read_text().splitlines()]
    merged = [json.loads(x) for x in (tmp_path / "merged.jsonl").read_text().splitlines()]
    assert [r["index"] for r in merged] == list(range(11))
    for a, b in zip(single, merged):
        assert a["caption"] == b["caption"]
        for key in ("clip_s", "refclip_s"):
            assert b["scores"][key] == pytest.approx(a["scores"][key], abs=1e-5)
    assert merged_summary["clip_s"] == pytest.approx(single_summary["clip_s"], abs=1e-6)
    assert main(["merge", shards[0], shards[0], "--output", str(tmp_path / "m.jsonl")]) == 2
    assert "more than one shard" in capsys.readouterr().err


def test_merge_refuses_shards_of_an_edited_input_or_of_another_metric_or_weights(tiny_hub, tmp_path, capsys):
    """Every shard row carries a stamp of its run: a fingerprint of the whole input (the same in every shard), the
    metric, the scorer's hashcode (weights, options that change scores) and the field mapping. A shard re-scored after
    the input was edited, or scored with another metric or weights, is refused by name; shards of one run merge to
    the one-process rows, without the stamps."""
    base = _score_file(tmp_path, 7)
    source = tmp_path / "in.jsonl"
    original = source.read_text()
    assert main(base + ["--output", str(tmp_path / "single.jsonl")]) == 0
    shards = [str(tmp_path / f"s{i}.jsonl") for i in range(2)]
    merged_path = str(tmp_path / "merged.jsonl")
    for i in range(2):
        assert main(base + ["--shard", f"{i}/2", "--chunk-size", "2", "--output", shards[i]]) == 0
    capsys.readouterr()
    # the fingerprint, computed here independently: sha256 over each record's sorted-key JSON line, in input order
    records = [json.loads(line) for line in original.splitlines()]
    digest = hashlib.sha256("".join(json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
                                    for r in records).encode("utf-8")).hexdigest()[:16]
    fields = {"caption field": "caption", "empty captions": "score", "references field": "references",
              "image field": "image", "images folder": str(tmp_path.resolve())}
    hashcode = capeval.load_scorer("clip_s", device="cpu").hashcode
    stamp = {"input": digest, "records": 7, "metric": "clip_s", "hashcode": hashcode, "fields": fields}
    rows = [json.loads(line) for path in shards for line in Path(path).read_text().splitlines()]
    assert [r["shard_of"] for r in rows] == [stamp] * 7

    def merge_error():
        assert main(["merge", *shards, "--output", merged_path]) == 2
        err = capsys.readouterr().err
        assert err.startswith("capeval merge: error: ") and err.count("\n") == 1, err
        return err

    # record 2 (shard 0) is edited and only shard 1 is scored again: shard 0 holds the old caption and its score
    edited = [{**r, "caption": "an edited caption"} if i == 2 else r for i, r in enumerate(records)]
    source.write_text("\n".join(json.dumps(r) for r in edited))
    assert main(base + ["--shard", "1/2", "--output", shards[1]]) == 0
    capsys.readouterr()
    err = merge_error()
    assert f"{shards[0]} and {shards[1]} come from different runs" in err
    assert f"input fingerprint {digest} of 7 records vs " in err
    assert not Path(merged_path).exists()
    source.write_text(original)  # the input as it was: the re-scored shard matches again (whatever its chunk size)
    assert main(base + ["--shard", "1/2", "--output", shards[1]]) == 0
    capsys.readouterr()
    assert main(["merge", *shards, "--output", merged_path]) == 0
    merged_summary = json.loads(capsys.readouterr().out)
    single = [json.loads(line) for line in (tmp_path / "single.jsonl").read_text().splitlines()]
    merged = [json.loads(line) for line in Path(merged_path).read_text().splitlines()]
    assert [{k: v for k, v in r.items() if k != "scores"} for r in merged] == \
        [{k: v for k, v in r.items() if k != "scores"} for r in single]  # no shard tags or stamps left
    for a, b in zip(single, merged):
        assert b["scores"].keys() == a["scores"].keys()
        for key in a["scores"]:
            assert b["scores"][key] == pytest.approx(a["scores"][key], abs=1e-5)
    assert merged_summary["n"] == 7
    # another metric, or other weights, for one shard
    assert main(base[:1] + ["pac_s"] + base[2:] + ["--shard", "1/2", "--output", shards[1]]) == 0
    capsys.readouterr()
    assert "metric clip_s vs pac_s" in merge_error()
    assert main(base + ["--weights", "pacs-clip-vit-b-32", "--shard", "1/2", "--output", shards[1]]) == 0
    capsys.readouterr()
    other = capeval.load_scorer("clip_s", device="cpu", weights="pacs-clip-vit-b-32").hashcode
    assert f"hashcode {hashcode} vs {other} (scored with different weights or options)" in merge_error()
    # a shard file that lost its last row (record 6 of 7): the stamp knows the input has 7 records
    assert main(base + ["--shard", "1/2", "--output", shards[1]]) == 0
    capsys.readouterr()
    lines = Path(shards[0]).read_text().splitlines()
    assert json.loads(lines[-1])["index"] == 6
    Path(shards[0]).write_text("\n".join(lines[:-1]) + "\n")
    assert "1 records are missing (first: [6])" in merge_error()
    Path(shards[0]).write_text("\n".join(lines) + "\n")
    # shard rows without a stamp cannot be checked: refused; unsharded outputs merge as before
    Path(shards[1]).write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if k != "shard_of"}) + "\n"
                                       for line in Path(shards[1]).read_text().splitlines()))
    assert f"{shards[1]}: record 1 of shard 1/2 carries no 'shard_of' stamp" in merge_error()
    assert main(["merge", str(tmp_path / "single.jsonl"), "--output", merged_path]) == 0
    assert [json.loads(line) for line in Path(merged_path).read_text().splitlines()] == single


def test_score_csv_input(tiny_hub, tmp_path, capsys):
    Image.new("RGB", (20, 10)).save(tmp_path / "a.png")
    (tmp_path / "in.csv").write_text('image,caption,references\na.png,a dark image,"[""black"", ""dark""]"\n')
    assert main(["score", "clip_s", "--input", str(tmp_path / "in.csv"), "--images", str(tmp_path), "--device", "cpu"]) == 0
    assert "refclip_s" in json.loads(capsys.readouterr().out)


def test_bad_input_exits_nonzero_with_message(tiny_hub, tmp_path, capsys):
    (tmp_path / "in.jsonl").write_text(json.dumps({"image": "missing.png", "caption": "x"}) + "\n")
    assert main(["score", "clip_s", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path)]) == 2
    assert "image file not found" in capsys.readouterr().err
    assert main(["score", "clip_s", "--input", str(tmp_path / "nope.jsonl")]) == 2
    assert "input file not found" in capsys.readouterr().err


def test_convert_pac_s_from_fabricated_official_checkpoint(tiny_hub, tmp_path):
    from capeval.backbones.clip import ClipBackbone, build_clip
    from capeval.testing import tiny_clip_factory

    tiny_clip_factory(seed=7)(tmp_path / "src")
    cfg = json.loads((tmp_path / "src" / "open_clip_config.json").read_text())["model_cfg"]
    torch.manual_seed(7)
    model = build_clip(cfg)
    # the official file: {"state_dict": OpenAI-format CLIP}, partly fp16, with DataParallel "module." keys
    state = {f"module.{k}": (v.half() if k.endswith("weight") and v.ndim == 2 else v) for k, v in model.state_dict().items()}
    torch.save({"state_dict": state, "epoch": 3}, tmp_path / "clip_ViT-B-32.pth")
    assert main(["convert", "pac-s", str(tmp_path / "clip_ViT-B-32.pth"), "--output", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "README.md").exists()
    converted = ClipBackbone(str(tmp_path / "out"), device="cpu")
    expected = model.float()
    with torch.no_grad():
        for k, v in model.state_dict().items():
            if k.endswith("weight") and v.ndim == 2:
                v.copy_(v.half().float())  # the fabricated file stored these in fp16
        tokens = converted.tokenize(["A photo depicts a dog"])
        np.testing.assert_allclose(converted.encode_texts(["A photo depicts a dog"]).numpy(),
                                   expected.encode_text(tokens).numpy(), atol=1e-5)


def test_convert_refuses_pickled_objects(tmp_path, capsys):
    import os

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    import pickle

    with open(tmp_path / "evil.pth", "wb") as f:
        pickle.dump({"state_dict": Evil()}, f)
    assert main(["convert", "pac-s", str(tmp_path / "evil.pth"), "--output", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("capeval convert: error: ")  # one line, no traceback
    assert re.search("(?i)weights.only|unsupported|global", error) and "evil.pth" in error
    assert not (tmp_path / "out").exists()


def test_top_level_help_and_version_import_no_model_code():
    """`capeval --help` / `--version` import only the parser: no torch, no registrations (the <1 s target is a
    benchmark figure in the README, not a timed test)."""
    probe = ("import sys\nfrom capeval.cli import main\nfor argv in (['--help'], ['--version']):\n"
             "    try:\n        main(argv)\n    except SystemExit as exc:\n        assert exc.code == 0\n"
             "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'open_clip', "
             "'scipy', 'numpy') or m.startswith('capeval.core.scoring'))\nprint('HEAVY', heavy)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "usage: capeval" in out.stdout and f"capeval {capeval.__version__}" in out.stdout
    assert "HEAVY []" in out.stdout, out.stdout


def test_every_subcommand_has_help(capsys):
    """Every command's ``--help`` through ``main`` in this process (the path of the console script, which builds
    only that command's parser), and one through ``python -m capeval.cli`` in a fresh interpreter."""
    parser = build_parser("*")
    commands = parser._subparsers._group_actions[0].choices
    assert {"score", "merge", "convert", "push", "publish-spaces", "train", "throughput",
            "install-modules"} <= set(commands)
    for name in commands:
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        out = capsys.readouterr().out
        assert exit_.value.code == 0 and out.startswith(f"usage: capeval {name}"), name
    out = subprocess.run([sys.executable, "-m", "capeval.cli", "score", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "usage: capeval score" in out.stdout, out.stderr


def test_push_uploads_the_folder_and_prints_the_revision_to_pin(tmp_path, monkeypatch, capsys):
    import huggingface_hub

    calls = {}

    class FakeApi:
        def __init__(self, library_name=None, **_):
            calls["library_name"] = library_name

        def create_repo(self, repo_id, **kwargs):
            calls["create"] = (repo_id, kwargs)

        def upload_folder(self, folder_path, repo_id, **kwargs):
            calls["upload"] = (folder_path, repo_id)
            return type("CommitInfo", (), {"oid": "a" * 40})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    (tmp_path / "art").mkdir()
    assert main(["push", str(tmp_path / "art"), "capeval/x"]) == 0
    assert calls["library_name"] == "capeval" and calls["upload"] == (str(tmp_path / "art"), "capeval/x")
    assert "pin revision " + "a" * 40 in capsys.readouterr().out
    assert main(["push", str(tmp_path / "nope"), "capeval/x"]) == 2


def test_publish_spaces_pushes_each_module_folder_as_a_gradio_space(monkeypatch, capsys, source_tree_lock):
    import huggingface_hub

    pushed = []

    class FakeApi:
        def __init__(self, library_name=None, **_):
            assert library_name == "capeval"

        def create_repo(self, repo_id, repo_type=None, space_sdk=None, **_):
            assert (repo_type, space_sdk) == ("space", "gradio")

        def upload_folder(self, folder_path, repo_id, repo_type=None, **_):
            pushed.append((repo_id, sorted(p.name for p in __import__("pathlib").Path(folder_path).iterdir())))
            return type("CommitInfo", (), {"oid": "b" * 40})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    with source_tree_lock:  # the wheel is built in the checkout
        assert main(["publish-spaces", "--org", "me", "--modules", "clip_s", "pac_s"]) == 0
    assert [repo for repo, _ in pushed] == ["me/clip_s", "me/pac_s"]
    assert {"app.py", "README.md", "clip_s.py", "requirements.txt"} <= set(pushed[0][1])
    assert main(["publish-spaces", "--modules", "nope"]) == 2


def test_score_parquet_and_datasets_inputs_equal_jsonl(tiny_hub, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    import datasets

    rows = []
    for k, colour in enumerate(["red", "navy", "olive"]):
        Image.new("RGB", (20, 12), colour).save(tmp_path / f"{k}.png")
        rows.append({"image": f"{k}.png", "caption": f"a {colour} image", "references": [colour, "a picture"]})
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet", row_group_size=1)
    with_images = [{**r, "image": str(tmp_path / r["image"])} for r in rows]
    ds = datasets.Dataset.from_list(with_images).cast_column("image", datasets.Image())
    ds.save_to_disk(str(tmp_path / "ds"))

    def run(path, *extra):
        out = tmp_path / f"out-{Path(path).name}.jsonl"
        assert main(["score", "clip_s", "--input", str(path), *extra, "--device", "cpu", "--output", str(out)]) == 0
        capsys.readouterr()
        return [json.loads(line)["scores"] for line in out.read_text().splitlines()]

    expected = run(tmp_path / "in.jsonl", "--images", str(tmp_path))
    assert run(tmp_path / "in.parquet", "--images", str(tmp_path)) == expected
    from_dataset = run(tmp_path / "ds")
    for a, b in zip(from_dataset, expected):
        assert a["clip_s"] == pytest.approx(b["clip_s"], abs=1e-6)
    # parquet is read in row batches of --chunk-size rows, not materialised at once
    seen = []
    original = pq.ParquetFile.iter_batches
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pq.ParquetFile, "iter_batches",
                      lambda self, **kw: (seen.append(kw["batch_size"]) or b for b in original(self, **kw)))
        assert run(tmp_path / "in.parquet", "--images", str(tmp_path), "--chunk-size", "2") == expected
    assert seen == [2, 2]


def test_score_a_streamed_data_folder_standing_in_for_a_hub_dataset(tiny_hub, tmp_path, capsys, monkeypatch):
    """``--input`` names a folder of data files (what a hub dataset id resolves to), opened with
    ``datasets.load_dataset(folder, streaming=True)``; ``--split`` picks the split; shards merge to the single run."""
    import datasets

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    opened = []
    real_load = datasets.load_dataset
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **kw: opened.append((a, kw)) or real_load(*a, **kw))
    base = _score_file(tmp_path, 7)
    records = [json.loads(line) for line in (tmp_path / "in.jsonl").read_text().splitlines()]
    folder = tmp_path / "hub_dataset" / "data"
    folder.mkdir(parents=True)
    # two splits, written as a hub repo lays them out: data/<split>-*.jsonl
    (folder / "test-00000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "train-00000.jsonl").write_text(json.dumps({**records[0], "caption": "another split"}) + "\n")
    hub_like = str(tmp_path / "hub_dataset")
    assert main(base + ["--output", str(tmp_path / "single.jsonl")]) == 0  # the JSONL file itself
    capsys.readouterr()
    for i in range(3):
        args = [a if a != str(tmp_path / "in.jsonl") else hub_like for a in base]
        assert main(args + ["--split", "test", "--shard", f"{i}/3", "--output", str(tmp_path / f"s{i}.jsonl")]) == 0
    assert opened and all(kw.get("streaming") is True and kw.get("split") == "test" for _, kw in opened)
    capsys.readouterr()
    assert main(["merge", *(str(tmp_path / f"s{i}.jsonl") for i in range(3)), "--output",
                 str(tmp_path / "merged.jsonl")]) == 0
    single = [json.loads(x) for x in (tmp_path / "single.jsonl").read_text().splitlines()]
    merged = [json.loads(x) for x in (tmp_path / "merged.jsonl").read_text().splitlines()]
    assert [r["caption"] for r in merged] == [r["caption"] for r in records]
    for a, b in zip(single, merged):
        assert b["scores"]["clip_s"] == pytest.approx(a["scores"]["clip_s"], abs=1e-5)
    capsys.readouterr()
    hub_args = [a if a != str(tmp_path / "in.jsonl") else hub_like for a in base]
    assert main(hub_args) == 2  # two splits and no --split
    err = capsys.readouterr().err
    assert "holds the splits ['train', 'test']" in err and "--split" in err
    assert main(hub_args + ["--split", "validation"]) == 2
    assert "validation" in capsys.readouterr().err
    assert main(base + ["--split", "test"]) == 2  # a single file has no splits
    assert "single file" in capsys.readouterr().err
    assert main(hub_args[:3] + ["nobody/missing-dataset"] + hub_args[4:]) == 2  # offline: a clear error, no traceback
    assert "cannot open 'nobody/missing-dataset'" in capsys.readouterr().err


def test_merge_refuses_a_missing_last_shard_and_a_failed_shard_leaves_no_output(tiny_hub, tmp_path, capsys):
    base = _score_file(tmp_path, 2)  # shard 1/2 holds only the last record: its loss must not go unnoticed
    assert main(base + ["--shard", "0/2", "--output", str(tmp_path / "s0.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "s0.jsonl").read_text().splitlines()]
    assert [(r["index"], r["shard"]) for r in rows] == [(0, "0/2")]
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "s0.jsonl"), "--output", str(tmp_path / "m.jsonl")]) == 2
    assert "shard(s) 1/2 are missing" in capsys.readouterr().err
    assert main(base + ["--shard", "1/3", "--output", str(tmp_path / "t1.jsonl")]) == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "s0.jsonl"), str(tmp_path / "t1.jsonl"), "--output", "m.jsonl"]) == 2
    assert "cut in different ways" in capsys.readouterr().err
    assert main(base + ["--shard", "1/2", "--output", str(tmp_path / "s1.jsonl")]) == 0
    assert main(["merge", str(tmp_path / "s0.jsonl"), str(tmp_path / "s1.jsonl"),
                 "--output", str(tmp_path / "m.jsonl")]) == 0
    merged = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["index"] for r in merged] == [0, 1] and all("shard" not in r for r in merged)
    # a shard that fails half-way writes nothing under its output name (no partial file to merge by mistake)
    good = json.dumps({"image": "0.png", "caption": "fine", "references": ["y"]})  # record 2: shard 0/2
    bad = json.dumps({"image": "gone.png", "caption": "x", "references": ["y"]})  # record 3: shard 1/2, after record 1
    (tmp_path / "in.jsonl").write_text((tmp_path / "in.jsonl").read_text() + f"\n{good}\n{bad}\n")
    (tmp_path / "s1.jsonl").unlink()
    assert main(base + ["--shard", "1/2", "--chunk-size", "1", "--output", str(tmp_path / "s1.jsonl")]) == 2
    assert "image file not found" in capsys.readouterr().err
    assert not (tmp_path / "s1.jsonl").exists() and not (tmp_path / "s1.jsonl.partial").exists()
