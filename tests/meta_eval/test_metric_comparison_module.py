"""The metric_comparison evaluate module returns the paired tests of capeval.meta_eval.significance."""

from pathlib import Path

import numpy as np
import pytest

from capeval.meta_eval.significance import paired_bootstrap, paired_permutation, williams

MODULE = Path(__file__).resolve().parents[2] / "measurements" / "metric_comparison"


def test_metric_comparison_module_gives_the_paired_tests():
    import evaluate

    rng = np.random.default_rng(0)
    human = rng.integers(1, 5, 60).astype(float)
    a, b = human + rng.normal(0, 1, 60), human + rng.normal(0, 2, 60)
    units = [f"img{k // 3}" for k in range(60)]
    module = evaluate.load(str(MODULE))
    out = module.compute(metric_a=a.tolist(), metric_b=b.tolist(), human=human.tolist(), statistic="pearson",
                         units=units, resamples=200, seed=3)
    boot = paired_bootstrap(a, b, human, statistic="pearson", units=units, resamples=200, seed=3)
    perm = paired_permutation(a, b, human, statistic="pearson", units=units, resamples=200, seed=3)
    assert out["delta"] == pytest.approx(boot["delta"]) and out["delta_ci"] == pytest.approx(boot["ci"])
    assert out["p_bootstrap"] == boot["p_value"] and out["p_permutation"] == perm["p_value"]
    assert out["p_williams"] == pytest.approx(williams(a, b, human)["p_value"])
    assert out["units"] == 20


def test_metric_comparison_app_compare_gives_the_paired_tests():
    import importlib.util

    spec = importlib.util.spec_from_file_location("metric_comparison_app", MODULE / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    a, b, human = [0.9, 0.1, 0.4, 0.8, 0.3, 0.7], [0.5, 0.4, 0.1, 0.9, 0.6, 0.2], [4, 1, 2, 4, 1, 3]
    out = app.compare(" ".join(map(str, a)), ", ".join(map(str, b)), " ".join(map(str, human)), "kendall_tau_c", 100)
    boot = paired_bootstrap(a, b, human, statistic="kendall_tau_c", resamples=100)
    assert out["delta"] == pytest.approx(boot["delta"]) and out["p_bootstrap"] == boot["p_value"]
    assert [out["delta_ci_low"], out["delta_ci_high"]] == pytest.approx(boot["ci"])
    assert "p_williams" not in out
