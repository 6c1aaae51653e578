"""Pairwise benchmarks: Pascal-50S protocol (seeded tie-break, 5-of-48 references per image, per-category strict
accuracy),
Reformulations, FOIL (official json format, fabricated fixture: no FOIL data on this machine)."""

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from capeval import InputError
from capeval.benchmarks import PairwiseBenchmark, load
from capeval.benchmarks.pairwise import TIED, majority
from capeval.benchmarks.runner import run_benchmark


def test_pascal50s_real_release(shared_data):
    import scipy.io

    root = shared_data / "benchmarks"
    pascal = load("pascal50s", root)
    assert len(pascal.candidates_a) == 4000 and pascal.draws == 5 and pascal.references_per_draw == 5
    assert {c: pascal.categories.count(c) for c in set(pascal.categories)} == {c: 1000 for c in ("HC", "HI", "HM", "MM")}
    assert all(len(r) == 48 for r in pascal.references)
    cands = scipy.io.loadmat(str(root / "pascal50s" / "pascal_cands.mat"))["cands"][0]  # the CIDEr release
    assert [str(c["sent"][0][0][0]).strip() for c in cands] == pascal.candidates_a
    assert [str(c["sent"][0][1][0]).strip() for c in cands] == pascal.candidates_b
    assert [str(c["image"][0]) for c in cands] == pascal.images
    prefers_a, refs = pascal.draw(3)
    again_a, again_refs = pascal.draw(3)
    assert refs == again_refs and (prefers_a == again_a).all()
    # 5 distinct draws of each pool (a pool may hold the same sentence twice)
    assert all(len(r) == 5 and not Counter(r) - Counter(pool) for r, pool in zip(refs, pascal.references))
    assert refs != pascal.draw(4)[1]
    # one sample per image, shared by all of its pairs (1,000 images, up to 12 pairs each)
    by_image = {}
    for image, r in zip(pascal.images, refs):
        by_image.setdefault(image, set()).add(tuple(r))
    assert len(by_image) == 1000 and all(len(v) == 1 for v in by_image.values())
    pascal.sample_references_per = "pair"
    per_pair = pascal.draw(3)[1]
    assert sum(len({tuple(per_pair[i]) for i, im in enumerate(pascal.images) if im == image}) > 1
               for image in by_image) > 500


def test_majority_and_seeded_tie_break():
    assert majority([30, 10, 24], [18, 38, 24]) == [0, 1, TIED]
    bench = PairwiseBenchmark("toy", ["a"] * 200, ["b"] * 200, [["r"]] * 200, ["i.jpg"] * 200,
                              [0, 1] + [TIED] * 198, protocol="")
    outcomes = [bench.draw(seed)[0] for seed in range(3)]
    for prefers_a in outcomes:
        assert prefers_a[0] and not prefers_a[1]  # a majority is never overturned
        assert 60 < prefers_a[2:].sum() < 140  # ties go either way, about half each
    assert (outcomes[0] == bench.draw(0)[0]).all() and (outcomes[0] != outcomes[1]).any()


def _write_pascal(root, pairs, images=None):
    folder = root / "pascal50s"
    folder.mkdir(parents=True)
    images = images if images is not None else list(range(len(pairs)))
    pd.DataFrame({
        "ID": range(len(pairs)), "image_path": [f"./VOC2010/JPEGImages/{i}.jpg" for i in images],
        "references": [p[2] for p in pairs], "candidate_a": [p[0] for p in pairs],
        "candidate_b": [p[1] for p in pairs], "category": [p[4] for p in pairs],
        "scores": [{"label": p[3]} for p in pairs],
    }).to_parquet(folder / "pascal50s_pairs_48refs.parquet")


