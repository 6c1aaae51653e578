"""No p-value where no test ran (#40 item 6): with one system, fewer than 2 images or every difference undefined the
family is empty and ``smallest_p`` / ``smallest_adjusted_p`` are None (not 2/2⁰ = 2.0, not an adjusted floor of an
empty family); wherever tests ran, every p-value given is a probability. Expected floors are the formulas of the
module docstring: 1/(R + 1) for the bootstrap, 2/2ⁿ for the exact randomization test."""

import math
import warnings

import numpy as np
import pytest

from capeval.core.corpus_statistics import mean_statistics
from capeval.statistics.systems import EXACT_UNITS, compare_systems

P_FIELDS = ("p_bootstrap", "p_randomization", "p_bootstrap_adjusted", "p_randomization_adjusted")


def systems(names, n, seed=0):
    rng = np.random.default_rng(seed)
    return {name: {"m": mean_statistics(rng.uniform(0, 1, n) + 0.2 * k), "k": mean_statistics(rng.uniform(0, 1, n))}
            for k, name in enumerate(names)}


def compared(statistics, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compare_systems(statistics, resamples=options.pop("resamples", 100), seed=5, **options)
    return out, [str(w.message) for w in caught]


@pytest.mark.parametrize("names, n", [(["only"], 12), (["only"], 1), (["only"], 0), (["a", "b"], 1), (["a", "b"], 0),
                                      (["a", "b", "c"], 1)])
def test_no_test_ran_so_no_smallest_p(names, n):
    out, messages = compared(systems(names, n))
    significance = out["significance"]
    assert significance["family_size"] == 0
    assert significance["smallest_p"] is None and significance["smallest_adjusted_p"] is None
    assert not any("resamples cannot show" in m for m in messages)
    for c in out["comparisons"]:
        assert all(math.isnan(c[f]) for f in P_FIELDS) and c["significant"] is False and c["undefined"]


def test_every_difference_undefined_is_no_test_either():
    statistics = systems(["a", "b"], 8)
    out, _ = compared(statistics, undefined={"m": {"a": "NaN on 2 images"}, "k": {"b": "NaN on 1 image"}})
    assert out["significance"]["family_size"] == 0 and out["significance"]["smallest_p"] is None
    assert out["significance"]["smallest_adjusted_p"] is None


@pytest.mark.parametrize("n", [2, 3, 7, EXACT_UNITS, EXACT_UNITS + 1, 40])
@pytest.mark.parametrize("p_values", ["noreen", "sacrebleu"])
@pytest.mark.parametrize("correction", ["holm", "bonferroni", "none"])
def test_where_tests_ran_every_p_is_a_probability(n, p_values, correction):
    out, _ = compared(systems(["a", "b", "c"], n, seed=n), p_values=p_values, correction=correction, resamples=60)
    significance = out["significance"]
    exact = p_values == "noreen" and n <= EXACT_UNITS
    assert significance["family_size"] == 6
    assert significance["smallest_p"] == {"paired-bs": 1 / 61, "paired-ar": 2 / 2 ** n if exact else 1 / 61}
    assert 0 < significance["smallest_adjusted_p"] <= 1
    assert all(0 < p <= 1 for p in significance["smallest_p"].values())
    for c in out["comparisons"]:
        for f in P_FIELDS:
            assert math.isnan(c[f]) or 0 <= c[f] <= 1, (f, c[f])
