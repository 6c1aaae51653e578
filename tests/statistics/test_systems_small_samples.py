"""Significance on few images (issue #34 item 1): the randomization test counts ties and, on at most 16 images,
enumerates every swap pattern (the exact sign-flip test), so no p-value goes below 2/2ⁿ; the report states the
smallest p-value each test can give and the family size; a difference is marked only when the randomization test
allows it. Expected values come from an explicit enumeration with itertools.product."""

import itertools
import math

import numpy as np
import pytest

from capeval.core.corpus_statistics import CorpusStatistics, mean_statistics
from capeval.statistics.systems import EXACT_UNITS, compare_systems, minimum_resamples

TINY, SMALL = 1e-15, 1e-9


def bleu2(sums):
    """BLEU-2 from summed statistics [cand len, ref len, guess 1..2, match 1..2], pycocoevalcap's formula."""
    sums = np.atleast_2d(sums)
    out = []
    for cand, ref, g1, g2, m1, m2 in sums:
        score = ((m1 + TINY) / (g1 + SMALL) * (m2 + TINY) / (g2 + SMALL)) ** 0.5
        ratio = (cand + TINY) / (ref + SMALL)
        out.append(score * math.exp(1 - 1 / ratio) if ratio < 1 else score)
    return np.array(out)


def enumerated_p(a_units, b_units, value):
    """#(|δ*| ≥ |δ|) / 2ⁿ over every swap pattern, ties within float rounding counted."""
    n = len(a_units)
    observed = abs(value(b_units) - value(a_units))
    hits = 0
    for pattern in itertools.product((False, True), repeat=n):
        pa = [b if s else a for a, b, s in zip(a_units, b_units, pattern)]
        pb = [a if s else b for a, b, s in zip(a_units, b_units, pattern)]
        d = abs(value(pb) - value(pa))
        hits += d >= observed or math.isclose(d, observed, rel_tol=1e-9, abs_tol=1e-12)
    return hits / 2 ** n


def mean_value(units):
    return sum(units) / len(units)


def bleu_value(units):
    return float(bleu2(np.sum(np.array(units, dtype=float), axis=0))[0])


def small_systems(n, seed):
    rng = np.random.default_rng(seed)
    means = {s: rng.integers(0, 9, n) / 8 + shift for s, shift in (("a", 0.0), ("b", 0.1), ("c", 0.4))}
    rows = {}
    for s in means:
        cand = rng.integers(5, 12, n)
        guess = np.stack([cand, cand - 1], 1)
        match = np.floor(guess * rng.uniform(0.3, 1.0, (n, 1))).astype(int)
        rows[s] = np.column_stack([cand, cand + rng.integers(-2, 3, n), guess, match]).astype(float)
    stats = {s: {"mean": mean_statistics(means[s]), "bleu_2": CorpusStatistics(rows[s], bleu2)} for s in means}
    return stats, means, rows


@pytest.mark.parametrize("n", [2, 6, 11])
def test_the_randomization_test_on_few_images_is_the_exact_sign_flip_test(n):
    stats, means, rows = small_systems(n, seed=n)
    out = compare_systems(stats, resamples=200, seed=3)
    assert out["significance"]["randomization"] == "exact" and out["significance"]["n_units"] == n
    assert out["significance"]["smallest_p"]["paired-ar"] == 2 / 2 ** n
    for c in out["comparisons"]:
        a, b = c["system_a"], c["system_b"]
        if c["metric"] == "mean":
            expected = enumerated_p(list(means[a]), list(means[b]), mean_value)
        else:
            expected = enumerated_p([list(r) for r in rows[a]], [list(r) for r in rows[b]], bleu_value)
        assert c["p_randomization"] == pytest.approx(expected, abs=1e-15)
        assert c["p_randomization"] >= 2 / 2 ** n


