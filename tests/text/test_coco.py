"""pycocoevalcap-semantics text metrics reproduce the published per-example values; overlaps by hand."""

import json

import pytest

from capeval import InputError, ModelNotAvailableError
from capeval.functional.overlap import exact_overlap, fuzzy_overlap, unique_tokens
from capeval.core.scoring import load_scorer

# REFERENCE.md, "Per-example corpus values" (good / bad captions of each example folder)
PUBLISHED = {
    "clipscore": {"bleu_1": (.6667, .4815), "bleu_4": (0, 0), "meteor": (.3444, .1861), "rouge_l": (.4280, .3121),
                  "cider": (.5637, .2790)},
    "pacscore": {"bleu_1": (.6400, .4500), "bleu_4": (.3503, 0), "meteor": (.3057, .0995), "rouge_l": (.5012, .3268),
                 "cider": (1.4918, .4259)},
}


@pytest.mark.parametrize("folder", sorted(PUBLISHED))
def test_published_example_values_reproduce_to_4_decimals(shared_data, folder):
    root = shared_data / "images" / folder
    refs = json.loads((root / "refs.json").read_text())
    scorers = {m: load_scorer(m) for m in ("bleu", "meteor", "rouge_l", "cider")}
    for column, kind in enumerate(("good", "bad")):
        captions = json.loads((root / f"{kind}_captions.json").read_text())
        keys = sorted(captions)
        values = {}
        for scorer in scorers.values():
            values.update(scorer.score([captions[k] for k in keys], references=[refs[k] for k in keys]))
        for metric, expected in PUBLISHED[folder].items():
            assert round(values[metric], 4) == pytest.approx(expected[column], abs=1e-9), (folder, kind, metric)
        assert len(values["cider_per_sample"]) == len(keys)


def test_spice_fails_loudly_without_corenlp():
    with pytest.raises(ModelNotAvailableError, match="Stanford CoreNLP"):
        load_scorer("spice").score(["a dog"], references=[["a dog runs"]])


def test_text_metrics_reject_bad_input():
    bleu = load_scorer("bleu")
    with pytest.raises(InputError, match="needs references"):
        bleu.score(["a dog"])
    with pytest.raises(InputError, match="empty reference list"):
        bleu.score(["a dog"], references=[[]])
    with pytest.raises(InputError, match=r"predictions\[0\] is an empty caption \(empty_caption='score'"):
        bleu.score([" "], references=[["x"]], empty_caption="error")


class Tok:
    def __init__(self, text, pos, vector):
        self.text, self.pos_, self.vector = text, pos, vector

    def similarity(self, other):
        return self.vector * other.vector


def test_overlap_formulas_by_hand():
    cand = unique_tokens([Tok("dog", "NOUN", 1.0), Tok("runs", "VERB", .5), Tok("dog", "NOUN", 9.0),
                          Tok("Park", "PROPN", .2)], ("NOUN", "PROPN"))
    ref = unique_tokens([Tok("dog", "NOUN", .8), Tok("park", "NOUN", .3), Tok("grass", "NOUN", .1)], ("NOUN", "PROPN"))
    assert list(cand) == ["dog", "Park"]  # unique, case-sensitive, first occurrence kept
    assert exact_overlap(cand, ref) == pytest.approx(1 / (3 + 1e-8), abs=1e-15)
    expected = (max(.8 * 1.0, .8 * .2) + max(.3 * 1.0, .3 * .2) + max(.1 * 1.0, .1 * .2)) / (3 + 1e-8)
    assert fuzzy_overlap(cand, ref) == pytest.approx(expected, abs=1e-15)
    assert fuzzy_overlap({}, ref) == 0.0 and exact_overlap(cand, {}) == 0.0


def test_noun_verb_overlap_joins_all_references():
    scorer = load_scorer("noun_verb_overlap")
    result = scorer.score(["A dog runs on the grass ."],
                          references=[["A dog is running .", "The cat sleeps on grass ."]])
    # reference nouns {dog, cat, grass}: the candidate has dog and grass
    assert result["exact_noun_overlap_per_sample"][0] == pytest.approx(2 / (3 + 1e-8), abs=1e-9)
    # reference verbs {running, sleeps}: "runs" is neither (token text, not lemma)
    assert result["exact_verb_overlap_per_sample"][0] == 0.0
    assert 0.0 < result["fuzzy_verb_overlap_per_sample"][0]


def test_noun_verb_overlap_records_which_spacy_model_ran():
    import importlib.metadata

    import spacy

    result = load_scorer("noun_verb_overlap").score(["a dog"], references=[["a dog runs"]])
    record = result["provenance"]["spacy_model"]
    package = record["package"]
    assert spacy.util.is_package(package)
    assert record["version"] == importlib.metadata.version(package)  # the installed distribution's version
    assert record["name"].startswith("en_core_web_") and record["spacy"] == spacy.__version__
