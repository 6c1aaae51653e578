"""Every result says where it came from: weights (``repo@commit`` of the snapshot loaded, or a file hash), the
options that change values, the capeval version; the hashcode changes with each of them and with nothing else."""

import hashlib
import json
import warnings
from pathlib import Path

import pytest
from PIL import Image

import capeval
from capeval.core.constants import PROVENANCE_FILE, TINY_MARKER_FILE
from capeval.core.hub import get_spec
from capeval.core.provenance import (
    NEUTRAL_OPTIONS,
    TinyWeightsWarning,
    build_provenance,
    describe_weights,
    hashcode,
    identity,
)
from capeval.core.scoring import scorers


def _images(tmp_path, n):
    paths = []
    for i in range(n):
        path = tmp_path / f"{i}.png"
        Image.new("RGB", (24 + i, 20), (40 * i % 255, 90, 160)).save(path)
        paths.append(str(path))
    return paths


def _snapshot_commit(cache: Path, repo_id: str) -> str:
    """The commit folder of ``repo_id`` in a hub cache, read from the directory layout."""
    (commit,) = [p.name for p in (cache / f"models--{repo_id.replace('/', '--')}" / "snapshots").iterdir()]
    return commit


def test_result_names_the_snapshot_loaded_and_the_options(tiny_hub, tmp_path):
    scorer = capeval.load_scorer("clip_s", device="cpu")
    spec = get_spec("openai-clip-vit-b-32")
    result = scorer.score(["a dog", "a cat"], _images(tmp_path, 2), [["a dog running"], ["a cat sitting"]])
    provenance = result["provenance"]
    assert provenance["capeval"] == capeval.__version__ and provenance["metric"] == "clip_s"
    assert provenance["options"]["weights"] == "openai-clip-vit-b-32"
    assert provenance["dtype"] == "float32" and provenance["device_type"] == "cpu"
    (weights,) = provenance["weights"]
    assert weights["source"] == f"{spec.repo_id}@{_snapshot_commit(tiny_hub, spec.repo_id)}"
    assert result["hashcode"] == scorer.hashcode
    assert result["hashcode"].startswith(f"clip_s|capeval {capeval.__version__}|")
    assert weights["named_by"] == ["weights"] and len(weights["sha256"]) == 64
    digest = hashlib.sha256(json.dumps(identity(provenance), sort_keys=True).encode()).hexdigest()[:16]
    assert result["hashcode"].split("|")[2] == digest
    assert identity(provenance)["options"]["weights"] == f"sha256:{weights['sha256']}"
    assert identity(provenance)["weights"] == [{"sha256": weights["sha256"], "tiny_random_weights": True}]


def test_hashcode_is_equal_across_fresh_loads_batch_sizes_orders_and_explicit_defaults(tiny_hub, tmp_path):
    images = _images(tmp_path, 3)
    captions, refs = ["a dog", "a cat", "a car"], [["a dog"], ["a cat"], ["a red car"]]
    first = capeval.load_scorer("polos", device="cpu", batch_size=1)
    second = capeval.load_scorer("polos", device="cpu", batch_size=64, statistics="per_sentence",
                                 persist_dir=tmp_path / "embeddings")
    forward = first.score(captions, images, refs)
    backward = second.score(captions[::-1], images[::-1], refs[::-1])
    assert forward["hashcode"] == backward["hashcode"] == first.hashcode == second.hashcode
    assert forward["provenance"] == backward["provenance"]


@pytest.mark.parametrize("metric, a, b", [
    ("clip_s", {}, {"weights": "pacs-clip-vit-b-32"}),
    ("clip_s", {}, {"dtype": "bfloat16"}),
    ("polos", {}, {"statistics": "batch"}),
])
def test_hashcode_changes_with_weights_dtype_and_statistics(tiny_hub, metric, a, b):
    first = capeval.load_scorer(metric, device="cpu", **a)
    second = capeval.load_scorer(metric, device="cpu", **b)
    assert first.hashcode != second.hashcode


def test_every_number_changing_option_of_every_scorer_enters_the_hashcode():
    """For every registered scorer and each option that is not a runtime/cache/shared one: two values, two hashcodes
    (dtype included); device, batch size and caches leave it unchanged (built with the production function, no model needed)."""
    for name, spec in scorers().items():
        shared = spec.shares
        base = hashcode(build_provenance(name, {}, [], None, shared=shared))
        for option in spec.options:
            changed = hashcode(build_provenance(name, {option: "another value"}, [], None, shared=shared))
            if option in NEUTRAL_OPTIONS or option in shared:
                assert changed == base, (name, option)
            else:
                assert changed != base, (name, option)


def test_local_weights_are_hashed_and_converted_ones_name_their_upstream(tmp_path):
    folder = tmp_path / "weights"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\x00" * 100)
    (folder / "sub" / "config.json").write_text("{}")
    described = describe_weights(str(folder), folder)
    expected = hashlib.sha256()
    for relative in ("model.safetensors", "sub/config.json"):
        expected.update(f"{relative}\0{hashlib.sha256((folder / relative).read_bytes()).hexdigest()}\n".encode())
    assert described == {"ref": str(folder), "source": f"local:{folder.resolve()}", "sha256": expected.hexdigest(),
                         "tiny_random_weights": False}
    (folder / "model.safetensors").write_bytes(b"\x01" * 100)
    assert describe_weights(str(folder), folder)["sha256"] != expected.hexdigest()
    upstream = {"source": "https://example.org/model.pth", "sha256": "ab" * 32, "converter": "pac-s",
                "capeval_version": capeval.__version__}
    (folder / PROVENANCE_FILE).write_text(json.dumps(upstream))
    assert describe_weights("pacs", folder)["converted_from"] == upstream


def test_tiny_random_weights_are_flagged_warned_and_marked_in_the_hashcode(tmp_path):
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "weights.json").write_text("{}")
    (folder / TINY_MARKER_FILE).write_text("")
    with pytest.warns(TinyWeightsWarning, match="TINY RANDOM TEST WEIGHTS"):
        provenance = build_provenance("clip_s", {}, [("tiny", folder)], None)
    assert provenance["tiny_random_weights"] is True and provenance["weights"][0]["tiny_random_weights"] is True
    assert hashcode(provenance).endswith("|TINY-RANDOM-WEIGHTS")
    (folder / TINY_MARKER_FILE).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TinyWeightsWarning)
        real = build_provenance("clip_s", {}, [("tiny", folder)], None)
    assert not hashcode(real).endswith("|TINY-RANDOM-WEIGHTS") and hashcode(real) != hashcode(provenance)


def test_weight_free_metrics_carry_a_hashcode_too():
    result = capeval.load_scorer("bleu").score(["a dog runs"], references=[["a dog runs fast"]])
    assert result["provenance"]["weights"] == [] and result["hashcode"].startswith("bleu|")


def test_every_metric_card_shows_how_to_cite_a_result_with_its_hashcode():
    cards = sorted((Path(__file__).resolve().parents[2] / "metrics").glob("*/README.md"))
    assert len(cards) >= 7
    for card in cards:
        citation = card.read_text().split("## Citation", 1)[1]
        assert "`hashcode`" in citation and f"`{card.parent.name}|capeval " in citation, card
