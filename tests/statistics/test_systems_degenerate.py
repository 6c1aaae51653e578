"""System comparison on degenerate inputs: refused (InputError naming the field) or undefined (NaN with the cause,
an UndefinedStatisticWarning, no finite CI or p-value, no rank), never a made-up p-value."""

import math

import numpy as np
import pytest

from capeval.core.errors import InputError
from capeval.core.corpus_statistics import CorpusStatistics, mean_statistics
from capeval.functional.correlation import UndefinedStatisticWarning
from capeval.statistics.systems import compare_systems


def _scores(n=30, seed=0):
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(0, 1, n) + shift for name, shift in (("a", 0.0), ("b", 0.5), ("c", 1.0))}


def _stats(scores):
    return {name: {"score": mean_statistics(s)} for name, s in scores.items()}


def _pair(out, a, b, metric="score"):
    return next(c for c in out["comparisons"]
                if {c["system_a"], c["system_b"]} == {a, b} and c["metric"] == metric)


def test_systems_scored_on_different_numbers_of_images_are_refused():
    scores = _scores()
    stats = _stats(scores)
    stats["b"] = {"score": mean_statistics(scores["b"][:-1])}
    with pytest.raises(InputError, match=r"statistics\['b'\]\['score'\]: 29 units, expected 30"):
        compare_systems(stats, resamples=50)


@pytest.mark.parametrize("case, message", [
    ("missing_metric", r"statistics\['b'\]: metrics differ from 'a''s: missing \['other'\]"),
    ("not_statistics", r"statistics\['b'\]\['score'\]: expected a CorpusStatistics"),
    ("nan_unit", r"statistics\['c'\]\['score'\]: non-finite statistics at units 3"),
    ("baseline", r"baseline: 'zzz' is not one of the systems \['a', 'b', 'c'\]"),
    ("no_systems", r"statistics: no system given"),
    ("resamples", r"resamples: 39 is too few for a 95% percentile interval \(each 2.5% tail needs at least one "
                  r"resample\): use at least 40"),
    ("p_values", r"p_values: 'strict' is not one of \('noreen', 'sacrebleu'\)"),
    ("confidence", r"confidence: 1.5 is not in \(0, 1\)"),
    ("alpha", r"alpha: 0 is not in \(0, 1\)"),
    ("correction", r"correction: 'fdr' is not one of"),
])
def test_bad_inputs_are_refused_naming_the_field(case, message):
    scores = _scores()
    stats = _stats(scores)
    options = {}
    if case == "missing_metric":
        stats["a"]["other"] = mean_statistics(scores["a"])
    elif case == "not_statistics":
        stats["b"]["score"] = scores["b"].tolist()
    elif case == "nan_unit":
        broken = scores["c"].copy()
        broken[3] = np.nan
        stats["c"]["score"] = mean_statistics(broken)
    elif case == "baseline":
        options["baseline"] = "zzz"
    elif case == "no_systems":
        stats = {}
    elif case == "resamples":
        options["resamples"] = 39
    elif case == "p_values":
        options["p_values"] = "strict"
    elif case == "confidence":
        options["confidence"] = 1.5
    elif case == "alpha":
        options["alpha"] = 0
    else:
        options["correction"] = "fdr"
    with pytest.raises(InputError, match=message):
        compare_systems(stats, **{"resamples": 50, **options})


def test_one_image_gives_values_but_no_interval_p_value_or_rank_difference():
    stats = _stats({name: s[:1] for name, s in _scores().items()})
    with pytest.warns(UndefinedStatisticWarning, match="1 unit"):
        out = compare_systems(stats, resamples=50)
    assert out["systems"]["c"]["score"]["value"] == pytest.approx(_scores()["c"][0])
    assert all(math.isnan(x) for s in out["systems"].values() for x in s["score"]["ci"])
    for c in out["comparisons"]:
        assert math.isnan(c["p_bootstrap"]) and math.isnan(c["p_randomization"]) and not c["significant"]
        assert math.isnan(c["p_bootstrap_adjusted"]) and "1 unit" in c["undefined"]
    assert out["clusters"]["score"] == {"c": 1, "b": 1, "a": 1}
    assert "1 unit" in out["undefined"]["score"]["a vs b"]


def test_identical_systems_get_p_1_when_ties_are_counted():
    """Every resample ties a zero difference: both tests give p = 1, no warning, nothing undefined."""
    scores = _scores()
    scores["copy"] = scores["a"].copy()
    out = compare_systems(_stats(scores), resamples=100)
    same = _pair(out, "a", "copy")
    assert same["delta"] == 0 and same["p_bootstrap"] == 1 and same["p_randomization"] == 1
    assert not same["significant"] and same["undefined"] is None and same["delta_ci"] == [0.0, 0.0]
    assert out["clusters"]["score"]["a"] == out["clusters"]["score"]["copy"]


