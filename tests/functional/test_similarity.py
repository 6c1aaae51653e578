import numpy as np
import pytest
import torch

from capeval import functional as F


def _np_norm(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_clip_score_matches_numpy_formula():
    rng = np.random.default_rng(0)
    img, txt = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    expected = 2.5 * np.clip((_np_norm(img) * _np_norm(txt)).sum(1), 0, None)
    got = F.clip_score(torch.tensor(img), torch.tensor(txt), 2.5)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-6)
    assert (got == 0).any() and (got > 0).any()  # clipping exercised


def test_max_reference_similarity_varying_counts_unclipped():
    rng = np.random.default_rng(1)
    cand, refs = rng.normal(size=(3, 5)), rng.normal(size=(6, 5))
    owner = [0, 0, 0, 1, 2, 2]
    cos = (_np_norm(cand)[owner] * _np_norm(refs)).sum(1)
    expected = [cos[:3].max(), cos[3], cos[4:].max()]
    got = F.max_reference_similarity(torch.tensor(cand), torch.tensor(refs), owner)
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-6)
    anti = F.max_reference_similarity(torch.tensor(cand[:1]), torch.tensor(-cand[:1]), [0])
    assert anti.item() == pytest.approx(-1.0, abs=1e-6)  # not clipped at 0


def test_max_reference_similarity_requires_a_reference_per_candidate():
    with pytest.raises(ValueError, match="at least one reference"):
        F.max_reference_similarity(torch.ones(2, 3), torch.ones(1, 3), [0])


def test_ref_clip_score_is_harmonic_mean_and_zero_when_both_zero():
    a, b = torch.tensor([0.8, 0.0, 0.5]), torch.tensor([0.6, 0.0, -0.2])
    got = F.ref_clip_score(a, b)
    assert got[0].item() == pytest.approx(2 * 0.8 * 0.6 / 1.4, abs=1e-6)
    assert got[1].item() == 0.0
    assert got[2].item() == pytest.approx(2 * 0.5 * -0.2 / 0.3, abs=1e-6)


def test_harmonic_mean_of_many():
    x, y, z = torch.tensor([0.2, 0.0]), torch.tensor([0.4, 0.5]), torch.tensor([0.8, 0.5])
    got = F.harmonic_mean(x, y, z)
    assert got[0].item() == pytest.approx(3 / (1 / 0.2 + 1 / 0.4 + 1 / 0.8), abs=1e-6)
    assert got[1].item() == 0.0
