"""Several systems compared on the same images (issue #28 item 4): values and bootstrap CIs, paired bootstrap
(sacrebleu --paired-bs) and approximate randomisation (--paired-ar) p-values, Holm over metrics × pairs, clusters.

Expected values come from an explicit pure-Python loop over the resampled index lists, from sacrebleu's own
``sacrebleu.significance`` functions driven with the same per-sentence statistics, and from statsmodels."""

import math
import types

import numpy as np
import pytest

from capeval.core.corpus_statistics import CorpusStatistics, mean_statistics
from capeval.statistics.systems import compare_systems

SEED = 777
TINY, SMALL = 1e-15, 1e-9  # pycocoevalcap's BLEU smoothing


# BLEU-4 from summed statistics (columns: candidate length, reference length, guesses 1..4, matches 1..4) -------------
def bleu4_vectorised(sums: np.ndarray) -> np.ndarray:
    sums = np.asarray(sums, dtype=np.float64)
    log_precision = sum(np.log((sums[:, 6 + k] + TINY) / (sums[:, 2 + k] + SMALL)) for k in range(4)) / 4
    ratio = (sums[:, 0] + TINY) / (sums[:, 1] + SMALL)
    brevity = np.where(ratio < 1, 1 - 1 / ratio, 0.0)
    return np.exp(log_precision + brevity)


def bleu4_scalar(sums) -> float:
    """The same formula written independently, one corpus at a time (pycocoevalcap's bleu_scorer)."""
    cand, ref, guess, match = sums[0], sums[1], sums[2:6], sums[6:10]
    score = 1.0
    for k in range(4):
        score *= (match[k] + TINY) / (guess[k] + SMALL)
    score **= 0.25
    ratio = (cand + TINY) / (ref + SMALL)
    return score * math.exp(1 - 1 / ratio) if ratio < 1 else score


def bleu_rows(rng, n):
    """Integer per-image statistics (exact in float32 and float64 sums)."""
    cand = rng.integers(6, 14, n)
    ref = cand + rng.integers(-3, 4, n)
    guess = np.stack([np.maximum(cand - k, 0) for k in range(4)], 1)
    match = np.floor(guess * rng.uniform(0.2, 0.9, (n, 1)) ** np.arange(1, 5)).astype(int)
    return np.column_stack([cand, ref, guess, match]).astype(float)


def eighths(rng, n, shift):
    """Sentence scores in multiples of 1/8 (their sums are exact in float32 and float64)."""
    return (rng.integers(0, 9, n) + shift) / 8


def systems(n=40, seed=0):
    rng = np.random.default_rng(seed)
    rows = {name: bleu_rows(rng, n) for name in ("base", "mid", "top")}
    means = {"base": eighths(rng, n, 0), "mid": eighths(rng, n, 1), "top": eighths(rng, n, 2)}
    stats = {name: {"mean": mean_statistics(means[name]), "bleu_4": CorpusStatistics(rows[name], bleu4_vectorised)}
             for name in ("base", "mid", "top")}
    return stats, means, rows


# (a) an explicit loop over resampled index lists ---------------------------------------------------------------
def loop_value(metric, unit_values, index_list):
    if metric == "mean":
        return sum(unit_values[i] for i in index_list) / len(index_list)
    sums = [sum(unit_values[i][c] for i in index_list) for c in range(10)]
    return bleu4_scalar(sums)


