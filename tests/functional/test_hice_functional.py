"""HICE-S equations against hand computations on constructed embeddings."""

import numpy as np
import pytest
import torch

from capeval.functional import hice as H


def cosine_matrix(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return np.array([[x @ y / (np.linalg.norm(x) * np.linalg.norm(y)) for y in b] for x in a])


def hmean(*xs):
    return 0.0 if min(xs) <= 0 else len(xs) / sum(1 / x for x in xs)


PHRASES = [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]]  # N = 2
REGIONS = [[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.2, 0.1]]  # M = 3


def test_local_match_precision_recall_and_harmonic_mean_with_m_different_from_n():
    w = 2.5
    sim = w * np.clip(cosine_matrix(PHRASES, REGIONS), 0, None)  # [N, M]
    match = H.local_match(torch.tensor(PHRASES), torch.tensor(REGIONS), w)
    np.testing.assert_allclose(match.precision_per_unit.numpy(), sim.max(axis=1), rtol=1e-6)
    np.testing.assert_allclose(match.recall_per_target.numpy(), sim.max(axis=0), rtol=1e-6)
    assert match.best_unit.tolist() == list(sim.argmax(axis=0))
    p, r = sim.max(axis=1).mean(), sim.max(axis=0).mean()
    assert match.precision == pytest.approx(p, rel=1e-6)
    assert match.recall == pytest.approx(r, rel=1e-6)
    assert match.score == pytest.approx(2 * p * r / (p + r), rel=1e-6)
    # the region orthogonal to every phrase has recall 0 (clipped, not negative)
    assert match.recall_per_target[1] == 0


def test_single_region_and_single_phrase():
    match = H.local_match(torch.tensor([[3.0, 4.0]]), torch.tensor([[4.0, 3.0]]), 2.5)
    expected = 2.5 * 24 / 25
    assert match.precision == pytest.approx(expected, rel=1e-6)
    assert match.recall == pytest.approx(expected, rel=1e-6)
    assert match.score == pytest.approx(expected, rel=1e-6)


def test_local_match_needs_units_and_targets():
    with pytest.raises(ValueError, match="at least one unit"):
        H.local_match(torch.zeros(0, 3), torch.tensor(REGIONS), 2.5)


def test_global_terms_are_rescaled_clipped_cosines():
    image, caption = torch.tensor([1.0, 2.0, 2.0]), torch.tensor([2.0, 1.0, 2.0])
    assert H.global_itc(image, caption, 2.5) == pytest.approx(2.5 * 8 / 9, rel=1e-6)
    assert H.global_itc(image, -caption, 2.5) == 0.0
    refs = torch.tensor([[-2.0, -1.0, -2.0], [2.0, 2.0, 1.0]])
    assert H.global_ttc(caption, refs) == pytest.approx(8 / 9, rel=1e-6)
    assert H.global_ttc(caption, refs[:1]) == 0.0


def test_hice_and_ref_hice_are_harmonic_means():
    assert H.hice(0.6, 0.3) == pytest.approx(hmean(0.6, 0.3))
    assert H.hice(0.6, None) == 0.6  # no phrases, "global" policy: the global term alone
    assert H.ref_hice(0.6, 0.3, 0.9, 0.5) == pytest.approx(4 / (1 / 0.6 + 1 / 0.3 + 1 / 0.9 + 1 / 0.5))
    assert H.ref_hice(0.6, None, 0.9, None) == pytest.approx(hmean(0.6, 0.9))
    assert H.ref_hice(0.6, 0.0, 0.9, 0.5) == 0.0
