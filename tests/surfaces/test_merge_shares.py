"""Results of several processes merge into the single-process result, means included: samples skipped for an empty
caption never count, and a scorer that leaves undefined values out of its mean (HICE-S's local terms) is merged the
same way (the merge used to average them in as NaN and fail on skipped samples)."""

import math

import numpy as np
import pytest
from PIL import Image

from capeval.core.scoring import load_scorer
from capeval.distributed import merge_shares
from capeval.testing import FAST_TINY_OPTIONS

# an empty caption, and one without noun phrases (HICE-S: an undefined local term)
CAPTIONS = ["a red square", "", "a picture of a blue stripe", "with of", "a green dot on a wall", "a dog"]


def _inputs():
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)) for _ in CAPTIONS]
    references = [[f"reference {i}", "a thing on a table"] for i in range(len(CAPTIONS))]
    return images, references


def _shares(scorer, images, references, policy, processes=2):
    parts = []
    for rank in range(processes):
        mine = list(range(rank, len(CAPTIONS), processes))
        valid = scorer.validate([CAPTIONS[i] for i in mine], [images[i] for i in mine],
                                [references[i] for i in mine], indices=mine, empty_caption=policy)
        parts.append({"indices": mine, "result": scorer.score_inputs(valid)})
    return parts


def _same(merged, whole):
    for key, value in whole.items():
        if key.endswith("_per_sample"):
            assert merged[key] == pytest.approx(value, abs=1e-6, nan_ok=True), key
            mean = key[: -len("_per_sample")]
            assert merged[mean] == pytest.approx(whole[mean], abs=1e-6), mean
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            assert merged[key] == value, key
    assert merged["hashcode"] == whole["hashcode"]


@pytest.mark.parametrize("policy", ["skip", 0.25])
def test_merged_shares_of_clip_s_equal_one_process_with_empty_captions(tiny_hub, policy):
    images, references = _inputs()
    scorer = load_scorer("clip_s", device="cpu")
    whole = scorer.score(CAPTIONS, images, references, empty_caption=policy)
    _same(merge_shares(_shares(scorer, images, references, policy), len(CAPTIONS)), whole)


def test_merged_shares_of_hice_s_leave_undefined_local_terms_out_as_the_scorer_does(tiny_hub):
    images, references = _inputs()
    scorer = load_scorer("hice_s", device="cpu", **FAST_TINY_OPTIONS["hice_s"])
    whole = scorer.score(CAPTIONS, images, references, empty_caption="skip")
    assert any(v is not None and math.isnan(v) for v in whole["local_itc_per_sample"])  # the case in question
    assert math.isfinite(whole["local_itc"])
    _same(merge_shares(_shares(scorer, images, references, "skip"), len(CAPTIONS)), whole)
