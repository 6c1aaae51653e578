"""Shared fixtures: an offline tiny hub cache, and the reference data beside the repository."""

import os
from pathlib import Path

import pytest

for _var in ("HF_HUB_OFFLINE", "HF_EVALUATE_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_var] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def tiny_hub(tmp_path_factory):
    """A hub cache holding a tiny random model for every registered weight; set as HF_HUB_CACHE."""
    from capeval.testing import populate_tiny_hub_cache

    cache = Path(os.environ.get("CAPEVAL_TEST_HUB_CACHE") or tmp_path_factory.mktemp("hub"))
    populate_tiny_hub_cache(cache)
    old = os.environ.get("HF_HUB_CACHE")
    os.environ["HF_HUB_CACHE"] = str(cache)
    import huggingface_hub.constants as hub_constants

    old_const = hub_constants.HF_HUB_CACHE
    hub_constants.HF_HUB_CACHE = str(cache)
    yield cache
    hub_constants.HF_HUB_CACHE = old_const
    if old is None:
        os.environ.pop("HF_HUB_CACHE", None)
    else:
        os.environ["HF_HUB_CACHE"] = old


@pytest.fixture(scope="session")
def shared_data():
    """``../shared/data``: required in CI (fails loudly), skipped with a reason elsewhere."""
    if not SHARED_DATA.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"reference data {SHARED_DATA} is missing in CI")
        pytest.skip(f"reference data {SHARED_DATA} not available")
    return SHARED_DATA


@pytest.fixture
def segments_each_image_once():
    """Check a ``SegmentEverything``: one generator call per distinct image, ≤ 5 boolean masks of the image's size,
    largest first, the same masks again from the cache."""
    import numpy as np
    from PIL import Image

    def check(regions):
        image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8))
        calls = []
        original = regions.generator.generate
        regions.generator.generate = lambda array: calls.append(array.shape) or original(array)
        masks = regions.masks(image)
        again = regions.masks(image.copy())
        assert calls == [(48, 64, 3)]
        assert 1 <= len(masks) <= 5 and all(m.shape == (48, 64) and m.dtype == bool for m in masks)
        areas = [int(m.sum()) for m in masks]
        assert areas == sorted(areas, reverse=True)
        assert all(np.array_equal(a, b) for a, b in zip(masks, again))

    return check


@pytest.fixture(scope="module")
def forwards():
    """Every torch module forward in the process, recorded by a global pre-hook (nothing is replaced); tests
    ``clear()`` it before the calls they check."""
    import torch

    calls = []
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda module, args: calls.append(module))
    yield calls
    handle.remove()


@pytest.fixture
def clip_loads(monkeypatch):
    """The weights of every ClipBackbone built (the real constructor runs)."""
    from capeval.backbones.clip import ClipBackbone

    loads = []
    init = ClipBackbone.__init__

    def counting_init(self, weights, **options):
        loads.append(weights)
        init(self, weights, **options)

    monkeypatch.setattr(ClipBackbone, "__init__", counting_init)
    return loads
