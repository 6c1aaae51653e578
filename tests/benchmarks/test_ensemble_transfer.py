"""``ensembeval-text``: refit on a fabricated benchmark whose human score is a known mix of two text components,
then zero-shot statistics checked against scipy on component scores computed directly with the scorers."""

import argparse
import copy
import random

import numpy as np
import pytest
from scipy import stats

from capeval import InputError
from capeval.benchmarks import catalog, loaders
from capeval.benchmarks.ensemble_transfer import ensemble_text_transfer
from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.command import configure, run

NOUNS = ["dog", "cat", "man", "woman", "ball", "car", "tree", "beach", "child", "horse", "bike", "street"]
VERBS = ["runs", "jumps", "sits", "walks", "plays", "rides", "stands", "eats"]
PLACES = ["on the grass", "near the water", "in the park", "on the road", "under a tree", "by the house"]
COMPONENTS = ("bleu_1", "rouge_l", "cider", "exact_noun_overlap", "fuzzy_verb_overlap", "mpnet_score")


def _sentence(rng: random.Random) -> str:
    return f"a {rng.choice(NOUNS)} {rng.choice(VERBS)} {rng.choice(PLACES)} with a {rng.choice(NOUNS)}"


def _rows(seed: int, items: int):
    rng = random.Random(seed)
    candidates, references, images = [], [], []
    for item in range(items):
        refs = [_sentence(rng) for _ in range(3)]
        for _ in range(2):
            candidates.append(_sentence(rng))
            references.append(refs)
            images.append(f"{seed}-{item}.jpg")
    return candidates, references, images


def _direct(candidates, references):
    """Component scores straight from the scorers, over the whole fabricated benchmark."""
    from capeval.core.scoring import load_scorer

    out = {}
    for scorer in ("bleu", "rouge_l", "cider", "noun_verb_overlap"):
        result = load_scorer(scorer).score(candidates, references=references)
        out.update({k[: -len("_per_sample")]: np.array(v) for k, v in result.items() if k.endswith("_per_sample")})
    return out


def _isolate(patch, folder):
    """MPNetScore's weights must not resolve (an empty hub cache); capeval's cache is ``folder``'s own."""
    import huggingface_hub.constants as hub_constants

    empty_hub = folder / "empty-hub"
    patch.setenv("HF_HUB_CACHE", str(empty_hub))
    patch.setattr(hub_constants, "HF_HUB_CACHE", str(empty_hub))
    patch.setenv("CAPEVAL_CACHE", str(folder / "cache"))


@pytest.fixture(scope="module")
def fabricated_data(tmp_path_factory):
    """The benchmarks' rows and human scores, from component scores computed directly once for the module."""
    with pytest.MonkeyPatch.context() as patch:
        _isolate(patch, tmp_path_factory.mktemp("direct"))
        fit_rows, eval_rows = _rows(1, 30), _rows(2, 20)
        fit_direct, eval_direct = _direct(*fit_rows[:2]), _direct(*eval_rows[:2])
    fit_human = fit_direct["cider"] + 2 * fit_direct["exact_noun_overlap"]
    noise = np.random.default_rng(0).normal(0, 0.3, len(eval_rows[0]))
    eval_human = np.round(eval_direct["bleu_1"] + eval_direct["rouge_l"] + noise, 1)  # rounded: ties for τ-b
    for values in (*fit_direct.values(), *eval_direct.values(), fit_human, eval_human):
        values.flags.writeable = False  # shared by the module's tests
    return {"fit_rows": fit_rows, "eval_rows": eval_rows, "fit": (fit_direct, fit_human),
            "eval": (eval_direct, eval_human)}


@pytest.fixture
def fabricated(fabricated_data, tmp_path, monkeypatch):
    """Two benchmarks: ``fake_fit`` (human = CIDEr + 2·exact noun overlap, τ-c) and ``fake_eval`` (τ-b), each test
    with an empty hub cache and its own capeval cache."""
    _isolate(monkeypatch, tmp_path)
    data = fabricated_data
    rows = {name: copy.deepcopy(data[f"{name}_rows"]) for name in ("fit", "eval")}  # each test's own lists
    made = {"fake_fit": Benchmark("fake_fit", *rows["fit"], list(data["fit"][1]), "kendall_tau_c", "fabricated"),
            "fake_eval": Benchmark("fake_eval", *rows["eval"], list(data["eval"][1]), "kendall_tau_b", "fabricated"),
            "fake_no_refs": Benchmark("fake_no_refs", ["a dog"], [[]], ["x.jpg"], [1.0], "pearson", "fabricated")}
    for name, benchmark in made.items():
        monkeypatch.setitem(loaders.CORRELATION_LOADERS, name, lambda _dir, b=benchmark: b)
        monkeypatch.setitem(catalog.BENCHMARKS, name, lambda _dir, b=benchmark: b)
    return {"fit": data["fit"], "eval": data["eval"], "data_dir": tmp_path}


