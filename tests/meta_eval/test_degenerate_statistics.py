"""Undefined statistics are reported as undefined (NaN with the cause, no finite CI or p-value, no rank) and missing
values are refused naming the column and rows, or dropped and counted with nan_policy="omit" (issue #27)."""

from pathlib import Path

import numpy as np
import pytest

from capeval.core.errors import InputError
from capeval.functional.correlation import STATISTICS, UndefinedStatisticWarning
from capeval.meta_eval.metric_clusters import accuracy_clusters, correlation_clusters
from capeval.meta_eval.significance import compare_accuracy, paired_bootstrap, paired_permutation, williams, williams_test

MODULE = Path(__file__).resolve().parents[2] / "measurements" / "metric_comparison"


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    human = rng.integers(1, 5, n).astype(float)
    return human + rng.normal(0, 1, n), human + rng.normal(0, 2, n), human


@pytest.mark.parametrize("column", ["metric_a", "human"])
def test_metric_comparison_of_a_constant_column_is_undefined_with_no_p_value(column):
    import evaluate

    a, b, human = _data()
    inputs = {"metric_a": a.tolist(), "metric_b": b.tolist(), "human": human.tolist()}
    inputs[column] = [3.0] * len(human)
    module = evaluate.load(str(MODULE))
    with pytest.warns(UndefinedStatisticWarning, match="constant"):
        out = module.compute(**inputs, statistic="pearson", resamples=100)
    assert "constant" in out["undefined"]
    for key in ("value_a", "delta", "p_bootstrap", "p_permutation", "p_williams"):
        assert np.isnan(out[key]), key
    assert all(np.isnan(out["delta_ci"]))
    if column == "metric_a":  # B's correlation is still defined and reported
        assert out["value_b"] == pytest.approx(np.corrcoef(b, human)[0, 1])


@pytest.mark.parametrize("statistic", sorted(STATISTICS))
def test_paired_tests_of_an_undefined_statistic_give_nan_not_zero(statistic):
    a, _, human = _data()
    with pytest.warns(UndefinedStatisticWarning, match="metric_b: the metric scores are constant"):
        boot = paired_bootstrap(a, np.ones_like(a), human, statistic=statistic, resamples=50)
    with pytest.warns(UndefinedStatisticWarning):
        perm = paired_permutation(a, np.ones_like(a), human, statistic=statistic, resamples=50)
    assert np.isnan(boot["p_value"]) and np.isnan(perm["p_value"]) and all(np.isnan(boot["ci"]))


def test_omit_drops_the_rows_with_a_missing_value_and_counts_them():
    a, b, human = _data()
    units = [f"img{k // 3}" for k in range(len(human))]
    a_missing, human_missing = a.copy(), human.copy()
    a_missing[2], human_missing[[5, 6]] = np.nan, np.nan
    with pytest.raises(InputError, match=r"human: missing value \(NaN\) at rows 5, 6 \(2 of 24 rows\)"):
        paired_bootstrap(a_missing, b, human_missing, units=units, resamples=50)
    kept = [k for k in range(len(human)) if k not in (2, 5, 6)]
    options = dict(statistic="kendall_tau_b", resamples=80, seed=2)
    for test in (paired_bootstrap, paired_permutation):
        dropped = test(a_missing, b, human_missing, units=units, nan_policy="omit", **options)
        complete = test(a[kept], b[kept], human[kept], units=[units[k] for k in kept], **options)
        assert dropped["omitted"] == 3
        assert {k: v for k, v in dropped.items() if k != "omitted"} == \
            {k: v for k, v in complete.items() if k != "omitted"}
    assert williams(a_missing, b, human_missing, nan_policy="omit")["p_value"] == williams(
        a[kept], b[kept], human[kept])["p_value"]


def test_williams_t_of_zero_over_zero_or_of_an_undefined_correlation_is_nan():
    with pytest.warns(UndefinedStatisticWarning, match="denominator is 0"):
        out = williams_test(0.6, 0.6, 1.0, 30)  # r_ab = 1, r_a = r_b: t = 0/0 (formerly p = min(1, NaN) = 1)
    assert np.isnan(out["t"]) and np.isnan(out["p_value"])
    a, _, human = _data()
    with pytest.warns(UndefinedStatisticWarning, match="constant"):
        out = williams(a, np.full_like(a, 0.3), human)
    assert np.isnan(out["t"]) and np.isnan(out["p_value"])


