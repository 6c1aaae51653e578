import numpy as np
import pytest
from scipy import stats

from capeval.core.errors import InputError
from capeval.functional.correlation import (
    STATISTICS, UndefinedStatisticWarning, bootstrap_interval, finite_rows, kendall_tau, pairwise_accuracy, pearson,
    spearman,
)


def _tau_c_by_hand(x, y):
    """Stuart's τ-c from concordant/discordant pair counts: 2(C − D) / (n² (m − 1)/m)."""
    n = len(x)
    c = d = 0
    for i in range(n):
        for j in range(i + 1, n):
            s = np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])
            c += s > 0
            d += s < 0
    m = min(len(set(x)), len(set(y)))
    return 2 * (c - d) / (n ** 2 * (m - 1) / m)


def test_statistics_with_ties_match_scipy_and_hand_computation():
    rng = np.random.default_rng(0)
    human = rng.integers(1, 5, 60).astype(float)  # heavy ties, as expert ratings
    metric = np.round(human + rng.normal(0, 1.0, 60), 1)
    metric[:10] = metric[10:20]  # ties in the metric too
    assert kendall_tau(metric, human, "b") == pytest.approx(stats.kendalltau(metric, human).statistic, abs=1e-12)
    assert kendall_tau(metric, human, "c") == pytest.approx(_tau_c_by_hand(metric, human), abs=1e-12)
    assert pearson(metric, human) == pytest.approx(np.corrcoef(metric, human)[0, 1], abs=1e-12)
    assert spearman(metric, human) == pytest.approx(stats.spearmanr(metric, human).statistic, abs=1e-12)


def test_bootstrap_interval_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(1)
    human = rng.normal(size=200)
    metric = human + rng.normal(size=200)
    first = bootstrap_interval(STATISTICS["pearson"], metric, human, resamples=300, seed=3)
    assert first == bootstrap_interval(STATISTICS["pearson"], metric, human, resamples=300, seed=3)
    assert first[0] < pearson(metric, human) < first[1]


def test_pairwise_accuracy_strict_and_half_ties():
    a, b = [0.9, 0.2, 0.5, 0.4], [0.1, 0.3, 0.5, 0.6]
    prefers_a = [True, True, False, False]
    assert pairwise_accuracy(a, b, prefers_a) == pytest.approx(2 / 4)       # tie counts as wrong
    assert pairwise_accuracy(a, b, prefers_a, ties="half") == pytest.approx(2.5 / 4)


def test_human_correlation_measurement_module():
    import evaluate

    from pathlib import Path

    module = evaluate.load(str(Path(__file__).resolve().parents[2] / "measurements" / "human_correlation"))
    metric, human = [0.1, 0.4, 0.35, 0.8, 0.7, 0.2], [1, 2, 2, 4, 3, 1]
    out = module.compute(predictions=metric, references=human, resamples=50)
    assert out["kendall_tau_c"] == pytest.approx(kendall_tau(metric, human, "c"))
    assert out["pearson_ci"][0] <= out["pearson_ci"][1]


def test_human_correlation_measurement_reports_krippendorffs_alpha_of_the_raters():
    import evaluate

    from pathlib import Path

    from capeval.functional.agreement import krippendorff_alpha

    module = evaluate.load(str(Path(__file__).resolve().parents[2] / "measurements" / "human_correlation"))
    units = ["a", "a", "a", "b", "b", "b", "c", "c", "c", "d", "d"]
    raters = [0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 2]
    human = [1, 2, 1, 3, 3, 4, 4, 4, 4, 2, 1]
    metric = [0.2, 0.2, 0.2, 0.6, 0.6, 0.6, 0.9, 0.9, 0.9, 0.3, 0.3]
    expected = krippendorff_alpha([[1, 3, 4, 2], [2, 3, 4, float("nan")], [1, 4, 4, 1]], "ordinal")
    out = module.compute(predictions=metric, references=human, resamples=0, units=units, raters=raters,
                         agreement_level="ordinal")
    assert out["krippendorff_alpha"] == pytest.approx(expected)
    assert 0 < expected < 1
    with pytest.raises(ValueError, match="both units and raters"):
        module.compute(predictions=metric, references=human, resamples=0, units=units)


# --- undefined statistics and missing values (issue #27) ------------------------------------------------------------