def test_two_images_better_on_both_give_p_one_half_and_no_mark():
    """The case the issue found: 6 marks at p = 0.001 for two images. Two sign patterns of four reach |δ|."""
    stats = {"base": {"s": mean_statistics([0.1, 0.2])}, "model": {"s": mean_statistics([0.8, 0.9])}}
    with pytest.warns(UserWarning, match="exact randomization test cannot go below p = 0.5"):
        out = compare_systems(stats, baseline="base", resamples=1000)
    (c,) = out["comparisons"]
    assert c["p_randomization"] == 0.5 and not c["significant"]


def test_six_images_cannot_be_significant_after_holm_over_21_tests_as_in_the_readme_example():
    """7 metrics × 3 pairs on 6 images: each exact p-value is at least 2/64, Holm's smallest 21 × 2/64 > 0.05."""
    rng = np.random.default_rng(0)
    stats = {name: {f"m{k}": mean_statistics(rng.uniform(0, 1, 6) + shift) for k in range(7)}
             for name, shift in (("baseline", 0.0), ("model_a", 2.0), ("model_b", 4.0))}
    with pytest.warns(UserWarning, match="cannot show any of 21 differences significant"):
        out = compare_systems(stats, baseline="baseline", resamples=1000)
    significance = out["significance"]
    assert significance["family_size"] == 21
    assert significance["smallest_p"] == {"paired-bs": 1 / 1001, "paired-ar": 2 / 64}
    assert significance["smallest_adjusted_p"] == pytest.approx(21 * 2 / 64)
    assert all(c["p_randomization"] == 2 / 64 for c in out["comparisons"])  # every image better: the floor
    assert not any(c["significant"] for c in out["comparisons"])
    # sacrebleu's formula, for comparison, calls every one of them significant
    sacrebleu = compare_systems(stats, baseline="baseline", resamples=1000, p_values="sacrebleu")
    assert all(c["significant"] for c in sacrebleu["comparisons"])


def test_the_bootstrap_alone_never_marks_a_difference():
    """Six images all better: the bootstrap gives its floor 1/(R + 1), the exact test 2/64 > alpha = 0.025."""
    stats = {"a": {"s": mean_statistics(np.arange(6) / 10)}, "b": {"s": mean_statistics(np.arange(6) / 10 + 0.5)}}
    out = compare_systems(stats, resamples=1000, alpha=0.025)
    (c,) = out["comparisons"]
    assert c["p_bootstrap"] == 1 / 1001 and c["p_randomization"] == 2 / 64 and not c["significant"]
    assert compare_systems(stats, resamples=1000, alpha=0.05)["comparisons"][0]["significant"]


def test_above_the_exact_limit_the_swaps_are_drawn_and_the_floor_is_one_over_r_plus_one():
    stats, _, _ = small_systems(EXACT_UNITS + 1, seed=1)
    out = compare_systems(stats, resamples=500, seed=3)
    assert out["significance"]["randomization"] == "sampled"
    assert out["significance"]["smallest_p"] == {"paired-bs": 1 / 501, "paired-ar": 1 / 501}
    assert out["significance"]["family_size"] == 6


@pytest.mark.parametrize("confidence, least", [(0.95, 40), (0.9, 20), (0.99, 200)])
def test_fewer_resamples_than_a_percentile_interval_needs_are_refused(confidence, least):
    from capeval.core.errors import InputError

    assert minimum_resamples(confidence) == least
    stats = {"a": {"s": mean_statistics([0.1, 0.5, 0.3])}, "b": {"s": mean_statistics([0.2, 0.9, 0.4])}}
    with pytest.raises(InputError, match=rf"resamples: {least - 1} is too few .* use at least {least}"):
        compare_systems(stats, resamples=least - 1, confidence=confidence)
    out = compare_systems(stats, resamples=least, confidence=confidence)
    low, high = out["systems"]["a"]["s"]["ci"]
    assert low <= out["systems"]["a"]["s"]["value"] <= high