def test_refit_recovers_the_mix_and_zero_shot_matches_scipy(fabricated, monkeypatch):
    from capeval.core import scoring

    out = ensemble_text_transfer("fake_fit", ["fake_eval"], data_dir=fabricated["data_dir"], components=COMPONENTS,
                                 resamples=50)
    assert set(out["selected"]) == {"cider", "exact_noun_overlap"}
    assert out["weights"]["cider"] == pytest.approx(1, abs=1e-6)
    assert out["weights"]["exact_noun_overlap"] == pytest.approx(2, abs=1e-6)
    assert list(out["skipped"]) == ["mpnet_score"] and "weights not available" in out["skipped"]["mpnet_score"]
    assert out["candidates"] == [c for c in COMPONENTS if c != "mpnet_score"]

    eval_direct, eval_human = fabricated["eval"]
    ensemble = sum(w * eval_direct[c] for c, w in out["weights"].items())
    zero_shot = out["benchmarks"]["fake_eval"]
    assert zero_shot["role"] == "zero-shot" and zero_shot["n"] == len(eval_human)
    assert zero_shot["ensemble"] == pytest.approx(100 * stats.kendalltau(ensemble, eval_human).statistic, abs=1e-9)
    low, high = zero_shot["ensemble_ci95"]
    assert low <= high
    best = max(("bleu_1", "rouge_l", "cider", "exact_noun_overlap", "fuzzy_verb_overlap"),
               key=lambda c: stats.kendalltau(eval_direct[c], eval_human).statistic)
    assert zero_shot["best_component"] == best
    rng, margins = np.random.default_rng(0), []  # paired percentile bootstrap, resampling rows once for both
    for _ in range(50):
        idx = rng.integers(0, len(eval_human), len(eval_human))
        margins.append(stats.kendalltau(ensemble[idx], eval_human[idx]).statistic
                       - stats.kendalltau(eval_direct[best][idx], eval_human[idx]).statistic)
    expected_margin = 100 * np.nanquantile(margins, [0.025, 0.975])
    assert zero_shot["margin_over_best_ci95"] == pytest.approx(list(expected_margin), abs=1e-9)
    for component in ("bleu_1", "cider", "rouge_l", "fuzzy_verb_overlap"):
        expected = 100 * stats.kendalltau(eval_direct[component], eval_human).statistic
        assert zero_shot["components"][component] == pytest.approx(expected, abs=1e-9)

    fit_direct, fit_human = fabricated["fit"]
    in_sample = out["benchmarks"]["fake_fit"]
    assert in_sample["role"] == "fit (in-sample)"
    expected = 100 * stats.kendalltau(fit_direct["rouge_l"], fit_human, variant="c").statistic
    assert in_sample["components"]["rouge_l"] == pytest.approx(expected, abs=1e-9)

    loads, scored, real = [], [], scoring.load_scorer

    def load_counting_scores(name, **options):  # the real scorer; each call that scores rows is recorded
        loads.append(name)
        scorer = real(name, **options)
        score_rows = scorer._score
        scorer._score = lambda *a, **k: scored.append(name) or score_rows(*a, **k)
        return scorer

    monkeypatch.setattr(scoring, "load_scorer", load_counting_scores)
    again = ensemble_text_transfer("fake_fit", ["fake_eval"], data_dir=fabricated["data_dir"], components=COMPONENTS)
    assert again["weights"] == out["weights"]
    # the unavailable model was tried again; every other component's scores came from the cache (none scored)
    assert "mpnet_score" in loads and scored == []


def test_command_line_options(fabricated):
    parser = argparse.ArgumentParser()
    configure(parser)  # the `capeval benchmark` parser, with the ensembeval-text options
    args = parser.parse_args(["ensembeval-text", "fake_eval", "--fit-on", "fake_fit", "--data-dir",
                              str(fabricated["data_dir"]), "--resamples", "0", "--components", "rouge_l", "cider",
                              "exact_noun_overlap"])
    out = run(args)
    assert out["fit_on"] == "fake_fit" and out["candidates"] == ["rouge_l", "cider", "exact_noun_overlap"]
    assert set(out["benchmarks"]) == {"fake_fit", "fake_eval"} and "ensemble_ci95" not in out["benchmarks"]["fake_eval"]


def test_unusable_benchmarks_and_components_are_clear_errors(fabricated):
    data_dir = fabricated["data_dir"]
    with pytest.raises(InputError, match="not a correlation benchmark"):
        ensemble_text_transfer("fake_fit", ["pascal50s"], data_dir=data_dir)
    with pytest.raises(InputError, match="no reference captions"):
        ensemble_text_transfer("fake_fit", ["fake_no_refs"], data_dir=data_dir)
    with pytest.raises(InputError, match="not text-only components"):
        ensemble_text_transfer("fake_fit", ["fake_eval"], data_dir=data_dir, components=["rouge_l", "clip_s"])
