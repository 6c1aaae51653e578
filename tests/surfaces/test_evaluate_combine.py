"""``evaluate.combine`` of capeval's modules, loaded offline from the checkout's ``metrics/`` folders, as the README
describes it: it works (each value equals the module run alone, batches added to the combination included), the
keys every module returns (hashcode, provenance, truncated_texts) come back prefixed by the module's name, and each
module loads its own models and decodes the images itself (no sharing: the README points to the suite for one
pass)."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

evaluate = pytest.importorskip("evaluate")

from capeval import InputError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODULES = ("clip_s", "pac_s", "polos")
PREDICTIONS = ["a dog on the grass", "a red car", "two people talking"]
REFERENCES = [["a dog runs on a lawn"], ["a red car parked", "a car"], ["people talk"]]


@pytest.fixture(scope="module")
def image_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("combine")
    rng = np.random.default_rng(3)
    paths = []
    for i in range(len(PREDICTIONS)):
        path = folder / f"image{i}.png"
        Image.fromarray(rng.integers(0, 256, (36 + 4 * i, 48, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    return paths


def load(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tiny weights' warning
        return evaluate.load(str(REPO / "metrics" / name), device="cpu")


def test_combine_of_capeval_modules_equals_each_module_alone(tiny_hub, image_files, clip_loads):
    combined = evaluate.combine([load(name) for name in MODULES])
    # no sharing between modules: clip_s and polos each load OpenAI ViT-B/32 (the suite loads it once)
    assert sorted(clip_loads) == ["openai-clip-vit-b-32", "openai-clip-vit-b-32", "pacs-clip-vit-b-32"]
    combined.add_batch(predictions=PREDICTIONS[:2], images=image_files[:2], references=REFERENCES[:2])
    result = combined.compute(predictions=PREDICTIONS[2:], images=image_files[2:], references=REFERENCES[2:])
    for name in MODULES:
        alone = load(name).compute(predictions=PREDICTIONS, images=image_files, references=REFERENCES)
        for key, value in alone.items():
            shared_key = key in ("hashcode", "provenance", "truncated_texts")
            assert result[f"{name}_{key}" if shared_key else key] == value, (name, key)
    assert {"clip_s", "refclip_s", "pac_s", "refpac_s", "polos"} <= set(result)


def test_combine_passes_every_input_to_every_module(tiny_hub, image_files):
    """The combination hands each module all inputs: a reference-free module (clip_s) scores RefCLIP-S too as soon as
    another module of the combination needs references."""
    combined = evaluate.combine([load("clip_s"), load("polos")])
    result = combined.compute(predictions=PREDICTIONS, images=image_files, references=REFERENCES)
    assert "refclip_s" in result
    with pytest.raises(InputError, match="polos needs references"):
        combined.compute(predictions=PREDICTIONS, images=image_files)  # polos needs them
