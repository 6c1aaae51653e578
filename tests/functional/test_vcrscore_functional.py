"""VCRScore formulas: word precision against hand-counted word sets, and MCIP RefCLIP-S against numpy."""

import numpy as np
import pytest
import torch

from capeval.functional.vcrscore import limit_references, mcip_refclip_s, word_pool, word_precision

NOTEBOOK_REFS = ["a large piece of blueberry cake on a plate", "a plate of food attractively arranged on a table",
                 "a plate of blueberry coffee cake with butter and an orange slice on a table with breakfast foods"]
NOTEBOOK_CAPTION = "a bluebery cake is on a plate and is topped with butter"


@pytest.mark.parametrize("candidate, pool, expected", [
    ("a dog runs", "a dog runs fast", 100.0),
    ("a dog a dog runs", "a cat runs", 100.0 * 2 / 3),  # words are a set: {a, dog, runs}, two in the pool
    ("A Dog", "a dog", 0.0),  # case-sensitive
    ("a dog.", "a dog", 50.0),  # punctuation stays attached: "dog." is not "dog"
    ("a\tdog\nsits", "sits  a", 100.0 * 2 / 3),  # any whitespace separates words
    ("cat", "", 0.0),
    ("   ", "a", 0.0),  # no words: 0 rather than a division by zero
])
def test_word_precision_hand_counted(candidate, pool, expected):
    assert word_precision(candidate, pool) == pytest.approx(expected, abs=1e-12)


def test_pool_joins_references_and_every_detectors_names():
    pool = word_pool(["a man", "on the street"], ["traffic light", "person"], ["sofa", "traffic light"])
    assert pool.split() == ["a", "man", "on", "the", "street", "traffic", "light", "person", "sofa", "traffic", "light"]
    # {a, traffic, light, near, sofa, Person}: a, traffic, light and sofa are pooled; "Person" is not "person"
    assert word_precision("a traffic light near a sofa Person", pool) == pytest.approx(100 * 4 / 6)
    assert word_precision("a traffic light near a sofa Person", word_pool(["a man", "on the street"])) == \
        pytest.approx(100 * 1 / 6)
    assert word_pool(["x"], [], []).split() == ["x"]


def test_official_notebook_example_is_seventy_percent():
    # {a, bluebery, cake, is, on, plate, and, topped, with, butter}: "bluebery", "is", "topped" are not in the pool
    assert word_precision(NOTEBOOK_CAPTION, word_pool(NOTEBOOK_REFS)) == 70.0
    detected = ["cake", "dining table", "cup", "bowl", "spoon", "fork"]  # COCO names cannot add the missing words
    assert word_precision(NOTEBOOK_CAPTION, word_pool(NOTEBOOK_REFS, detected, ["diningtable"])) == 70.0


def test_limit_references():
    refs = ["r1", "r2", "r3", "r4"]
    assert limit_references(refs, None) == refs
    assert limit_references(refs, 3) == ["r1", "r2", "r3"]
    assert limit_references(refs[:2], 3) == ["r1", "r2"]


def _numpy_refclip(image, cand, refs, owner, w=2.5):
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    image, cand, refs = unit(image), unit(cand), unit(refs)
    out = []
    for i in range(len(cand)):
        c = w * max(float(image[i] @ cand[i]), 0.0)
        r = max(0.0, max(float(refs[j] @ cand[i]) for j in range(len(refs)) if owner[j] == i))
        out.append(0.0 if c + r == 0 else 2 * c * r / (c + r))
    return np.array(out)


def test_mcip_refclip_s_matches_numpy_with_clipped_reference_side():
    g = torch.Generator().manual_seed(0)
    image = torch.randn(4, 16, generator=g, dtype=torch.float64)
    cand = torch.randn(4, 16, generator=g, dtype=torch.float64)
    refs = torch.randn(7, 16, generator=g, dtype=torch.float64)
    owner = [0, 0, 1, 2, 2, 2, 3]
    # sample 1: its only reference points away from the caption (negative cosine -> r clipped to 0 -> score 0)
    refs[2] = -cand[1]
    # sample 3: image opposite to the caption and reference opposite too: c = r = 0 -> 0, not NaN
    image[3], refs[6] = -cand[3], -cand[3]
    # sample 0: a positive image cosine and a reference equal to the caption (r = 1)
    image[0], refs[0] = cand[0] + 0.5 * image[0], cand[0] * 3
    got = mcip_refclip_s(image, cand, refs, owner).numpy()
    expected = _numpy_refclip(image.numpy(), cand.numpy(), refs.numpy(), owner)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert got[1] == 0.0 and got[3] == 0.0 and not np.isnan(got).any()
    assert got[0] > 0
    # RefCLIPScore would not clip: its reference side for sample 1 is -1, the harmonic mean is not 0 there
    from capeval.functional import max_reference_similarity

    assert max_reference_similarity(cand, refs, owner)[1].item() == pytest.approx(-1.0)


def test_mcip_refclip_s_does_not_need_normalised_inputs():
    g = torch.Generator().manual_seed(1)
    image, cand, refs = (torch.randn(3, 8, generator=g) for _ in range(3))
    owner = [0, 1, 2]
    a = mcip_refclip_s(image, cand, refs, owner)
    b = mcip_refclip_s(image * 7, cand * 0.1, refs * 3, owner)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_mcip_refclip_s_at_zero_is_what_the_official_torch_harmonic_mean_gives():
    """The official code computes ``1/((1/c + 1/r)/2)`` in torch: where c or r is 0 that is 1/inf = 0.0, not NaN."""
    image = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    cand = torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])  # c = 0, c > 0, c = 0
    refs = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])  # r > 0, r = 0, r = 0
    ours = mcip_refclip_s(image, cand, refs, [0, 1, 2])
    c = 2.5 * torch.clamp((image * cand).sum(-1), min=0)
    r = torch.clamp((cand * refs).sum(-1), min=0)
    official = 1 / ((1 / c + 1 / r) / 2)
    assert torch.equal(official, torch.zeros(3)) and torch.equal(ours, official)
