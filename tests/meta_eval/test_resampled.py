"""Vectorised resampling: every resample's statistic equals scipy's on the materialised resample (rows repeated by
their unit's draw count, or the metrics' scores swapped per unit), for all four statistics."""

import numpy as np
import pytest
from scipy import stats

from capeval.meta_eval.resampled import AccuracyResampler, Resampler, weighted_ranks
from capeval.statistics.resampling import bootstrap_counts, swap_masks, unit_codes

SCIPY = {"kendall_tau_b": lambda x, y: stats.kendalltau(x, y, variant="b").statistic,
         "kendall_tau_c": lambda x, y: stats.kendalltau(x, y, variant="c").statistic,
         "pearson": lambda x, y: stats.pearsonr(x, y).statistic,
         "spearman": lambda x, y: stats.spearmanr(x, y).statistic}


def _data(n=240, n_units=30, seed=0):
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 5, n).astype(float)  # expert-like: 4 levels, heavy ties
    a = np.round(human + rng.normal(0, 1.5, n), 1)  # ties inside the metric too
    b = np.round(human + rng.normal(0, 2.0, n))
    units = [f"img{u}" for u in rng.integers(0, n_units, n)]
    return a, b, human, units


@pytest.mark.parametrize("statistic", sorted(SCIPY))
def test_bootstrap_values_equal_scipy_on_the_materialised_resample(statistic):
    a, _, human, units = _data()
    codes, n_units = unit_codes(units, len(human))
    resampler = Resampler(human, codes, n_units, statistic)
    counts = next(bootstrap_counts(n_units, 12, seed=5))
    values = resampler.bootstrap(resampler.prepare(a), counts)
    for c, value in zip(counts, values):
        rows = np.concatenate([np.flatnonzero(codes == u).repeat(int(k)) for u, k in enumerate(c)])
        assert value == pytest.approx(SCIPY[statistic](a[rows], human[rows]), abs=1e-12)


@pytest.mark.parametrize("statistic", sorted(SCIPY))
def test_permuted_values_equal_scipy_on_the_swapped_metric(statistic):
    a, b, human, units = _data(seed=1)
    codes, n_units = unit_codes(units, len(human))
    resampler = Resampler(human, codes, n_units, statistic)
    pa, pb = resampler.prepare(a), resampler.prepare(b)
    swaps = next(swap_masks(n_units, 12, seed=2))
    values = resampler.permuted(pa, pb, resampler.cross(pa, pb), swaps)
    za, zb = stats.zscore(a), stats.zscore(b)  # PERM-BOTH swaps standardised scores
    for s, value in zip(swaps, values):
        swapped = [zb[i] if s[codes[i]] else za[i] for i in range(len(a))]
        assert value == pytest.approx(SCIPY[statistic](swapped, human), abs=1e-12)


def test_kendall_loop_fallback_gives_the_vectorised_values(monkeypatch):
    import capeval.meta_eval.resampled as resampled

    a, b, human, units = _data(n=90, n_units=12, seed=3)
    codes, n_units = unit_codes(units, len(human))
    counts = next(bootstrap_counts(n_units, 6, seed=0))
    fast = Resampler(human, codes, n_units, "kendall_tau_c")
    monkeypatch.setattr(resampled, "MAX_CELLS", 0)
    slow = Resampler(human, codes, n_units, "kendall_tau_c")
    assert not slow.vectorised and fast.vectorised
    np.testing.assert_allclose(slow.bootstrap(slow.prepare(a), counts), fast.bootstrap(fast.prepare(a), counts),
                               atol=1e-12)


def test_weighted_ranks_are_the_average_ranks_of_the_repeated_sample():
    x = np.array([[3.0, 1.0, 3.0, 2.0, 5.0]])
    w = np.array([[2.0, 1.0, 0.0, 3.0, 1.0]])
    sample = np.repeat(x[0], w[0].astype(int))
    expected = {v: r for v, r in zip(sample, stats.rankdata(sample))}
    ranks = weighted_ranks(x, w)[0]
    assert [ranks[i] for i in range(5) if w[0, i]] == [expected[v] for v, k in zip(x[0], w[0]) if k]


def test_accuracy_resampler_is_the_mean_over_draws_of_the_mean_over_categories():
    rng = np.random.default_rng(0)
    correct = rng.integers(0, 2, (3, 40)).astype(float)
    categories = np.array(["HC", "HI", "HM", "MM"] * 10)
    units = np.arange(40) // 4
    resampler = AccuracyResampler(categories, units, 10)
    counts = next(bootstrap_counts(10, 5, seed=1))
    values = resampler.value(resampler.sums(correct), counts)
    for c, value in zip(counts, values):
        rows = np.concatenate([np.flatnonzero(units == u).repeat(int(k)) for u, k in enumerate(c)])
        per_draw = [np.mean([d[rows][categories[rows] == cat].mean() for cat in ("HC", "HI", "HM", "MM")])
                    for d in correct]
        assert value == pytest.approx(np.mean(per_draw), abs=1e-12)


@pytest.mark.parametrize("block", [4, 16, 1000])
def test_unit_pair_matrices_equal_brute_force_counts(block):
    from capeval.meta_eval.resampled import pair_matrices

    rng = np.random.default_rng(7)
    n, n_units, levels = 120, 9, 4
    y = rng.integers(0, levels, n)
    xq = np.round(rng.normal(size=n), 1)
    xq[:30] = 0.0  # a long run of ties, longer than the small blocks
    xr = np.round(rng.normal(size=n), 1)
    codes = rng.integers(0, n_units, n)
    for query, reference in ((xq, xq), (xq, xr)):
        signs, ties = pair_matrices(query, reference, y, levels, codes, n_units, block=block)
        sign = np.sign(query[:, None] - reference[None, :]) * np.sign(y[:, None] - y[None, :])
        tied = (query[:, None] == reference[None, :]).astype(float)
        onehot = np.eye(n_units)[codes]
        np.testing.assert_allclose(signs, onehot.T @ sign @ onehot, atol=1e-9)
        np.testing.assert_allclose(ties, onehot.T @ tied @ onehot, atol=1e-9)