def test_identical_systems_have_no_p_value_instead_of_sacrebleus_floor():
    """sacrebleu counts no resample above a zero difference and reports p = 1/(R+1): "significant" for a system
    compared with itself. With its formula (``p_values="sacrebleu"``) the difference is the same on every resample:
    undefined, not significant."""
    scores = _scores()
    scores["copy"] = scores["a"].copy()
    with pytest.warns(UndefinedStatisticWarning, match="same on every resample"):
        out = compare_systems(_stats(scores), resamples=100, p_values="sacrebleu")
    same = _pair(out, "a", "copy")
    assert same["delta"] == 0 and math.isnan(same["p_bootstrap"]) and math.isnan(same["p_randomization"])
    assert not same["significant"] and "same on every resample" in same["undefined"]
    assert same["delta_ci"] == [0.0, 0.0]  # the difference itself is known
    assert _pair(out, "a", "c")["p_bootstrap"] < 0.05  # the other pairs are tested as usual
    assert out["clusters"]["score"]["a"] == out["clusters"]["score"]["copy"]


def test_a_constant_per_image_difference_is_tested():
    """Shifted by 0.25 on every image: no bootstrap resample and no swap pattern reaches the observed difference
    but the unswapped ones, so both tests give their floor 1/(R + 1) (30 images: sampled swaps) and the pair is
    significant; the interval of the difference is the point 0.25."""
    scores = _scores()
    scores["shifted"] = scores["a"] + 0.25
    out = compare_systems(_stats({"a": scores["a"], "shifted": scores["shifted"]}), resamples=100)
    shifted = _pair(out, "a", "shifted")
    swaps = np.random.default_rng(12345).integers(0, 2, (100, 30))
    unswapped = int((swaps.sum(axis=1) % 30 == 0).sum())  # all or none swapped: |δ*| = |δ|
    assert shifted["delta"] == pytest.approx(0.25) and shifted["delta_ci"] == pytest.approx([0.25, 0.25])
    assert shifted["p_bootstrap"] == 1 / 101 and shifted["p_randomization"] == (unswapped + 1) / 101
    assert shifted["significant"] and shifted["undefined"] is None


def test_a_constant_per_image_difference_of_a_mean_metric_has_no_p_value_with_sacrebleus_formula():
    scores = _scores()
    scores["shifted"] = scores["a"] + 0.25
    with pytest.warns(UndefinedStatisticWarning, match="same on every resample"):
        out = compare_systems(_stats(scores), resamples=100, p_values="sacrebleu")
    shifted = _pair(out, "a", "shifted")
    assert shifted["delta"] == pytest.approx(0.25)
    assert math.isnan(shifted["p_bootstrap"]) and math.isnan(shifted["p_randomization"])


def test_an_undefined_value_has_no_interval_comparison_or_rank():
    stats = _stats(_scores())
    zero = np.zeros((30, 2))  # 0/0: a ratio metric with nothing to count on these images
    stats["empty"] = {"score": CorpusStatistics(zero, lambda sums: sums[:, 0] / sums[:, 1])}
    with pytest.warns(UndefinedStatisticWarning, match="empty"):
        out = compare_systems(stats, resamples=100)
    entry = out["systems"]["empty"]["score"]
    assert math.isnan(entry["value"]) and all(math.isnan(x) for x in entry["ci"])
    assert "empty" in out["undefined"]["score"] and "empty" not in out["clusters"]["score"]
    with_empty = _pair(out, "a", "empty")
    assert math.isnan(with_empty["delta"]) and math.isnan(with_empty["p_randomization"])
    assert not with_empty["significant"]
    defined = [c for c in out["comparisons"] if "empty" not in (c["system_a"], c["system_b"])]
    from statsmodels.stats.multitest import multipletests

    np.testing.assert_allclose([c["p_bootstrap_adjusted"] for c in defined],
                               multipletests([c["p_bootstrap"] for c in defined], method="holm")[1])
    assert out["clusters"]["score"] == {"c": 1, "b": 2, "a": 3}


def test_too_few_resamples_for_the_family_are_warned_about():
    """Each p-value is at least 1/(R + 1); Holm multiplies the smallest by the family size (3 pairs here)."""
    stats = _stats(_scores())
    with pytest.warns(UserWarning, match=r"58 resamples cannot show any of 3 differences significant .* at least 59"):
        out = compare_systems(stats, resamples=58)
    assert out["significance"]["smallest_adjusted_p"] == pytest.approx(3 / 59)
    assert not any(c["significant"] for c in out["comparisons"])
    enough = compare_systems(stats, resamples=59)
    assert enough["significance"]["smallest_adjusted_p"] == pytest.approx(3 / 60)
    assert enough["comparisons"][-1]["significant"]  # b vs c: 0.5 apart, uniform [0, 1) scores on 30 images
