"""Paired tests against independent computations: Williams' t from Steiger's determinant form, loop-based bootstrap
and permutation tests over the documented draws (scipy statistics on explicit resamples), statsmodels' McNemar."""

import numpy as np
import pytest
from scipy import stats

from capeval.core.errors import InputError
from capeval.meta_eval.significance import (
    compare_accuracy, correct_pairs, mcnemar, paired_bootstrap, paired_permutation, williams, williams_test,
)

SCIPY = {"kendall_tau_b": lambda x, y: stats.kendalltau(x, y, variant="b").statistic,
         "kendall_tau_c": lambda x, y: stats.kendalltau(x, y, variant="c").statistic,
         "pearson": lambda x, y: stats.pearsonr(x, y).statistic,
         "spearman": lambda x, y: stats.spearmanr(x, y).statistic}
CHUNK = 256  # the documented block size of the draws


def _data(n=150, n_units=25, seed=0, gap=0.3):
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 6, n).astype(float)
    a = human + rng.normal(0, 1.0, n)
    b = human + rng.normal(0, 1.0 + gap, n)
    units = [f"u{k}" for k in rng.integers(0, n_units, n)]
    return a, b, human, units


def _draws(seed, resamples, n_units, high):
    """The documented draws: default_rng(seed), blocks of CHUNK rows of rng.integers(0, high, (block, n_units))."""
    rng = np.random.default_rng(seed)
    return np.concatenate([rng.integers(0, high, (min(CHUNK, resamples - s), n_units))
                           for s in range(0, resamples, CHUNK)])


def _unit_index(units):
    order = list(dict.fromkeys(units))
    return np.array([order.index(u) for u in units]), len(order)


def test_williams_matches_steigers_determinant_form():
    a, b, human, _ = _data(n=80, seed=2)
    r12, r13, r23 = np.corrcoef(human, a)[0, 1], np.corrcoef(human, b)[0, 1], np.corrcoef(a, b)[0, 1]
    n = len(human)
    determinant = np.linalg.det(np.array([[1, r12, r13], [r12, 1, r23], [r13, r23, 1]]))
    t = (r12 - r13) * np.sqrt((n - 1) * (1 + r23) /
                              (2 * (n - 1) / (n - 3) * determinant + ((r12 + r13) / 2) ** 2 * (1 - r23) ** 3))
    out = williams(a, b, human, alternative="greater")
    assert out["t"] == pytest.approx(t, rel=1e-10)
    assert out["p_value"] == pytest.approx(stats.t.sf(t, n - 3), rel=1e-10)
    two = williams(a, b, human)["p_value"]
    assert two == pytest.approx(2 * stats.t.sf(abs(t), n - 3), rel=1e-10)
    assert williams_test(r13, r12, r23, n, alternative="less")["p_value"] == pytest.approx(out["p_value"], rel=1e-10)


@pytest.mark.parametrize("statistic", ["kendall_tau_c", "pearson"])
def test_paired_bootstrap_equals_a_loop_over_the_same_unit_draws(statistic):
    a, b, human, units = _data(seed=3)
    index, n_units = _unit_index(units)
    deltas = []
    for counts_of_draw in _draws(7, 300, n_units, n_units):
        drawn = np.bincount(counts_of_draw, minlength=n_units)
        rows = [i for u in range(n_units) for _ in range(drawn[u]) for i in np.flatnonzero(index == u)]
        deltas.append(SCIPY[statistic](a[rows], human[rows]) - SCIPY[statistic](b[rows], human[rows]))
    deltas = np.array(deltas)
    out = paired_bootstrap(a, b, human, statistic=statistic, units=units, resamples=300, seed=7)
    assert out["delta"] == pytest.approx(SCIPY[statistic](a, human) - SCIPY[statistic](b, human), abs=1e-12)
    assert out["ci"] == pytest.approx(list(np.quantile(deltas, [0.025, 0.975])), abs=1e-12)
    assert out["p_value"] == pytest.approx(min(1, 2 * min(np.mean(deltas <= 0), np.mean(deltas >= 0))))
    greater = paired_bootstrap(a, b, human, statistic=statistic, units=units, resamples=300, seed=7,
                               alternative="greater")
    assert greater["p_value"] == pytest.approx(np.mean(deltas <= 0))


