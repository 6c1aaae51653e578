"""A folder holding capeval's conversion record (``capeval_provenance.json`` with each file's sha256 and size) whose
weights are rewritten in place with other weights of the same size: the recorded hashes no longer describe the files,
so neither the hashcode nor the feature caches may keep naming the old weights."""

import json

from PIL import Image

from capeval.core.hub import recorded_files
from capeval.core.scoring import load_scorer
from capeval.testing.tiny_clip import tiny_clip_factory

IMAGES = [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (30, 40), "blue")]
CAPTIONS = ["a red square on a table", "a blue square"]


def _record_conversion(folder) -> None:
    """The record capeval.core.hub writes beside weights it converted (each file's sha256, size, time)."""
    files = recorded_files(folder, sorted(path.name for path in folder.iterdir() if path.is_file()))
    (folder / "capeval_provenance.json").write_text(json.dumps({
        "weight": "pacs-clip-vit-b-32", "source": "https://example.org/clip_ViT-B-32.pth", "files": files}))


def test_weights_rewritten_in_place_beside_a_conversion_record_are_named_by_their_new_content(tmp_path):
    folder, persisted = tmp_path / "my-pacs", tmp_path / "features"
    tiny_clip_factory(seed=0)(folder)
    _record_conversion(folder)
    old = load_scorer("clip_s", weights=str(folder), device="cpu", persist_dir=persisted).score(CAPTIONS, IMAGES)
    sizes = {p.name: p.stat().st_size for p in folder.iterdir()}
    tiny_clip_factory(seed=1)(folder)  # a fine-tune saved over the copy: same files, same sizes, other weights
    assert {p.name: p.stat().st_size for p in folder.iterdir()} == sizes
    fresh = load_scorer("clip_s", weights=str(folder), device="cpu").score(CAPTIONS, IMAGES)
    again = load_scorer("clip_s", weights=str(folder), device="cpu", persist_dir=persisted).score(CAPTIONS, IMAGES)
    assert fresh["clip_s_per_sample"] != old["clip_s_per_sample"]
    assert again["hashcode"] != old["hashcode"]
    assert again["clip_s_per_sample"] == fresh["clip_s_per_sample"]