def loop_quantile(values, q):
    values = sorted(values)
    position = q * (len(values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def sacrebleu_formula_p(statistics, observed):
    """(#(statistic > observed) + 1) / (resamples + 1), written out."""
    return (sum(1 for s in statistics if s > observed) + 1) / (len(statistics) + 1)


def noreen_formula_p(statistics, observed):
    """(#(statistic ≥ observed) + 1) / (resamples + 1), a statistic within float rounding of the observed one a tie."""
    ties = sum(1 for s in statistics if s >= observed or math.isclose(s, observed, rel_tol=1e-9, abs_tol=1e-12))
    return (ties + 1) / (len(statistics) + 1)


FORMULAS = {"sacrebleu": sacrebleu_formula_p, "noreen": noreen_formula_p}


@pytest.mark.parametrize("p_values", ["noreen", "sacrebleu"])
def test_values_cis_and_p_values_equal_an_explicit_loop_over_the_resampled_index_lists(p_values):
    """40 images: more than the exact test enumerates, so both tests draw their resamples; each counting rule as
    written out here."""
    stats, means, rows = systems()
    n, resamples = 40, 300
    formula = FORMULAS[p_values]
    out = compare_systems(stats, resamples=resamples, seed=SEED, p_values=p_values)
    # the documented draws (capeval.statistics.resampling): one index matrix and one swap matrix for everything
    indices = np.random.default_rng(SEED).integers(0, n, (resamples, n)).tolist()
    swaps = np.random.default_rng(SEED).integers(0, 2, (resamples, n)).tolist()
    data = {"mean": {s: means[s].tolist() for s in means}, "bleu_4": {s: rows[s].tolist() for s in rows}}
    everything = list(range(n))
    for metric, per_system in data.items():
        resampled = {s: [loop_value(metric, per_system[s], idx) for idx in indices] for s in per_system}
        for s in per_system:
            entry = out["systems"][s][metric]
            assert entry["value"] == pytest.approx(loop_value(metric, per_system[s], everything), rel=1e-12)
            expected_ci = [loop_quantile(resampled[s], 0.025), loop_quantile(resampled[s], 0.975)]
            np.testing.assert_allclose(entry["ci"], expected_ci, rtol=1e-12)
        for comparison in (c for c in out["comparisons"] if c["metric"] == metric):
            a, b = comparison["system_a"], comparison["system_b"]
            delta = loop_value(metric, per_system[b], everything) - loop_value(metric, per_system[a], everything)
            assert comparison["delta"] == pytest.approx(delta, rel=1e-12, abs=1e-15)
            spread = [abs(x - y) for x, y in zip(resampled[b], resampled[a])]
            centred = [d - sum(spread) / len(spread) for d in spread]
            assert comparison["p_bootstrap"] == formula(centred, abs(delta))
            null = []
            for mask in swaps:
                pseudo_a = [per_system[b][u] if mask[u] else per_system[a][u] for u in everything]
                pseudo_b = [per_system[a][u] if mask[u] else per_system[b][u] for u in everything]
                null.append(abs(loop_value(metric, pseudo_a, everything) - loop_value(metric, pseudo_b, everything)))
            assert comparison["p_randomization"] == formula(null, abs(delta))
    assert out["significance"]["seed"] == SEED and out["significance"]["resamples"] == resamples
    assert out["significance"]["tests"] == ["paired-bs", "paired-ar"]
    assert out["significance"]["randomization"] == "sampled" and out["significance"]["p_values"] == p_values
    again = compare_systems(stats, resamples=resamples, seed=SEED, p_values=p_values)
    assert again["comparisons"] == out["comparisons"] and again["systems"] == out["systems"]


# (b) sacrebleu's own paired_bs / paired_ar functions on the same per-sentence statistics -----------------------------
class StatisticsMetric:
    """sacrebleu's Metric interface over given per-sentence statistics; ``hypotheses`` are N copies of a system name."""

    def __init__(self, per_system, combine):
        self.per_system, self.combine = per_system, combine

    def _extract_corpus_statistics(self, hypotheses, references):
        return self.per_system[hypotheses[0]]

    def _compute_score_from_stats(self, summed):
        return types.SimpleNamespace(score=float(self.combine(np.asarray(summed, dtype=np.float64)[None])[0]))

    def _aggregate_and_compute(self, stats):
        return self._compute_score_from_stats(np.asarray(stats, dtype=np.float64).sum(0))


class SwapDraws:
    """Stands in for numpy's Generator inside sacrebleu's paired_ar only: its pos_sel is our swap matrix
    (numpy draws 0/1 ints and bools from different streams)."""

    def __init__(self, masks):
        self.masks = masks

    def integers(self, high, size, dtype):
        assert high == 2 and tuple(size) == self.masks.shape and dtype is bool
        return self.masks.astype(bool)


def sacrebleu_runs(metric, baseline, system, resamples, monkeypatch):
    from sacrebleu import significance

    hypotheses = {name: [name] * len(metric.per_system[name]) for name in metric.per_system}
    info = {"m": (metric.per_system[baseline],
                  significance.Result(metric._aggregate_and_compute(metric.per_system[baseline]).score))}
    _, bs = significance._paired_bs_test(info, system, hypotheses[system], None, {"m": metric}, n_samples=resamples,
                                         seed=SEED)
    n = len(hypotheses[system])
    masks = np.random.default_rng(SEED).integers(0, 2, (resamples, n))
    shim = types.SimpleNamespace(**{k: getattr(np, k) for k in ("array", "abs", "sum")},
                                 random=types.SimpleNamespace(default_rng=lambda seed: SwapDraws(masks)))
    with monkeypatch.context() as patch:
        patch.setattr(significance, "np", shim)
        _, ar = significance._paired_ar_test(info, system, hypotheses[system], None, {"m": metric},
                                             n_samples=resamples, seed=SEED)
    monkeypatch.setenv("SACREBLEU_SEED", str(SEED))
    _, resampled = significance._bootstrap_resample(metric.per_system[system], metric, resamples)
    return bs["m"].p_value, ar["m"].p_value, [r.score for r in resampled]


@pytest.mark.parametrize("metric", ["mean", "bleu_4"])
def test_p_values_equal_sacrebleus_paired_bs_and_paired_ar_on_the_same_sentence_statistics(metric, monkeypatch):
    """``p_values="sacrebleu"``. paired-bs: sacrebleu's own draws (``rng.choice`` of ``default_rng(seed)``, the same
    as ours); paired-ar: sacrebleu's ``rng.integers(2, dtype=bool)`` replaced by our 0/1 swap matrix in this test
    only."""
    stats, _, _ = systems(n=60, seed=3)
    resamples = 500
    out = compare_systems(stats, baseline="base", resamples=resamples, seed=SEED, p_values="sacrebleu")
    metric_view = StatisticsMetric({s: stats[s][metric].per_unit for s in stats}, stats["base"][metric].combine)
    for comparison in (c for c in out["comparisons"] if c["metric"] == metric):
        a, b = comparison["system_a"], comparison["system_b"]
        p_bs, p_ar, resampled_b = sacrebleu_runs(metric_view, a, b, resamples, monkeypatch)
        assert comparison["p_bootstrap"] == p_bs
        assert comparison["p_randomization"] == p_ar
        np.testing.assert_allclose(out["systems"][b][metric]["ci"], np.quantile(resampled_b, [0.025, 0.975]),
                                   rtol=1e-12)
    assert [c["system_a"] for c in out["comparisons"]][:2] == ["base", "base"]  # the baseline is system_a


# (c) Holm over metrics × pairs --------------------------------------------------------------------------------
def test_holm_adjusts_every_metric_and_pair_as_one_family_per_test_as_statsmodels():
    from statsmodels.stats.multitest import multipletests

    stats, _, _ = systems(n=30, seed=5)
    out = compare_systems(stats, resamples=200, seed=SEED)
    comparisons = out["comparisons"]
    assert len(comparisons) == 2 * 3  # metrics × pairs
    for test in ("bootstrap", "randomization"):
        raw = [c[f"p_{test}"] for c in comparisons]
        expected = multipletests(raw, method="holm")[1]
        np.testing.assert_allclose([c[f"p_{test}_adjusted"] for c in comparisons], expected, rtol=1e-12)
    for c in comparisons:
        assert c["significant"] == (c["p_bootstrap_adjusted"] <= 0.05 and c["p_randomization_adjusted"] <= 0.05)
    none = compare_systems(stats, resamples=200, seed=SEED, correction="none")
    assert [c["p_bootstrap_adjusted"] for c in none["comparisons"]] == [c["p_bootstrap"] for c in comparisons]


# (d) clusters ---------------------------------------------------------------------------------------------------
def test_clusters_follow_the_value_order_and_the_significant_differences():
    rng = np.random.default_rng(11)
    n = 400
    base = rng.uniform(0, 1, n)
    worst = base + rng.normal(0, 0.01, n)
    twin = worst + 0.01 * (-1) ** np.arange(n)  # the same mean: no difference to find
    scores = {"worst": worst, "best": base + 0.3 + rng.normal(0, 0.01, n), "twin": twin,
              "middle": base + 0.15 + rng.normal(0, 0.01, n)}
    stats = {name: {"score": mean_statistics(s)} for name, s in scores.items()}
    out = compare_systems(stats, resamples=300, seed=SEED)
    assert out["clusters"]["score"] == {"best": 1, "middle": 2, "worst": 3, "twin": 3}
    pair = next(c for c in out["comparisons"] if {c["system_a"], c["system_b"]} == {"worst", "twin"})
    assert not pair["significant"]
    strong = next(c for c in out["comparisons"] if (c["system_a"], c["system_b"]) == ("worst", "best"))
    assert strong["significant"] and strong["delta"] == pytest.approx(np.mean(scores["best"] - scores["worst"]))


def test_randomization_ties_with_the_observed_difference_are_not_counted_with_sacrebleus_formula():
    """Two systems that differ on two images only (in the same direction): a swap of neither or both keeps |δ|
    (a tie, not counted), a swap of one lowers it; nothing exceeds it, so p = 1 / (R + 1) whatever the rounding of
    the 5,000-image sums."""
    rng = np.random.default_rng(2)
    a = rng.uniform(0, 1, 5000)
    b = a.copy()
    b[[10, 4000]] += [0.3, 0.1]
    stats = {"a": {"s": mean_statistics(a)}, "b": {"s": mean_statistics(b)}}
    out = compare_systems(stats, resamples=200, seed=SEED, p_values="sacrebleu")
    assert out["comparisons"][0]["p_randomization"] == 1 / 201
    # counted as ties (the default): the draws that swap neither or both of the two images, about half of them
    swaps = np.random.default_rng(SEED).integers(0, 2, (200, 5000))
    ties = int((swaps[:, 10] == swaps[:, 4000]).sum())
    default = compare_systems(stats, resamples=200, seed=SEED)
    assert default["comparisons"][0]["p_randomization"] == (ties + 1) / 201 > 0.3
    assert not default["comparisons"][0]["significant"]