def test_a_constant_metric_gets_no_rank_and_takes_no_part_in_the_clusters():
    a, b, human = _data(40)
    scores = {"constant": np.full(40, 0.5), "a": a, "b": b}
    with pytest.warns(UndefinedStatisticWarning, match="constant"):
        out = correlation_clusters(scores, human, statistic="kendall_tau_c", resamples=100, seed=1)
    alone = correlation_clusters({"a": a, "b": b}, human, statistic="kendall_tau_c", resamples=100, seed=1)
    assert out["order"] == alone["order"] and out["ranks"] == alone["ranks"]
    assert out["p_adjusted"] == alone["p_adjusted"]  # the correction's family holds the defined metrics only
    assert "metric scores are constant" in out["undefined"]["constant"]
    assert np.isnan(out["values"]["constant"]) and all(np.isnan(out["ci"]["constant"]))
    with pytest.warns(UndefinedStatisticWarning, match="human scores are constant"):
        flat = correlation_clusters({"a": a, "b": b}, np.full(40, 2.0), statistic="pearson", resamples=20)
    assert flat["order"] == [] and flat["ranks"] == {} and set(flat["undefined"]) == {"a", "b"}


def test_clusters_refuse_a_missing_score_or_drop_its_row_everywhere():
    a, b, human = _data(30)
    b[[3, 9]] = np.nan
    with pytest.raises(InputError, match=r"scores\['b'\]: missing value \(NaN\) at rows 3, 9 \(2 of 30 rows\)"):
        correlation_clusters({"a": a, "b": b}, human, statistic="pearson", resamples=20)
    out = correlation_clusters({"a": a, "b": b}, human, statistic="pearson", resamples=50, nan_policy="omit")
    kept = [k for k in range(30) if k not in (3, 9)]
    assert out["omitted"] == 2
    assert out["values"]["a"] == pytest.approx(np.corrcoef(a[kept], human[kept])[0, 1])


def test_pairwise_outcomes_must_be_right_wrong_or_half():
    correct = np.ones((2, 6))
    broken = correct.copy()
    broken[1, 4] = np.nan
    with pytest.raises(InputError, match=r"correct_b: outcomes must be 0, 0.5 or 1; .* row 4 \(1 of 6 rows\)"):
        compare_accuracy(correct, broken, resamples=10)
    with pytest.raises(InputError, match=r"correct\['b'\]"):
        accuracy_clusters({"a": correct, "b": broken}, resamples=10)


def test_one_unit_gives_the_values_but_no_interval_or_p_value():
    """One unit: every bootstrap resample is the sample itself (formerly a zero-width CI and p = 0 or 1)."""
    a, b, human = _data()
    units = ["img"] * len(human)
    for test in (paired_bootstrap, paired_permutation):
        with pytest.warns(UndefinedStatisticWarning, match="1 unit"):
            out = test(a, b, human, statistic="pearson", units=units, resamples=50)
        assert out["delta"] == pytest.approx(np.corrcoef(a, human)[0, 1] - np.corrcoef(b, human)[0, 1])
        assert np.isnan(out["p_value"]) and "1 unit" in out["undefined"]
    assert all(np.isnan(paired_bootstrap(a, b, human, units=units, resamples=20)["ci"]))
    with pytest.warns(UndefinedStatisticWarning, match="1 unit"):
        clusters = correlation_clusters({"a": a, "b": b}, human, statistic="pearson", units=units, resamples=30)
    assert all(np.isnan(clusters["ci"]["a"])) and all(np.isnan(list(clusters["p_values"].values())))
    assert set(clusters["ranks"].values()) == {1}  # nothing is significantly better than anything
    correct_a, correct_b = np.array([[1, 1, 0, 1]]), np.array([[0, 1, 0, 0]])
    with pytest.warns(UndefinedStatisticWarning, match="1 unit"):
        accuracy = compare_accuracy(correct_a, correct_b, units=["img"] * 4, resamples=30)
    assert accuracy["delta"] == pytest.approx(0.5)
    assert np.isnan(accuracy["p_bootstrap"]) and np.isnan(accuracy["p_permutation"]) and all(np.isnan(accuracy["ci"]))
