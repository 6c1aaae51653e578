"""Significance clusters: AssignRanks semantics, and clusters in each score's direction (issue #36 item 3): a
lower-is-better key ranks its lowest value first, exactly as the negated values rank as higher-is-better; keys
left unnamed stay higher-is-better, bitwise as before."""

import json

import numpy as np
import pytest

from capeval.core.corpus_statistics import mean_statistics
from capeval.core.errors import InputError
from capeval.statistics.clusters import assign_ranks, best_first
from capeval.statistics.systems import compare_systems

SEED = 777


def test_assign_ranks_opens_a_rank_when_an_entry_of_the_current_rank_beats_it():
    sig = np.zeros((4, 4), bool)
    assert assign_ranks(sig) == [1, 1, 1, 1]
    sig[0, 1] = sig[0, 2] = sig[0, 3] = sig[1, 2] = sig[1, 3] = sig[2, 3] = True
    assert assign_ranks(sig) == [1, 2, 3, 4]
    sig = np.zeros((4, 4), bool)
    sig[0, 2] = True  # 2 is beaten by 0 (rank 1) -> new rank from 2; 3 is beaten only by 0, not by 2 -> rank 2
    sig[0, 3] = True
    assert assign_ranks(sig) == [1, 1, 2, 2]
    sig = np.zeros((4, 4), bool)
    sig[0, 1] = True  # 1 starts rank 2; 0 beats 3 but 0 is no longer in the current rank
    sig[0, 3] = True
    assert assign_ranks(sig) == [1, 2, 2, 2]


def test_best_first_follows_the_direction_and_keeps_equal_values_in_order():
    values = [0.3, 0.1, 0.3, 0.2]
    assert best_first(values) == [0, 2, 3, 1]
    assert best_first(values, higher_is_better=False) == [1, 3, 0, 2]


def expected_clusters(scores, comparisons, key, higher_is_better):
    """AssignRanks written from its definition, on the per-image means and the comparisons' significance marks."""
    means = {name: float(np.mean(s)) for name, s in scores.items()}
    ranked = sorted(means, key=lambda name: means[name], reverse=higher_is_better)
    beaten = {frozenset((c["system_a"], c["system_b"])) for c in comparisons if c["metric"] == key and c["significant"]}
    ranks, rank, current = {}, 0, []
    for name in ranked:
        if not current or any(frozenset((member, name)) in beaten for member in current):
            rank, current = rank + 1, []
        current.append(name)
        ranks[name] = rank
    return ranks


def separated(seed=11, n=400):
    """best > middle > twin > worst on their means, each gap far beyond the per-image noise but twin's (1e-4 on
    per-image differences of ±0.01: not significant)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0, 1, n)
    worst = base + rng.normal(0, 0.01, n)
    return {"worst": worst, "best": base + 0.3 + rng.normal(0, 0.01, n),
            "twin": worst + 1e-4 + 0.01 * (-1) ** np.arange(n), "middle": base + 0.15 + rng.normal(0, 0.01, n)}


def test_a_lower_is_better_key_ranks_the_lowest_value_first():
    scores = separated()
    stats = {name: {"error": mean_statistics(s), "score": mean_statistics(s)} for name, s in scores.items()}
    out = compare_systems(stats, resamples=300, seed=SEED, higher_is_better={"error": False})
    assert list(out["clusters"]["error"].items()) == [("worst", 1), ("twin", 1), ("middle", 2), ("best", 3)]
    assert list(out["clusters"]["score"].items()) == [("best", 1), ("middle", 2), ("twin", 3), ("worst", 3)]
    for key, higher in (("error", False), ("score", True)):
        assert out["clusters"][key] == expected_clusters(scores, out["comparisons"], key, higher)
        assert list(out["clusters"][key]) == sorted(scores, key=lambda s: np.mean(scores[s]), reverse=higher)


@pytest.mark.parametrize("seed", range(4))
def test_lower_is_better_clusters_equal_the_negated_values_clustered_as_higher_is_better(seed):
    """Moderate, noisy gaps, so that some pairs are significant and some are not."""
    rng = np.random.default_rng(seed)
    n = 60
    base = rng.uniform(0, 1, n)
    scores = {f"s{k}": base + shift + rng.normal(0, 0.25, n) for k, shift in enumerate(rng.uniform(0, 0.3, 5))}
    lower = compare_systems({name: {"m": mean_statistics(s)} for name, s in scores.items()}, resamples=200,
                            seed=SEED, higher_is_better={"m": False})
    negated = compare_systems({name: {"m": mean_statistics(-s)} for name, s in scores.items()}, resamples=200,
                              seed=SEED)
    assert [c["significant"] for c in lower["comparisons"]] == [c["significant"] for c in negated["comparisons"]]
    assert lower["clusters"]["m"] == negated["clusters"]["m"]
    assert list(lower["clusters"]["m"]) == list(negated["clusters"]["m"])  # best first, the same order
    assert lower["clusters"]["m"] == expected_clusters(scores, lower["comparisons"], "m", False)
    higher = compare_systems({name: {"m": mean_statistics(s)} for name, s in scores.items()}, resamples=200,
                             seed=SEED)
    assert list(higher["clusters"]["m"]) == list(reversed(list(lower["clusters"]["m"])))
    assert higher["clusters"]["m"] == expected_clusters(scores, higher["comparisons"], "m", True)


def test_keys_left_unnamed_are_higher_is_better_bitwise_as_before():
    scores = separated(seed=3, n=50)
    stats = {name: {"a": mean_statistics(s), "b": mean_statistics(s ** 2)} for name, s in scores.items()}
    plain = compare_systems(stats, resamples=400, seed=SEED)
    named = compare_systems(stats, resamples=400, seed=SEED, higher_is_better={"a": True})
    assert len(set(plain["clusters"]["a"].values())) == 3
    assert json.dumps(plain, sort_keys=True) == json.dumps(named, sort_keys=True)


def test_the_direction_must_name_a_metric_and_be_a_bool():
    stats = {name: {"a": mean_statistics(s)} for name, s in separated(n=20).items()}
    with pytest.raises(InputError, match=r"higher_is_better: 'b' is not a metric"):
        compare_systems(stats, resamples=100, higher_is_better={"b": False})
    with pytest.raises(InputError, match=r"higher_is_better\['a'\]: expected True or False, got 0"):
        compare_systems(stats, resamples=100, higher_is_better={"a": 0})