def _undefined(call, match):
    with pytest.warns(UndefinedStatisticWarning, match=match):
        value = call()
    return value


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_a_constant_column_or_a_single_row_is_undefined_not_a_number(name):
    statistic = STATISTICS[name]
    assert np.isnan(_undefined(lambda: statistic([0.5] * 6, [1, 2, 3, 4, 5, 6]), "metric scores are constant"))
    assert np.isnan(_undefined(lambda: statistic([1, 2, 3, 4, 5, 6], [3] * 6), "human scores are constant"))
    assert np.isnan(_undefined(lambda: statistic([1.0], [2.0]), "at least 2"))
    low, high = bootstrap_interval(statistic, [0.5] * 6, [1, 2, 3, 4, 5, 6], resamples=50)
    assert np.isnan(low) and np.isnan(high)  # an undefined statistic has no interval


def test_resamples_where_the_statistic_is_undefined_are_counted_in_a_warning():
    metric, human = [0, 0, 0, 0, 1.0], [1, 2, 3, 4, 5.0]
    rng = np.random.default_rng(4)  # the documented draws: rows drawn with replacement, seeded
    constant = sum(4 not in rng.integers(0, 5, 5) for _ in range(200))  # draws without row 4: metric constant
    assert 0 < constant < 200
    with pytest.warns(UndefinedStatisticWarning, match=f"undefined in {constant} of 200 resamples"):
        low, high = bootstrap_interval(STATISTICS["pearson"], metric, human, resamples=200, seed=4)
    assert np.isfinite(low) and np.isfinite(high)


def test_missing_and_infinite_values_are_refused_naming_the_column_and_rows():
    human = np.arange(10.0)
    metric = human.copy()
    metric[[1, 2, 4, 5, 7, 8, 9]] = np.nan
    for statistic in STATISTICS.values():
        with pytest.raises(InputError, match=r"metric: missing value \(NaN\) at rows 1, 2, 4, 5, 7, \.\.\. "
                                             r"\(7 of 10 rows\); pass nan_policy='omit'"):
            statistic(metric, human)
        with pytest.raises(InputError, match=r"human: missing value \(NaN\) at row 3 \(1 of 10 rows\)"):
            statistic(human, np.where(human == 3, np.nan, human))
        with pytest.raises(InputError, match=r"metric: infinite value at row 0"):
            statistic(np.where(human == 0, np.inf, human), human)


def test_omit_drops_the_rows_with_a_missing_value_in_any_column_and_says_which():
    kept, omitted = finite_rows({"metric": [1, np.nan, 3, 4], "human": [None, 2, 3, 5]}, "omit")
    assert omitted.tolist() == [0, 1]
    assert kept["metric"].tolist() == [3, 4] and kept["human"].tolist() == [3, 5]
    with pytest.raises(InputError, match="nan_policy"):
        finite_rows({"metric": [1.0]}, "drop")


def test_pairwise_accuracy_refuses_a_missing_score_instead_of_counting_the_pair_wrong():
    with pytest.raises(InputError, match=r"metric_b: missing value \(NaN\) at row 2"):
        pairwise_accuracy([0.9, 0.2, 0.5], [0.1, 0.3, np.nan], [True, False, True])
    assert np.isnan(_undefined(lambda: pairwise_accuracy([], [], []), "no pairs"))


def _human_correlation_module():
    import evaluate

    from pathlib import Path

    return evaluate.load(str(Path(__file__).resolve().parents[2] / "measurements" / "human_correlation"))


def test_human_correlation_refuses_a_missing_judgment_or_drops_it_when_asked():
    module = _human_correlation_module()
    metric, human = [0.1, 0.4, 0.35, 0.8, 0.7, 0.2, 0.5], [1, 2, 2, 4, np.nan, 1, 3]
    with pytest.raises(InputError, match=r"references: missing value \(NaN\) at row 4 \(1 of 7 rows\)"):
        module.compute(predictions=metric, references=human, resamples=20)
    out = module.compute(predictions=metric, references=human, resamples=20, nan_policy="omit")
    kept = [k for k in range(7) if k != 4]
    assert out["omitted"] == 1
    assert out["pearson"] == pytest.approx(np.corrcoef([metric[k] for k in kept], [human[k] for k in kept])[0, 1])
    assert out["kendall_tau_b"] == pytest.approx(stats.kendalltau([metric[k] for k in kept],
                                                                  [human[k] for k in kept]).statistic)


def test_human_correlation_reports_an_undefined_statistic_with_no_interval():
    module = _human_correlation_module()
    with pytest.warns(UndefinedStatisticWarning, match="metric scores are constant"):
        out = module.compute(predictions=[0.5] * 6, references=[1, 2, 2, 4, 3, 1], resamples=30)
    for name in STATISTICS:
        assert np.isnan(out[name]) and all(np.isnan(out[f"{name}_ci"]))