PAIRS = [  # candidate A, candidate B, reference pool, label (0: A preferred), category code (1 HC .. 4 MM)
    ("a dog runs on the grass", "a cat sleeps", ["a dog running on grass", "the dog runs", "dog on a lawn",
                                                 "a brown dog runs", "a dog in a park", "a dog playing"], 0, 1),
    ("a red car", "a red car parked on a street", ["a red car parked on the street", "a car on a street",
                                                   "red car by the road", "a parked red car", "a street scene",
                                                   "a red vehicle"], 1, 2),
    ("two men play chess", "two men play chess", ["two men playing chess", "men at a chess board",
                                                  "a game of chess", "two people play a game", "chess players",
                                                  "men sitting at a table"], 0, 3),  # a metric tie: never correct
    ("a boat on a lake", "a plane in the sky", ["a small boat on a lake", "a boat on calm water", "a lake view",
                                               "a boat floating", "a rowing boat", "boat on the water"], 1, 4),
    ("a child eats cake", "a child with a birthday cake", ["a child eating birthday cake", "a kid with cake",
                                                          "a birthday party", "a child at a party",
                                                          "a small girl eats cake", "cake on a table"], 1, 1),
]
# a second pair on the image of PAIRS[0] (same pool, as in Pascal-50S, where an image has 1 to 12 pairs)
PAIRS.append(("a dog on the grass", "a dog runs in a park", PAIRS[0][2], 1, 2))
IMAGES = [0, 1, 2, 3, 4, 0]


def _expected_references(seed, per):
    """The documented draw: a coin per pair, then 5 of the pool once per image (first-appearance order) or per pair."""
    rng = np.random.default_rng(seed)
    rng.integers(0, 2, len(PAIRS))
    if per == "pair":
        return [[pool[j] for j in rng.choice(len(pool), 5, replace=False)] for _, _, pool, _, _ in PAIRS]
    samples = {}
    for image, (_, _, pool, _, _) in zip(IMAGES, PAIRS):
        if image not in samples:
            samples[image] = [pool[j] for j in rng.choice(len(pool), 5, replace=False)]
    return [samples[image] for image in IMAGES]


@pytest.mark.parametrize("ties,per", [("wrong", None), ("half", None), ("wrong", "pair")])
def test_pascal_protocol_end_to_end(tmp_path, ties, per, monkeypatch):
    from capeval.core import scoring
    from capeval.core.scoring import load_scorer

    _write_pascal(tmp_path, PAIRS, IMAGES)
    loads = []
    monkeypatch.setattr(scoring, "load_scorer", lambda *a, **k: loads.append(a) or load_scorer(*a, **k))
    out = run_benchmark("rouge_l", "pascal50s", data_dir=tmp_path, ties=ties, resamples=50,
                        cache_dir=tmp_path / "cache", sample_references_per=per)
    assert loads == [("rouge_l",)]  # one scorer (model and embedding cache) serves the 5 draws
    scorer = load_scorer("rouge_l")
    per_draw = {c: [] for c in ("HC", "HI", "HM", "MM")}
    for seed in range(5):
        refs = _expected_references(seed, per or "image")
        bench = load("pascal50s", tmp_path)
        bench.sample_references_per = per or "image"
        assert bench.draw(seed)[1] == refs
        assert (refs[0] == refs[5]) == (per is None)  # the two pairs of image 0 share one sample per image
        a = scorer.score([p[0] for p in PAIRS], references=refs)["rouge_l_per_sample"]
        b = scorer.score([p[1] for p in PAIRS], references=refs)["rouge_l_per_sample"]
        hits = {c: [] for c in per_draw}
        for (_, _, _, label, code), x, y in zip(PAIRS, a, b):
            hit = 0.5 if (x == y and ties == "half") else float((x > y) if label == 0 else (y > x))
            hits[["HC", "HI", "HM", "MM"][code - 1]].append(hit)
        for c in per_draw:
            per_draw[c].append(np.mean(hits[c]))
    means = np.mean([per_draw[c] for c in per_draw], axis=0)
    assert out["value"] == pytest.approx(100 * means.mean()) and out["std"] == pytest.approx(100 * means.std())
    for c, values in per_draw.items():
        assert out["categories"][c]["per_draw"] == pytest.approx([100 * v for v in values])
        assert out["categories"][c]["mean"] == pytest.approx(100 * np.mean(values))
        assert out["categories"][c]["std"] == pytest.approx(100 * np.std(values))
    expected_hm = 50.0 if ties == "half" else 0.0  # the tied pair is the only HM pair
    assert out["categories"]["HM"]["mean"] == expected_hm
    assert out["n"] == 6 and out["draws"] == 5 and out["ci95"][0] <= out["value"] <= out["ci95"][1]
    assert out["references_sampled_per"] == (per or "image")