@pytest.mark.parametrize("statistic", ["kendall_tau_b", "spearman"])
def test_paired_permutation_equals_a_loop_over_the_same_unit_swaps(statistic):
    a, b, human, units = _data(seed=4, gap=0.2)
    index, n_units = _unit_index(units)
    za, zb = (a - a.mean()) / a.std(), (b - b.mean()) / b.std()
    delta = SCIPY[statistic](a, human) - SCIPY[statistic](b, human)
    null = []
    for swap in _draws(11, 300, n_units, 2):
        first = np.array([zb[i] if swap[index[i]] else za[i] for i in range(len(a))])
        second = np.array([za[i] if swap[index[i]] else zb[i] for i in range(len(a))])
        null.append(SCIPY[statistic](first, human) - SCIPY[statistic](second, human))
    null = np.array(null)
    for alternative, expected in (("two-sided", np.mean(np.abs(null) >= abs(delta))),
                                  ("greater", np.mean(null >= delta)), ("less", np.mean(null <= delta))):
        out = paired_permutation(a, b, human, statistic=statistic, units=units, resamples=300, seed=11,
                                 alternative=alternative)
        assert out["p_value"] == pytest.approx(expected, abs=1e-12)
    assert out["delta"] == pytest.approx(delta, abs=1e-12)


def test_same_seed_same_p_values_other_seed_other_draws():
    a, b, human, units = _data(seed=5, gap=0.1)
    first = paired_permutation(a, b, human, units=units, resamples=400, seed=1)
    assert first == paired_permutation(a, b, human, units=units, resamples=400, seed=1)
    boot = paired_bootstrap(a, b, human, units=units, resamples=400, seed=1)
    assert boot == paired_bootstrap(a, b, human, units=units, resamples=400, seed=1)
    assert boot["ci"] != paired_bootstrap(a, b, human, units=units, resamples=400, seed=2)["ci"]


def test_mcnemar_matches_statsmodels():
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    rng = np.random.default_rng(0)
    for n, p_b in ((40, 0.5), (400, 0.6), (12, 0.9)):
        a = rng.random(n) < 0.7
        b = rng.random(n) < p_b
        table = [[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]]
        for exact in (True, False):
            expected = sm_mcnemar(table, exact=exact, correction=True)
            out = mcnemar(a.astype(float), b.astype(float), exact=exact)
            assert out["p_value"] == pytest.approx(expected.pvalue, rel=1e-10)
            assert out["statistic"] == pytest.approx(expected.statistic, rel=1e-10)


def test_compare_accuracy_mcnemar_per_draw_and_category_and_bootstrap_loop():
    rng = np.random.default_rng(1)
    categories = np.array(["HC", "HI"] * 60)
    units = np.arange(120) // 3
    ca = (rng.random((2, 120)) < 0.75).astype(float)
    cb = (rng.random((2, 120)) < 0.65).astype(float)
    out = compare_accuracy(ca, cb, categories=categories, units=units, resamples=200, seed=3)
    value = lambda c, rows: np.mean([np.mean([d[rows][categories[rows] == k].mean() for k in ("HC", "HI")])
                                     for d in c])  # noqa: E731
    everything = np.arange(120)
    assert out["delta"] == pytest.approx(value(ca, everything) - value(cb, everything), abs=1e-12)
    deltas = []
    for draw in _draws(3, 200, 40, 40):
        drawn = np.bincount(draw, minlength=40)
        rows = np.concatenate([np.flatnonzero(units == u).repeat(drawn[u]) for u in range(40)])
        deltas.append(value(ca, rows) - value(cb, rows))
    assert out["ci"] == pytest.approx(list(np.quantile(deltas, [0.025, 0.975])), abs=1e-12)
    assert out["mcnemar"]["HI"][1] == mcnemar(ca[1][categories == "HI"], cb[1][categories == "HI"])
    assert len(out["mcnemar"]["all"]) == 2


