"""Ray Data integration on a local 2-CPU Ray (one for the test session) and tiny random weights: the Ray path
equals the single-process path row for row, survives a killed worker, handles bad rows as documented, and its
two-pass corpus CIDEr-D equals pycocoevalcap's whole-corpus CIDEr-D."""

import io
import json
import os
import sys

import numpy as np
import pytest
from PIL import Image

ray = pytest.importorskip("ray")
import ray.data  # noqa: E402

from capeval.cli import main  # noqa: E402
from capeval.core.errors import InputError  # noqa: E402
from capeval.core.scoring import load_scorer  # noqa: E402
from capeval.integrations import ray as ray_integration  # noqa: E402
from capeval.integrations.ray import ERROR_COLUMN, RayScorer, score_dataset  # noqa: E402

WORDS = ("a", "the", "dog", "cat", "man", "woman", "red", "blue", "ball", "runs", "sits", "on", "grass", "table",
         "two", "small", "big", "with", "near", "water", "plays", "holding", "street", "bike")


@pytest.fixture(scope="module")
def local_ray(ray_session):
    """The session's local Ray (tests/surfaces/conftest.py), able to run this module's classes."""
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module


def _png(seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (20, 24, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def _sentence(rng) -> str:
    return " ".join(rng.choice(WORDS, size=int(rng.integers(3, 9))))


def _rows(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [{"index": i, "caption": _sentence(rng), "image": _png(i),
             "references": [_sentence(rng) for _ in range(int(rng.integers(1, 4)))]} for i in range(n)]


def _single_process(metric, rows, **options):
    """The single-process scores of ``rows`` (the scorer's ``score`` over the whole input)."""
    images = [{"bytes": r["image"], "path": None} for r in rows] if "image" in rows[0] else None
    return load_scorer(metric, **options).score([r["caption"] for r in rows], images=images,
                                                references=[r["references"] for r in rows])


def _by_index(rows):
    indices = [r["index"] for r in rows]
    assert sorted(indices) == list(range(len(rows))), "every row exactly once"
    return sorted(rows, key=lambda r: r["index"])


def test_ray_scores_equal_single_process_row_for_row_in_any_block_order(local_ray):
    rows = _rows(24)
    expected = _single_process("clip_s", rows, device="cpu")
    for seed in (1, 2):
        ds = ray.data.from_items(rows, override_num_blocks=6).randomize_block_order(seed=seed)
        out = _by_index(score_dataset(ds, "clip_s", options={"device": "cpu"}, concurrency=2, batch_size=5)
                        .take_all())
        for key in ("clip_s", "refclip_s"):
            assert [r[key] for r in out] == pytest.approx(expected[f"{key}_per_sample"], abs=1e-6)
        assert [r["caption"] for r in out] == [r["caption"] for r in rows]  # input columns kept
        assert [r.get("hashcode") for r in out] == [expected.get("hashcode")] * len(rows)  # provenance, when given


def test_ray_score_command_equals_capeval_score(local_ray, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _rows(10, seed=3)
    records = [{"caption": r["caption"], "image": {"bytes": r["image"], "path": f"{r['index']}.png"},
                "references": r["references"]} for r in rows]  # a datasets.Image-style struct column
    pq.write_table(pa.Table.from_pylist(records),
                   tmp_path / "in.parquet", row_group_size=4)
    assert main(["score", "clip_s", "--input", str(tmp_path / "in.parquet"), "--device", "cpu",
                 "--output", str(tmp_path / "single.jsonl")]) == 0
    single_summary = json.loads(capsys.readouterr().out)
    single = [json.loads(line) for line in (tmp_path / "single.jsonl").read_text().splitlines()]
    assert main(["ray-score", "clip_s", "--input", str(tmp_path / "in.parquet"), "--output", str(tmp_path / "out"),
                 "--device", "cpu", "--concurrency", "2", "--num-cpus", "0.5", "--batch-size", "3", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)  # --json: Ray Data's own printing goes to stderr
    out = _by_index(pq.read_table(tmp_path / "out").to_pylist())  # the command numbered the rows in input order
    for key in ("clip_s", "refclip_s"):
        assert [r[key] for r in out] == pytest.approx([r["scores"][key] for r in single], abs=1e-6)
        assert summary[key] == pytest.approx(single_summary[key], abs=1e-6)
    assert summary["n"] == single_summary["n"] == 10
    assert main(["ray-score", "clip_s", "--input", str(tmp_path / "in.parquet"), "--output", str(tmp_path / "o2"),
                 "--concurrency", "2"]) == 2  # 2 actors x 1 CPU would leave Ray Data no CPU to read on
    assert "leave none to read and write" in capsys.readouterr().err


class DiesOnce(RayScorer):
    """RayScorer whose process dies (as on a lost node) the first time it gets the batch holding row 9."""

    marker = ""

    def __call__(self, batch):
        if 9 in batch.column("index").to_pylist() and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)
        return super().__call__(batch)


def test_a_killed_worker_is_retried_and_every_row_is_written_once(local_ray, tmp_path, monkeypatch):
    rows = _rows(20, seed=4)
    DiesOnce.marker = str(tmp_path / "died")
    monkeypatch.setattr(ray_integration, "RayScorer", DiesOnce)
    ds = ray.data.from_items(rows, override_num_blocks=5)
    out = _by_index(score_dataset(ds, "clip_s", options={"device": "cpu"}, concurrency=2, batch_size=4).take_all())
    assert os.path.exists(DiesOnce.marker), "the worker did die"
    expected = _single_process("clip_s", rows, device="cpu")
    assert [r["clip_s"] for r in out] == pytest.approx(expected["clip_s_per_sample"], abs=1e-6)


def _bad_rows():
    rows = _rows(12, seed=5)
    rows[3]["caption"] = "   "
    rows[7]["image"] = b"not an image"
    return rows


EXPECTED_ERRORS = {3: "predictions[3] is an empty caption: clip_s does not score empty captions; empty_caption='skip' "
                      "(--empty-caption skip) leaves them unscored, or a finite score stands for them, or give every "
                      "image a caption",
                   7: "images[7]: corrupt or unreadable image: not an image (no image format recognised) (bytes)"}


def test_bad_rows_go_to_the_error_column_with_the_input_error_text(local_ray):
    rows = _bad_rows()
    ds = ray.data.from_items(rows, override_num_blocks=3)
    out = _by_index(score_dataset(ds, "clip_s", options={"device": "cpu"}, on_error="column", batch_size=4)
                    .take_all())
    assert {r["index"]: r[ERROR_COLUMN] for r in out if r[ERROR_COLUMN] is not None} == EXPECTED_ERRORS
    assert all(out[i]["clip_s"] is None and out[i]["refclip_s"] is None for i in EXPECTED_ERRORS)  # null, not NaN
    good = [r for r in rows if r["index"] not in EXPECTED_ERRORS]
    expected = _single_process("clip_s", good, device="cpu")
    assert [r["clip_s"] for r in out if r["index"] not in EXPECTED_ERRORS] == pytest.approx(
        expected["clip_s_per_sample"], abs=1e-6)


def test_two_pass_cider_equals_official_whole_corpus_cider(local_ray):
    rows = [{k: v for k, v in r.items() if k != "image"} for r in _rows(30, seed=6)]
    official = _single_process("cider", rows)
    ds = ray.data.from_items(rows, override_num_blocks=3)
    out = _by_index(score_dataset(ds, "cider", batch_size=10).take_all())
    assert [r["cider"] for r in out] == pytest.approx(official["cider_per_sample"], abs=1e-9, rel=0)
    assert float(np.mean([r["cider"] for r in out])) == pytest.approx(official["cider"], abs=1e-9, rel=0)
    # EnsembEval holding official CIDEr uses the same two passes
    weights = {"weights": {"cider": 0.7, "rouge_l": 0.3}}
    ensemble = _single_process("ensembeval", rows, weights=weights, device="cpu")
    out = _by_index(score_dataset(ds, "ensembeval", options={"weights": weights, "device": "cpu"}, batch_size=10)
                    .take_all())
    assert [r["ensembeval"] for r in out] == pytest.approx(ensemble["ensembeval_per_sample"], abs=1e-9, rel=0)
    with pytest.raises(InputError, match="bleu is corpus-level"):
        score_dataset(ds, "bleu")


def test_ray_score_output_summary_and_sidecar_carry_hashcode_provenance_and_tiny_flag(local_ray, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _rows(4, seed=7)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "in.parquet")
    scorer = load_scorer("clip_s", device="cpu")
    capsys.readouterr()
    assert main(["ray-score", "clip_s", "--input", str(tmp_path / "in.parquet"), "--output", str(tmp_path / "out"),
                 "--device", "cpu", "--num-cpus", "0.5", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)  # --json: Ray Data's own printing goes to stderr
    assert summary["n"] == 4 and summary["tiny_random_weights"] is True
    assert summary["hashcode"] == scorer.hashcode and summary["hashcode"].endswith("|TINY-RANDOM-WEIGHTS")
    assert summary["provenance"] == scorer.provenance
    out = pq.read_table(tmp_path / "out").to_pylist()
    assert [r["hashcode"] for r in out] == [scorer.hashcode] * 4
    assert [json.loads(r["provenance"]) for r in out] == [scorer.provenance] * 4  # each row finds its provenance
    sidecar = json.loads((tmp_path / "out.provenance.json").read_text())
    assert sidecar["rows"] == 4 and sidecar["tiny_random_weights"] is True
    assert sidecar["hashcode"] == scorer.hashcode and sidecar["provenance"] == scorer.provenance


def test_ray_score_on_an_empty_input_is_a_one_line_error_as_capeval_score(local_ray, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "empty.jsonl").write_text("")
    pq.write_table(pa.table({"caption": pa.array([], pa.string()), "references": pa.array([], pa.list_(pa.string()))}),
                   tmp_path / "empty.parquet")
    for name in ("empty.jsonl", "empty.parquet"):
        capsys.readouterr()
        assert main(["score", "rouge_l", "--input", str(tmp_path / name)]) == 2
        assert f"{tmp_path / name} holds no records" in capsys.readouterr().err
        assert main(["ray-score", "rouge_l", "--input", str(tmp_path / name), "--output", str(tmp_path / name[:-6]),
                     "--num-cpus", "0.5"]) == 2
        err = capsys.readouterr().err
        assert err == f"capeval ray-score: error: {tmp_path / name} holds no records\n", err


def _one_document(capsys, argv):
    assert main([*argv, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # one line: one document
    return json.loads(out)


def test_ray_score_passes_dtype_to_the_scorer_as_score_does(local_ray, tmp_path, capsys):
    """The same options give `score` and `ray-score` the same scorer: equal hashcodes (which cover the dtype),
    different from the default's (the `ray-score` half of test_cli_grammar.py's one builder for both commands)."""
    records = tmp_path / "in.jsonl"
    records.write_text("".join(json.dumps({"caption": f"a caption {i}", "references": ["a reference"]}) + "\n"
                               for i in range(3)))
    options = ["--device", "cpu", "--dtype", "bfloat16"]
    capsys.readouterr()
    default = _one_document(capsys, ["score", "mpnet_score", "--input", str(records), "--device", "cpu"])
    scored = _one_document(capsys, ["score", "mpnet_score", "--input", str(records), *options])
    assert scored["hashcode"] != default["hashcode"]
    summary = _one_document(capsys, ["ray-score", "mpnet_score", "--input", str(records), "--output",
                                     str(tmp_path / "out"), "--num-cpus", "0.5", *options])
    assert summary["hashcode"] == scored["hashcode"] and summary["n"] == 3


def test_a_bad_row_fails_the_job_with_the_input_error_text(local_ray, tmp_path, capsys):
    """Last in the module: Ray may keep a failed job's actor (and its CPU) for a while."""
    rows = _bad_rows()
    with open(tmp_path / "in.jsonl", "w") as f:  # the command: exit 2 and the InputError text
        for row in rows[:6]:
            f.write(json.dumps({"caption": row["caption"], "references": row["references"]}) + "\n")
    assert main(["ray-score", "rouge_l", "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out"),
                 "--num-cpus", "0.5", "--empty-caption", "error"]) == 2  # ROUGE-L scores it by default (pycocoevalcap)
    assert ("capeval ray-score: error: predictions[3] is an empty caption (empty_caption='score', the default, scores "
            "it as the official implementation does; --empty-caption score on the command line)\n"
            ) in capsys.readouterr().err
    with pytest.raises(InputError) as caught:
        score_dataset(ray.data.from_items(rows, override_num_blocks=3), "clip_s", options={"device": "cpu"},
                      batch_size=4).take_all()
    assert str(caught.value.cause).splitlines()[0] in EXPECTED_ERRORS.values()  # then Ray's retry hint
