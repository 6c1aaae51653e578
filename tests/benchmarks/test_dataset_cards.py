"""Dataset-card metadata the Hub reads: licence name and link where the licence is `other`, annotation creators,
source datasets, task ids, and size categories that match the row counts (the card's, and the real releases')."""

import re

import pytest
import yaml

from capeval.benchmarks import load
from capeval.benchmarks.catalog import cards_dir
from capeval.benchmarks.schema import to_table

CARDS = sorted(p.parent.name for p in cards_dir().glob("*/README.md"))
REAL_RELEASES = ["flickr8k_expert", "flickr8k_cf", "composite", "thumb", "pascal50s", "polaris", "reformulations"]
ANNOTATORS = {"found", "crowdsourced", "expert-generated", "machine-generated", "no-annotation", "other"}


def _meta(name):
    return yaml.safe_load((cards_dir() / name / "README.md").read_text().split("---\n")[1])


def _size_category(rows):
    """The Hub's size bucket of a row count."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if rows < limit:
            return label
    return "1M<n<10M"


def _rows(meta):
    return sum(split["num_examples"] for split in meta.get("dataset_info", {}).get("splits", []))


@pytest.mark.parametrize("name", CARDS)
def test_card_metadata(name):
    meta = _meta(name)
    if meta["license"] == "other":
        assert re.fullmatch(r"[a-z0-9-]+", meta["license_name"]) and meta["license_link"].startswith("https://")
    else:
        assert "license_name" not in meta and "license_link" not in meta
    assert meta["annotations_creators"] and set(meta["annotations_creators"]) <= ANNOTATORS
    assert all(re.fullmatch(r"original|extended(\|[\w.-]+/[\w.-]+)?", s) for s in meta["source_datasets"])
    assert meta["task_categories"] == ["image-to-text"] and meta["task_ids"] == ["image-captioning"]
    rows = _rows(meta)
    # a card without row counts (a release not converted here) claims no size
    assert meta.get("size_categories") == ([_size_category(rows)] if rows else None)


def test_size_buckets():
    assert [_size_category(n) for n in (999, 1_000, 9_999, 16_992, 100_000)] == [
        "n<1K", "1K<n<10K", "1K<n<10K", "10K<n<100K", "100K<n<1M"]


@pytest.mark.parametrize("name", REAL_RELEASES)
def test_card_row_counts_are_the_real_releases(shared_data, name):
    assert to_table(load(name, shared_data / "benchmarks")).num_rows == _rows(_meta(name))
