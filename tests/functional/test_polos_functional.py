"""Polos formulas against numpy: masked layer-norm statistics, pooling of per-sentence moments, the scalar mix
with its dropout, and the official feature order."""

import numpy as np
import torch

from capeval.functional.polos import (layer_norm_statistics, mix_weights, pooled_statistics, polos_features,
                                      scalar_mix)


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    hidden = torch.randn(3, 5, 4, generator=g, dtype=torch.float64) * 2 + 1
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0]])
    hidden[mask == 0] = 1e3  # padding must not count
    return hidden, mask


def test_statistics_are_masked_population_moments():
    hidden, mask = _batch()
    mean, variance = layer_norm_statistics(hidden, mask, per_sentence=True)
    for b in range(3):
        tokens = hidden[b][mask[b] == 1].numpy().ravel()
        assert np.isclose(mean[b].item(), tokens.mean()) and np.isclose(variance[b].item(), tokens.var())
    mean, variance = layer_norm_statistics(hidden, mask, per_sentence=False)
    tokens = hidden[mask == 1].numpy().ravel()
    assert np.isclose(mean.item(), tokens.mean()) and np.isclose(variance.item(), tokens.var())


def test_pooled_per_sentence_moments_equal_batch_statistics():
    hidden, mask = _batch()
    mean, variance = layer_norm_statistics(hidden, mask, per_sentence=True)
    count = mask.sum(1) * hidden.shape[-1]
    group = torch.tensor([1, 0, 1])
    pooled_mean, pooled_variance = pooled_statistics(mean.flatten(), variance.flatten(), count, group, 2)
    for g, members in ((0, [1]), (1, [0, 2])):
        direct_mean, direct_variance = layer_norm_statistics(hidden[members], mask[members], per_sentence=False)
        assert np.isclose(pooled_mean[g].item(), direct_mean.item())
        assert np.isclose(pooled_variance[g].item(), direct_variance.item())


def test_scalar_mix_formula_and_dropout():
    g = torch.Generator().manual_seed(1)
    states = [torch.randn(2, 3, 4, generator=g, dtype=torch.float64) * (k + 1) for k in range(3)]
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    w, gamma = torch.tensor([0.3, -1.0, 2.0], dtype=torch.float64), torch.tensor([0.8], dtype=torch.float64)
    soft = np.exp(w.numpy()) / np.exp(w.numpy()).sum()
    for per_sentence in (True, False):
        expected = np.zeros((2, 3, 4))
        for k, h in enumerate(states):
            for b in range(2):
                tokens = (h[b][mask[b] == 1] if per_sentence else h[mask == 1]).numpy()
                expected[b] += soft[k] * (h[b].numpy() - tokens.mean()) / np.sqrt(tokens.var() + 1e-12)
        np.testing.assert_allclose(scalar_mix(states, mask, w, gamma, per_sentence=per_sentence).numpy(),
                                   0.8 * expected, atol=1e-12)
    kept = mix_weights(w, torch.tensor([False, True, False])).numpy()
    assert kept[1] == 0 and np.isclose(kept.sum(), 1)
    np.testing.assert_allclose(kept[[0, 2]], soft[[0, 2]] / soft[[0, 2]].sum())


def test_feature_order_and_size():
    r_se, c_se = torch.full((1, 768), 2.0), torch.full((1, 768), 3.0)
    img, c_clip, r_clip = torch.full((1, 512), 5.0), torch.full((1, 512), 7.0), torch.full((1, 512), 11.0)
    features = polos_features(r_se, c_se, img, c_clip, r_clip)[0]
    assert features.shape == (6144,)
    parts = torch.split(features, [768] * 4 + [512] * 6)
    expected = [2, 3, 1, 6, 5, 7, 2, 35, 4, 77]  # r_se, c_se, |c−r|, c·r, img, c_clip, |img−c|, img·c, |r−c|, r·c
    assert [float(p.unique().item()) for p in parts] == expected
