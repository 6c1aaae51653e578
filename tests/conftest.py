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
