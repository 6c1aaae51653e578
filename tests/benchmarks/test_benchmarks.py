"""Benchmark loaders follow the literature's protocol; `capeval benchmark` end to end on a small fixture."""

import json
from collections import Counter

import pytest
from PIL import Image
from scipy import stats

from capeval import InputError
from capeval.benchmarks import load
from capeval.benchmarks.loaders import composite as load_composite, flickr8k_cf as load_flickr8k_cf, levenshtein
from capeval.benchmarks.runner import run_benchmark


def test_protocol_counts_on_the_real_releases(shared_data):
    root = shared_data / "benchmarks"
    expert = load("flickr8k_expert", root)
    assert len(expert.human) == 16992 and len(set(zip(expert.candidates, expert.images))) == 5664
    assert all(len(r) == 5 for r in expert.references)
    composite = load("composite", root)
    assert len(composite.human) == 11976 and len(set(composite.images)) == 3992  # first 3 candidates per image
    # published protocol: the reference nearest to the image's first (human) candidate leaves all 3 rows
    assert Counter(map(len, composite.references)) == {4: 11970, 5: 6}
    assert not any(c in refs for c, refs in zip(composite.candidates, composite.references))
    assert Counter(composite.categories) == {"coco": 6015, "flickr8k": 2991, "flickr30k": 2970}
    per_row = load_composite(root, reference_set="per_row")
    assert Counter(map(len, per_row.references)) == {5: 8022, 4: 3947, 6: 4, 3: 3}
    assert load("thumb", root).statistic == "pearson" and len(load("thumb", root).human) == 2500
    cf = load("flickr8k_cf", root)
    assert len(cf.human) == 47830 and all(0 <= h <= 1 for h in cf.human)
    # published protocol: the image's judged own captions leave its reference set, shared by all its rows
    assert Counter(map(len, cf.references)) == {4: 36100, 5: 11640, 3: 90}
    by_image = {}
    assert all(by_image.setdefault(i, r) == r for i, r in zip(cf.images, cf.references))
    # one caption is listed twice for its image (3262075846_5695021d84): list.remove drops one copy only
    assert sum(c in refs for c, refs in zip(cf.candidates, cf.references)) == 1
    per_row = load_flickr8k_cf(root, reference_set="per_row")
    assert Counter(map(len, per_row.references)) == {5: 47109, 4: 721}
    with pytest.raises(InputError, match="unknown reference_set"):
        load_flickr8k_cf(root, reference_set="all")


def test_levenshtein_matches_the_dynamic_programme():
    import random

    def slow(a, b):
        row = list(range(len(b) + 1))
        for i, x in enumerate(a, 1):
            row, prev = [i], row
            for j, y in enumerate(b, 1):
                row.append(min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (x != y)))
        return row[-1]

    rng = random.Random(0)
    for _ in range(500):
        a, b = ("".join(rng.choice("abA .") for _ in range(rng.randint(0, 70))) for _ in range(2))
        assert levenshtein(a, b) == slow(a, b)
    assert levenshtein("a dog runs.", "A dog runs .") == 2


def _fixture(tmp_path):
    thumb = tmp_path / "thumb"
    thumb.mkdir()
    rows = [("1", "a dog runs on grass", 4.0), ("1", "a cat", 1.0), ("2", "a red car parked", 3.5),
            ("2", "a blue boat", 1.5), ("3", "two people walk", 3.0), ("3", "a tree", 0.5)]
    refs = {"1": ["a dog running on the grass"], "2": ["a red car parked on the street"], "3": ["two people walking"]}
    (thumb / "THumB-1.0.jsonl").write_text("\n".join(
        json.dumps({"seg_id": s, "hyp": h, "image": f"{s}.jpg", "human_score": y}) for s, h, y in rows))
    (thumb / "references.json").write_text("\n".join(json.dumps({"seg_id": s, "refs": r}) for s, r in refs.items()))
    return rows, refs


def test_benchmark_end_to_end_with_cache(tmp_path, monkeypatch):
    from capeval.core import scoring

    rows, refs = _fixture(tmp_path)
    calls, real = [], scoring.load_scorer

    def load_counting_scores(name, **options):  # the real scorer; each call that scores rows is recorded
        scorer = real(name, **options)
        score_rows = scorer._score
        scorer._score = lambda *a, **k: calls.append(name) or score_rows(*a, **k)
        return scorer

    monkeypatch.setattr(scoring, "load_scorer", load_counting_scores)
    out = run_benchmark("rouge_l", "thumb", data_dir=tmp_path, resamples=100, cache_dir=tmp_path / "cache")
    direct = real("rouge_l").score([h for _, h, _ in rows], references=[refs[s] for s, _, _ in rows])
    expected = 100 * stats.pearsonr(direct["rouge_l_per_sample"], [y for _, _, y in rows]).statistic
    assert out["value"] == pytest.approx(expected, abs=1e-9)
    assert out["statistic"] == "pearson" and out["n"] == 6 and out["ci95"][0] <= out["ci95"][1]
    again = run_benchmark("rouge_l", "thumb", data_dir=tmp_path, statistic="kendall_tau_b", resamples=0,
                          cache_dir=tmp_path / "cache")
    assert calls == ["rouge_l"]  # the second statistic came from the cached per-sample scores
    expected_tau = 100 * stats.kendalltau(direct["rouge_l_per_sample"], [y for _, _, y in rows]).statistic
    assert again["value"] == pytest.approx(expected_tau, abs=1e-9)


