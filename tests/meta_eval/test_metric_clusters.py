"""Metric clusters on human judgments: every pair's p-value equal to the paired test of that pair, and a seed giving
identical p-values and clusters (the corrections and AssignRanks themselves: tests/statistics)."""

import numpy as np
import pytest

from capeval.meta_eval.metric_clusters import accuracy_clusters, correlation_clusters
from capeval.meta_eval.significance import compare_accuracy, paired_bootstrap, paired_permutation


def _metrics(seed=0, n=200):
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 5, n).astype(float)
    scores = {"strong": human + rng.normal(0, 0.5, n), "twin_a": human + rng.normal(0, 2, n),
              "twin_b": human + rng.normal(0, 2, n), "noise": rng.normal(0, 1, n)}
    return scores, human, [f"img{k}" for k in rng.integers(0, 50, n)]


@pytest.mark.parametrize("test", ["permutation", "bootstrap"])
def test_correlation_clusters_use_the_pairwise_tests_and_are_deterministic(test):
    scores, human, units = _metrics()
    out = correlation_clusters(scores, human, statistic="kendall_tau_c", units=units, test=test, resamples=300,
                               seed=4, correction="none")
    assert out == correlation_clusters(scores, human, statistic="kendall_tau_c", units=units, test=test,
                                       resamples=300, seed=4, correction="none")
    assert out["order"][0] == "strong" and out["order"][-1] == "noise"
    assert out["ranks"]["strong"] == 1 and out["ranks"]["noise"] == max(out["ranks"].values())
    first, second = out["order"][1:3]
    assert out["ranks"][first] == out["ranks"][second]  # two metrics of equal quality share a cluster
    paired = (paired_permutation if test == "permutation" else paired_bootstrap)(
        scores["strong"], scores[first], human, statistic="kendall_tau_c", units=units, resamples=300, seed=4,
        alternative="greater")
    assert out["p_values"][f"strong > {first}"] == pytest.approx(paired["p_value"], abs=1e-12)
    for metric, (low, high) in out["ci"].items():
        assert low <= out["values"][metric] <= high


def test_holm_never_splits_more_than_no_correction():
    scores, human, units = _metrics(seed=1)
    options = dict(statistic="pearson", units=units, resamples=200, seed=0)
    plain = correlation_clusters(scores, human, correction="none", **options)
    holm = correlation_clusters(scores, human, correction="holm", **options)
    assert max(holm["ranks"].values()) <= max(plain["ranks"].values())
    assert all(holm["p_adjusted"][k] >= plain["p_values"][k] for k in plain["p_values"])


def test_accuracy_clusters_agree_with_compare_accuracy():
    rng = np.random.default_rng(3)
    categories = ["HC", "HI", "HM", "MM"] * 50
    units = np.arange(200) // 2
    correct = {"good": (rng.random((3, 200)) < 0.85).astype(float), "bad": (rng.random((3, 200)) < 0.6).astype(float)}
    out = accuracy_clusters(correct, categories=categories, units=units, resamples=200, seed=2)
    pair = compare_accuracy(correct["good"], correct["bad"], categories=categories, units=units, resamples=200,
                            seed=2, alternative="greater")
    assert out["p_values"]["good > bad"] == pytest.approx(pair["p_permutation"], abs=1e-12)
    assert out["values"]["good"] == pytest.approx(pair["value_a"])
    assert out["ranks"] == {"good": 1, "bad": 2}
