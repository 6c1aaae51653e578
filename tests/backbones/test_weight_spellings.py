"""Every spelling of the same weights — registry name, hub id with or without revision, the cache folder, a copy of
the folder — builds the same model and gives the same hashcode; an activation nothing records is refused.

The hub snapshot is written in the layout of the real ``timm/…openai`` repositories: the weights file links to a
blob named by its sha256, and ``open_clip_config.json`` does not record ``quick_gelu`` (open_clip's own default,
GELU, is wrong for OpenAI weights)."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

import capeval
from capeval.backbones.clip import ClipBackbone
from capeval.core.errors import ModelNotAvailableError
from capeval.core.hub import converted_dir, get_spec
from capeval.testing import tiny_clip_factory

OPENAI_B32 = "openai-clip-vit-b-32"


def _hub_snapshot(cache: Path, repo_id: str, revision: str, *, seed: int, branch: str = "main") -> Path:
    """A hub-cache snapshot of ``repo_id`` as the hub writes it: files link to ``blobs/<sha256>``; the config has no
    ``quick_gelu``."""
    written = cache / "written" / repo_id
    tiny_clip_factory(seed=seed)(written)
    config = json.loads((written / "open_clip_config.json").read_text())
    del config["model_cfg"]["quick_gelu"]
    (written / "open_clip_config.json").write_text(json.dumps(config))
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir(exist_ok=True)
    for path in written.iterdir():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        shutil.copy(path, repo / "blobs" / digest)
        (snapshot / path.name).symlink_to(Path("..") / ".." / "blobs" / digest)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / branch).write_text(revision)
    return snapshot


@pytest.fixture
def hub_cache(empty_weights_cache, tmp_path, monkeypatch):
    """The empty offline hub cache the snapshots are written into, with a capeval cache of its own."""
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    return empty_weights_cache


def _activation(backbone: ClipBackbone) -> str:
    return type(backbone.model.transformer.resblocks[0].mlp.gelu).__name__


def _images(tmp_path):
    paths = []
    for i in range(2):
        path = tmp_path / f"{i}.png"
        Image.new("RGB", (24, 20), (60 * i, 90, 160)).save(path)
        paths.append(str(path))
    return paths


def test_every_spelling_of_the_openai_weights_builds_quick_gelu_and_gives_one_hashcode(hub_cache, tmp_path):
    spec = get_spec(OPENAI_B32)
    snapshot = _hub_snapshot(hub_cache, spec.repo_id, spec.revision, seed=0)
    copy = tmp_path / "copied"  # links followed: plain files, no hub-cache layout; a plain folder says it itself
    shutil.copytree(snapshot, copy)
    copy_config = json.loads((copy / "open_clip_config.json").read_text())
    copy_config["model_cfg"]["quick_gelu"] = True
    (copy / "open_clip_config.json").write_text(json.dumps(copy_config))
    spellings = [OPENAI_B32, spec.repo_id, f"{spec.repo_id}@{spec.revision}", str(snapshot)]
    for spelling in spellings:
        assert _activation(ClipBackbone(spelling, device="cpu")) == "QuickGELU", spelling
    images = _images(tmp_path)
    results = [capeval.load_scorer("clip_s", weights=w, device="cpu").score(["a dog", "a cat"], images,
                                                                            [["a dog"], ["a cat"]])
               for w in spellings]
    assert len({r["hashcode"] for r in results}) == 1
    assert all(r["clip_s_per_sample"] == results[0]["clip_s_per_sample"] for r in results)
    assert _activation(ClipBackbone(str(copy), device="cpu")) == "QuickGELU"


def test_a_registered_converted_weight_by_name_by_folder_and_by_copy_gives_one_hashcode(hub_cache, tmp_path):
    folder = converted_dir("pacs-clip-vit-b-32")
    tiny_clip_factory(seed=2)(folder)
    (folder / "capeval_provenance.json").write_text(json.dumps({"weight": "pacs-clip-vit-b-32",
                                                                 "source": "https://example.org/clip_ViT-B-32.pth"}))
    (folder / "README.md").write_text("a model card\n")
    copy = tmp_path / "elsewhere"
    shutil.copytree(folder, copy)
    (copy / "README.md").write_text("another card: not a weight file\n")
    codes = {capeval.load_scorer("clip_s", weights=w, device="cpu").hashcode
             for w in ("pacs-clip-vit-b-32", str(folder), str(copy))}
    assert len(codes) == 1


def test_an_unregistered_hub_repo_takes_its_activation_from_open_clips_pretrained_table(hub_cache):
    _hub_snapshot(hub_cache, "timm/vit_large_patch14_clip_224.openai", "1" * 40, seed=5)
    _hub_snapshot(hub_cache, "laion/CLIP-ViT-B-32-laion2B-s34B-b79K", "2" * 40, seed=6)
    assert _activation(ClipBackbone("timm/vit_large_patch14_clip_224.openai", device="cpu")) == "QuickGELU"
    assert _activation(ClipBackbone("laion/CLIP-ViT-B-32-laion2B-s34B-b79K", device="cpu")) == "GELU"


def test_an_activation_nothing_records_is_refused_not_guessed(hub_cache, tmp_path):
    snapshot = _hub_snapshot(hub_cache, "someone/their-clip", "3" * 40, seed=7)
    for spelling in ("someone/their-clip", str(snapshot)):
        with pytest.raises(ModelNotAvailableError, match="cannot tell whether they use QuickGELU or GELU"):
            ClipBackbone(spelling, device="cpu")
    spec = get_spec(OPENAI_B32)
    contradicting = _hub_snapshot(hub_cache, spec.repo_id, spec.revision, seed=0)
    config = json.loads((contradicting / "open_clip_config.json").read_text())
    config["model_cfg"]["quick_gelu"] = False
    (contradicting / "open_clip_config.json").unlink()
    (contradicting / "open_clip_config.json").write_text(json.dumps(config))
    with pytest.raises(ModelNotAvailableError, match="refusing to guess"):
        ClipBackbone(f"{spec.repo_id}@{spec.revision}", device="cpu")