def test_benchmark_errors_are_clear(tmp_path):
    with pytest.raises(InputError, match="benchmark file not found"):
        load("thumb", tmp_path)
    with pytest.raises(InputError, match="unknown benchmark"):
        load("nope", tmp_path)
    _fixture(tmp_path)
    with pytest.raises(InputError, match="needs the benchmark images"):
        run_benchmark("clip_s", "thumb", data_dir=tmp_path, cache_dir=tmp_path / "cache")


def test_benchmark_with_raters_reports_their_krippendorff_alpha(tmp_path):
    krippendorff = pytest.importorskip("krippendorff")
    folder = tmp_path / "flickr8k"
    folder.mkdir()
    ratings = {"a dog runs": [4, 4, 3], "a cat sleeps": [1, 2, 1], "a red car": [3, 3, 3], "two men walk": [2, 1, 2]}
    refs = ["a dog running on the grass", "a brown dog runs", "a dog outside", "a dog plays", "a dog on a lawn"]
    data = {"0": {"image_path": "1.jpg", "ground_truth": refs,
                  "human_judgement": [{"caption": c, "rating": r} for c, rs in ratings.items() for r in rs]}}
    (folder / "flickr8k_expert_clipscore_format.json").write_text(json.dumps(data))
    out = run_benchmark("bleu1", "flickr8k_expert", data_dir=tmp_path, resamples=0, cache_dir=tmp_path / "cache")
    table = [[rs[k] for rs in ratings.values()] for k in range(3)]  # raters x captions
    for level in ("ordinal", "interval"):
        expected = 100 * krippendorff.alpha(reliability_data=table, level_of_measurement=level)
        assert out["krippendorff_alpha"][level] == pytest.approx(expected, abs=1e-9)


def test_corpus_level_metrics_are_computed_within_each_category_when_the_protocol_says_so(tmp_path):
    from dataclasses import replace

    from capeval.benchmarks.loaders import Benchmark
    from capeval.benchmarks.runner import metric_scores
    from capeval.benchmarks.schema import from_table, to_table
    from capeval.core.scoring import load_scorer

    candidates = ["a dog runs on grass", "a cat on a sofa", "a red car", "a man rides a horse", "two dogs play",
                  "a boat on a lake"]
    references = [["a dog running on the grass"], ["a cat sleeping on a sofa"], ["a red car parked"],
                  ["a man riding a brown horse"], ["two dogs playing in a park"], ["a small boat on a calm lake"]]
    categories = ["coco", "flickr8k", "coco", "flickr8k", "coco", "flickr30k"]
    bench = Benchmark("mixed", candidates, references, [f"{i}.jpg" for i in range(6)], [1.0] * 6, "kendall_tau_c",
                      "test", categories=categories, corpus_per_category=True)
    grouped = metric_scores("cider", bench, cache_dir=tmp_path / "a")
    expected = {}
    for category in set(categories):
        rows = [j for j, c in enumerate(categories) if c == category]
        values = load_scorer("cider").score([candidates[j] for j in rows],
                                            references=[references[j] for j in rows])["cider_per_sample"]
        expected.update(zip(rows, values))
    assert grouped == pytest.approx([expected[j] for j in range(6)], abs=1e-12)
    pooled = metric_scores("cider", replace(bench, corpus_per_category=False), cache_dir=tmp_path / "a")
    assert pooled == pytest.approx(load_scorer("cider").score(candidates, references=references)["cider_per_sample"])
    assert pooled != pytest.approx(grouped)  # the IDF really differs, and the cache keeps the two apart
    assert from_table(to_table(bench)).corpus_per_category is True


def test_benchmark_rows_give_each_scorer_only_the_inputs_it_uses(tiny_hub, tmp_path):
    from capeval.benchmarks.runner import _score_rows
    from capeval.core.scoring import load_scorer

    Image.new("RGB", (16, 12), "red").save(tmp_path / "a.jpg")
    rows = [("a red image", ("a red picture",), "a.jpg"), ("a blue image", ("blue",), "a.jpg")]
    blip2 = load_scorer("blip2_score", device="cpu")  # takes no references: refused before this fix
    expected = blip2.score([r[0] for r in rows], [str(tmp_path / "a.jpg")] * 2)["blip2_score_per_sample"]
    assert _score_rows(blip2, "blip2_score", rows, tmp_path) == expected
    clip_s = load_scorer("clip_s", device="cpu")
    no_refs = [(c, (), i) for c, _, i in rows]
    assert len(_score_rows(clip_s, "clip_s", no_refs, tmp_path)) == 2  # the reference-free score of optional refs
    with pytest.raises(InputError, match="refclip_s needs references for every row"):
        _score_rows(clip_s, "refclip_s", no_refs, tmp_path)