def test_per_image_sampling_needs_one_pool_per_image(tmp_path):
    pairs = [PAIRS[0], PAIRS[1][:2] + (PAIRS[3][2],) + PAIRS[1][3:]]
    _write_pascal(tmp_path, pairs, [0, 0])  # one image, two different pools
    bench = load("pascal50s", tmp_path)
    with pytest.raises(InputError, match="different reference pools"):
        bench.draw(0)
    bench.sample_references_per = "pair"
    assert [len(r) for r in bench.draw(0)[1]] == [5, 5]
    bench.sample_references_per = "pool"
    with pytest.raises(InputError, match="'image' or 'pair'"):
        bench.draw(0)


def test_reformulations_real_release(shared_data):
    bench = load("reformulations", shared_data / "benchmarks")
    assert len(bench.candidates_a) == 5208 and set(bench.preference) == {1}
    raw = json.loads((shared_data / "benchmarks/reformulations/full_reformulation_dataset.json").read_text())
    assert bench.candidates_b[10] == raw[10]["answer"] and bench.candidates_a[10] == raw[10]["question"]
    assert bench.images[0] == "COCO/val2014/COCO_val2014_000000183786.jpg"
    with pytest.raises(InputError, match="no reference captions"):
        run_benchmark("bleu1", "reformulations", data_dir=shared_data / "benchmarks", cache_dir="/nonexistent")


def _write_foil(root):
    """A tiny file in the official FOIL-COCO layout (fabricated: the FOIL release is not on this machine)."""
    folder = root / "foil"
    folder.mkdir(parents=True)
    foil = {"images": [{"id": 7, "file_name": "COCO_val2014_000000000007.jpg"},
                       {"id": 9, "file_name": "COCO_val2014_000000000009.jpg"}],
            "annotations": [
                {"id": 1, "image_id": 7, "caption": "a dog sits on a sofa", "foil": False},
                {"id": 1, "image_id": 7, "caption": "a cat sits on a sofa", "foil": True},
                {"id": 1, "image_id": 7, "caption": "a horse sits on a sofa", "foil": True},
                {"id": 2, "image_id": 9, "caption": "a man rides a bike", "foil": False},
                {"id": 2, "image_id": 9, "caption": "a man rides a motorcycle", "foil": True}]}
    coco = {"annotations": [{"image_id": 7, "caption": c} for c in
                            ("a dog sits on a sofa", "a dog on a couch", "a brown dog resting on a sofa")]
            + [{"image_id": 9, "caption": c} for c in ("a man rides a bike", "a cyclist on a road")]}
    (folder / "foilv1.0_test_2017.json").write_text(json.dumps(foil))
    (folder / "captions_val2014.json").write_text(json.dumps(coco))


def test_foil_official_format_fixture(tmp_path):
    _write_foil(tmp_path)
    bench = load("foil", tmp_path)
    assert bench.candidates_a == ["a dog sits on a sofa"] * 2 + ["a man rides a bike"]
    assert bench.candidates_b == ["a cat sits on a sofa", "a horse sits on a sofa", "a man rides a motorcycle"]
    assert bench.references[0] == ["a dog on a couch", "a brown dog resting on a sofa"]  # the original removed
    assert bench.references[2] == ["a cyclist on a road"] and set(bench.preference) == {0}
    assert load("foil_one_ref", tmp_path).references[0] == ["a dog on a couch"]
    out = run_benchmark("bleu1", "foil", data_dir=tmp_path, resamples=0, cache_dir=tmp_path / "cache")
    from capeval.core.scoring import load_scorer

    scores = load_scorer("bleu").score(bench.candidates_a + bench.candidates_b,
                                       references=bench.references * 2)["bleu_1_per_sample"]
    expected = np.mean([scores[i] > scores[i + 3] for i in range(3)])
    assert out["value"] == pytest.approx(100 * expected)
    assert out["categories"] == {"all": {"mean": pytest.approx(100 * expected), "std": 0.0,
                                         "per_draw": [pytest.approx(100 * expected)]}}