def test_compare_accuracy_per_category_tests_use_the_category_pairs_across_draws():
    rng = np.random.default_rng(4)
    categories = np.array(["HC", "HI", "HM"] * 40)
    units = (np.arange(120) // 6 * 7) % 20  # 20 unit labels, not in first-seen order
    categories[(units % 2 == 1) & (categories == "HI")] = "HM"  # HI pairs only in the even units
    ca = (rng.random((3, 120)) < 0.8).astype(float)
    cb = (rng.random((3, 120)) < 0.6).astype(float)
    out = compare_accuracy(ca, cb, categories=categories, units=units, resamples=300, seed=5)
    assert set(out["per_category"]) == {"HC", "HI", "HM"}
    hi = np.flatnonzero(categories == "HI")
    codes, n_units = _unit_index(units[hi])
    assert n_units == 10  # resampled over the category's own units
    # the loop: units drawn with replacement, each drawn unit's HI pairs of every draw, mean over draws
    deltas = []
    for draw in _draws(5, 300, n_units, n_units):
        rows = np.concatenate([hi[codes == u] for u in draw])
        deltas.append(ca[:, rows].mean(1).mean() - cb[:, rows].mean(1).mean())
    found = out["per_category"]["HI"]
    assert found["delta"] == pytest.approx(ca[:, hi].mean() - cb[:, hi].mean(), abs=1e-12)
    assert found["ci"] == pytest.approx(list(np.quantile(deltas, [0.025, 0.975])), abs=1e-12)
    deltas = np.array(deltas)  # p-values bracketed: float ties at exactly 0 may fall either way
    low = min(1.0, 2 * min(np.mean(deltas < -1e-12), np.mean(deltas > 1e-12)))
    high = min(1.0, 2 * min(np.mean(deltas <= 1e-12), np.mean(deltas >= -1e-12)))
    assert low - 1e-12 <= found["p_bootstrap"] <= high + 1e-12
    # per-unit sign flips of the HI pairs (all draws of a unit together): the permutation p from the same swaps
    swaps = _draws(5, 300, n_units, 2)  # the documented swap masks: the same generator, 0/1 per unit
    null = []
    for swap in swaps:
        flip = swap[codes].astype(bool)
        a = np.where(flip, cb[:, hi], ca[:, hi]).mean()
        b = np.where(flip, ca[:, hi], cb[:, hi]).mean()
        null.append(a - b)
    null, observed = np.abs(null), abs(found["delta"])
    assert np.mean(null > observed + 1e-12) <= found["p_permutation"] <= np.mean(null >= observed - 1e-12)
    assert 0 < found["p_permutation"] < 1
    assert compare_accuracy(ca[:, hi], cb[:, hi], units=units[hi], resamples=300, seed=5)["per_category"] == {}
    with pytest.raises(InputError, match="'all' is the name of the overall group"):
        compare_accuracy(ca, cb, categories=np.where(categories == "HC", "all", categories), units=units)


def test_correct_pairs_agrees_with_pairwise_accuracy():
    from capeval.functional.correlation import pairwise_accuracy

    rng = np.random.default_rng(2)
    a, b = rng.integers(0, 3, 50).astype(float), rng.integers(0, 3, 50).astype(float)
    prefers = rng.random(50) < 0.5
    for ties in ("wrong", "half"):
        assert correct_pairs(a, b, prefers, ties=ties).mean() == pytest.approx(
            pairwise_accuracy(a, b, prefers, ties=ties))
        # the rule written out pair by pair: people's choice ranked higher is right; a metric tie is wrong or ½
        expected = [(0.5 if ties == "half" else 0.0) if x == y else float((x > y) == p) for x, y, p in zip(a, b, prefers)]
        assert correct_pairs(a, b, prefers, ties=ties).tolist() == expected


def test_bad_input_names_field_and_index():
    a, b, human, _ = _data(n=20)
    b[7] = np.nan
    with pytest.raises(InputError, match=r"metric_b: missing value \(NaN\) at row 7 \(1 of 20 rows\)"):
        paired_bootstrap(a, b, human, resamples=10)
    with pytest.raises(InputError, match="metric_a: 19 values, expected 20"):
        paired_permutation(a[:19], b, human, resamples=10)
    with pytest.raises(InputError, match="statistic"):
        paired_permutation(a, b, human, statistic="kendall", resamples=10)
    with pytest.raises(InputError, match="alternative"):
        paired_bootstrap(a, a, human, alternative="bigger", resamples=10)
