import numpy as np
import pytest
from scipy import stats

from capeval.functional.correlation import (
    STATISTICS, bootstrap_interval, kendall_tau, pairwise_accuracy, pearson, spearman,
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
