"""Uniform schema round trip, parquet conversion with dataset cards, loading from converted folders and from a
hub dataset (offline cache layout at a pinned revision), image attachment, Polaris."""

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from capeval import InputError
from capeval.benchmarks import BENCHMARKS, load
from capeval.benchmarks.catalog import PARQUET_FILE, cards_dir, convert_to_parquet
from capeval.benchmarks.schema import from_table, to_table

RAW_BENCHMARKS = ["flickr8k_expert", "flickr8k_cf", "composite", "thumb", "pascal50s", "polaris", "reformulations"]


def _thumb_fixture(root):
    folder = root / "thumb"
    folder.mkdir(parents=True)
    rows = [("1", "a dog runs", 4.0), ("1", "a cat", 1.0), ("2", "a red car", 3.5), ("2", "a boat", 1.5)]
    (folder / "THumB-1.0.jsonl").write_text("\n".join(
        json.dumps({"seg_id": s, "hyp": h, "image": f"COCO_val2014_{s}.jpg", "human_score": y}) for s, h, y in rows))
    (folder / "references.json").write_text("\n".join(
        json.dumps({"seg_id": s, "refs": r}) for s, r in (("1", ["a dog runs fast"]), ("2", ["a red car parked"]))))


def _card_yaml(name):
    text = (cards_dir() / name / "README.md").read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def _card_checks(name, folder):
    import datasets

    meta = _card_yaml(name)
    table = pq.read_table(folder / PARQUET_FILE)
    features = datasets.Features._from_yaml_list(meta["dataset_info"]["features"])
    assert features == datasets.Features.from_arrow_schema(table.schema)
    assert list(features) == table.schema.names
    return meta, table


@pytest.mark.parametrize("name", RAW_BENCHMARKS)
def test_convert_real_release_round_trip_and_card(shared_data, tmp_path, name):
    root = shared_data / "benchmarks"
    folder = convert_to_parquet(name, root, tmp_path)
    assert (folder / "README.md").read_text() == (cards_dir() / name / "README.md").read_text()
    meta, table = _card_checks(name, folder)
    assert meta["dataset_info"]["splits"] == [{"name": "test", "num_bytes": table.nbytes,
                                               "num_examples": table.num_rows}]
    assert meta["configs"][0]["data_files"][0]["path"] == "data/test-*" and meta["license"]
    assert "citation" in (cards_dir() / name / "README.md").read_text().lower()
    assert load(name, tmp_path) == load(name, root)  # converted folder ≡ raw release, protocol included


def test_foil_card_names_the_converted_features(tmp_path):
    from test_pairwise import _write_foil

    _write_foil(tmp_path / "raw")
    folder = convert_to_parquet("foil", tmp_path / "raw", tmp_path / "out")
    _card_checks("foil", folder)
    assert pq.read_table(folder / PARQUET_FILE).num_rows == 3
    assert load("foil", tmp_path / "out") == load("foil", tmp_path / "raw")


def test_every_benchmark_has_a_card():
    for name in BENCHMARKS:
        card = cards_dir() / ("foil" if name == "foil_one_ref" else name) / "README.md"
        assert card.is_file(), name


def test_schema_round_trip_keeps_raters_and_protocol(shared_data):
    expert = load("flickr8k_expert", shared_data / "benchmarks")
    table = to_table(expert)
    assert table.schema.names == ["image", "candidate", "references", "human_score", "rater", "category"]
    assert table.column("rater").to_pylist()[:6] == [0, 1, 2, 0, 1, 2]
    assert from_table(table) == expert
    with pytest.raises(InputError, match="no capeval benchmark metadata"):
        from_table(table.replace_schema_metadata(None))


def test_load_from_hub_dataset_at_pinned_revision(tmp_path, monkeypatch):
    import huggingface_hub.constants as hub_constants

    _thumb_fixture(tmp_path / "raw")
    converted = convert_to_parquet("thumb", tmp_path / "raw", tmp_path / "out")
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "datasets--capeval--thumb"
    snapshot = repo / "snapshots" / revision
    (snapshot / "data").mkdir(parents=True)
    (snapshot / PARQUET_FILE).write_bytes((converted / PARQUET_FILE).read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("CAPEVAL_BENCHMARK_DIR", raising=False)
    expected = load("thumb", tmp_path / "raw")
    assert load("thumb", revision=revision) == expected
    assert load("thumb") == expected  # "main" resolves through the cached ref
    with pytest.raises(InputError, match="could not fetch the hub dataset capeval/thumb@f+"):
        load("thumb", revision="f" * 40)


def test_images_dir_attaches_absolute_paths(tmp_path):
    _thumb_fixture(tmp_path)
    bench = load("thumb", tmp_path, images_dir=tmp_path / "imgs")
    assert bench.images[0] == str((tmp_path / "imgs" / "COCO_val2014_1.jpg").resolve())
    assert Path(bench.images[0]).is_absolute() and bench.candidates[0] == "a dog runs"


def test_polaris_real_release(shared_data):
    polaris = load("polaris", shared_data / "benchmarks")
    raw = json.loads((shared_data / "benchmarks/polaris_val/polaris_val_subset.json").read_text())
    assert len(polaris.human) == len(raw) == 4237 and polaris.statistic == "kendall_tau_c"
    assert polaris.human[5] == raw[5]["score"] and polaris.candidates[5] == raw[5]["mt"]
    assert all(r == [] for r in polaris.references)
