"""capeval's spice_factual and soft_spice against FactualSceneGraph 0.7.3's ``Evaluator.evaluate`` on hand-written
graphs.

The official evaluator runs unchanged from captions on; only its parser is stood in for (each caption's
hand-written graph text) and its sentence encoder (:class:`HashedCharEncoder`, given to capeval too). Its SPICE
synonyms are its own dictionary files, which capeval reads with :func:`read_spice_synonyms`.
"""

from importlib import resources

import numpy as np
import pytest

from capeval.functional import factual_spice as F
from capeval.functional.factual_graph import graph_text
from scene_graph_oracles import HashedCharEncoder, import_official

TOLERANCE = 1e-6

# caption -> its graph text, as the parser would give it
GRAPHS = {
    "exact caption": "( car , is , red ) , ( car , parked on , street ) , ( dog )",
    "exact reference": "( car , is , red ) , ( car , parked on , street )",
    "other reference": "( car , is , blue ) , ( dog , on , grass )",
    "synonym caption": "( automobile , is , large ) , ( automobile , near , edifice )",
    "synonym reference": "( car , is , big ) , ( car , near , building )",
    "stem caption": "( dogs , is , running ) , ( children , play with , dogs )",
    "stem reference": "( dog , is , run ) , ( child , play with , dog )",
    "long caption": "( man , sitting , on , bench ) , ( man , is , tall , thin ) , ( dog , brown )",
    "long reference": "( man , sitting on , bench ) , ( man , is , tall ) , ( dog , is , brown )",
    "soft caption": "( lamp , beside , mug ) , ( lamp , is , dim )",
    "soft reference": "( lantern , is , pale ) , ( lantern , near , cup )",
    "merge caption": "( car , is , red ) , ( automobile , on , road ) , ( auto )",
    "merge reference": "( car , is , red ) , ( motorcar , on , road ) , ( machine , is , fast )",
    "unparsable caption": "",
    "unparsable reference": "",
}
SAMPLES = {
    "exact": ("exact caption", ["exact reference", "other reference"]),
    "synonym": ("synonym caption", ["synonym reference"]),
    "stems": ("stem caption", ["stem reference"]),
    "long and short facts": ("long caption", ["long reference"]),
    "soft": ("soft caption", ["soft reference"]),
    "merge": ("merge caption", ["merge reference"]),
    "empty caption": ("unparsable caption", ["exact reference"]),
    "both empty": ("unparsable caption", ["unparsable reference"]),
    "empty among references": ("exact caption", ["exact reference", "unparsable reference"]),
}


class CaptionGraphs:
    """Stands in for SceneGraphParser.parse(return_text=True): each caption's graph text."""

    def parse(self, descriptions, **_):
        return [GRAPHS[d] for d in descriptions]


@pytest.fixture(scope="module")
def official():
    evaluation = import_official("factual_scene_graph.evaluation.evaluator")
    import_official("factual_scene_graph.evaluation.spice_evaluation")
    return evaluation


@pytest.fixture(scope="module")
def synonyms(official):
    folder = resources.files("factual_scene_graph.evaluation.resources")
    return F.read_spice_synonyms((folder / "english.exceptions").read_text(encoding="utf-8"),
                                 (folder / "english.synsets").read_text(encoding="utf-8"))


def official_evaluate(official, method, encoder=None, **options):
    evaluator = official.Evaluator(parser=CaptionGraphs())
    evaluator.text_encoder = encoder
    captions = [caption for caption, _ in SAMPLES.values()]
    references = [list(refs) for _, refs in SAMPLES.values()]
    return [score / 100 for score in evaluator.evaluate(captions, references, method=method, **options)]


def graphs_of(name):
    caption, references = SAMPLES[name]
    return [GRAPHS[caption]], [GRAPHS[r] for r in references]


def test_graph_text_is_the_official_parser_post_processing(official):
    from factual_scene_graph.utils import clean_graph_string, space_out_symbols_in_graph

    raw_outputs = ["(car, is, red), (car, on, street), (car, is, red)", "( sky , is , blue ) , ( car , on , stre",
                   "(dog", "dog , is", "Generate Scene Graph: (b, c, d), (a, b, c)", "", "   ", "(a)", "( , , )",
                   "(man,  sitting on ,bench),(man,is,2)", "words outside ( a , b , c ) brackets"]
    for raw in raw_outputs:
        official_text = clean_graph_string(space_out_symbols_in_graph(raw.replace("Generate Scene Graph:", "").strip()))
        assert graph_text(raw) == official_text, raw


def test_synonym_lookup_equals_the_official_dictionary(official, synonyms):
    from factual_scene_graph.evaluation.spice_evaluation import word_to_synset

    words = ["car", "Cars", "automobile", "children", "men", "boxes", "running", "happiest", "cheerful", "glass",
             "is", "ox", "Traffic  Light", "hot dog", "parked on", "geese", "mice", "bigger", "ran", "xyzzy", "",
             "smiling", "hoped", "making", "tables", "wolves", "dresses", "watches", "dishes", "ladies", "firemen",
             "happier", "nicest", "larger", "beautiful", "handful", "boss", "as", "foxes", "buzzes", "cried"]
    for word in words:
        assert synonyms.of(word) == word_to_synset(word), word
    assert synonyms.of("car") & synonyms.of("automobile")


@pytest.mark.parametrize("options", [{}, {"synonym_match": False}, {"merge_tuples_synonyms": True},
                                     {"merge_tuples_synonyms": True, "synonym_match": False}],
                         ids=["defaults", "no synonyms", "merged synonyms", "merged, no synonym pass"])
def test_spice_precision_recall_f1_equal_the_official(official, synonyms, monkeypatch, options):
    from factual_scene_graph.evaluation import spice_evaluation

    calculated = []
    official_f1 = spice_evaluation.calculate_f1
    monkeypatch.setattr(spice_evaluation, "calculate_f1",
                        lambda p, r: calculated.append((p, r)) or official_f1(p, r))
    scores = official_evaluate(official, "spice", **options)
    assert len(calculated) == len(scores) == len(SAMPLES)
    for name, score, (precision, recall) in zip(SAMPLES, scores, calculated):
        result = F.spice_factual(*graphs_of(name), synonyms, **options)
        assert (result.precision, result.recall) == pytest.approx((precision, recall), abs=TOLERANCE), name
        assert result.f1 == pytest.approx(score, abs=TOLERANCE), name


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_soft_spice_equals_the_official(official, bidirectional, dtype):
    encoder = HashedCharEncoder(dtype=dtype)
    scores = official_evaluate(official, "soft_spice", encoder, bidirectional=bidirectional)
    for name, score in zip(SAMPLES, scores):
        value = F.soft_spice(*graphs_of(name), encoder.encode, bidirectional=bidirectional)
        assert value == pytest.approx(float(score), abs=TOLERANCE), name


def test_each_stage_is_exercised(synonyms):
    exact = F.spice_factual(*graphs_of("exact"), synonyms)
    # candidate: car, street, dog, (car, red), (car, parked on, street); references pooled: car, street, dog, grass,
    # (car, red), (car, blue), (car, parked on, street), (dog, on, grass)
    assert (exact.matches, exact.candidate_tuples, exact.reference_tuples) == (5, 5, 8)
    with_synonyms = F.spice_factual(*graphs_of("synonym"), synonyms)
    without = F.spice_factual(*graphs_of("synonym"), synonyms, synonym_match=False)
    assert (with_synonyms.matches, without.matches) == (4, 0)
    merged = F.spice_factual(*graphs_of("merge"), synonyms, merge_tuples_synonyms=True)
    unmerged = F.spice_factual(*graphs_of("merge"), synonyms, merge_tuples_synonyms=False)
    assert merged.candidate_tuples < unmerged.candidate_tuples
    soft = F.soft_spice(*graphs_of("soft"), HashedCharEncoder().encode)
    assert 0 < soft < 1


def test_segments_tuples_and_phrases_follow_the_official_reading():
    segments = F.graph_segments(["( man , sitting , on , bench ) , ( man , is , tall ) , ( dog , brown ) , ( cat )"])
    assert segments == ("cat", "dog , brown", "man , is , tall", "man , sitting , on , bench")
    tuples = F.spice_tuples(segments)
    assert [tuple(next(iter(words)) for words in t) for t in tuples] == [
        ("bench",), ("cat",), ("dog",), ("dog", "brown"), ("man",), ("man", "sitting on", "bench"),
        ("man", "tall")]
    assert F.graph_phrases(["( man , sitting , on , bench ) , ( man , is , tall ) , ( dog , brown )"]) == (
        "bench", "brown dog", "dog", "man", "man sitting on bench", "tall man")


def test_empty_graph_text_is_one_empty_segment_as_in_the_official_package(synonyms):
    """An empty parse against an empty parse scores SPICE 1: the official behaviour, kept."""
    assert F.graph_segments([""]) == ("",)
    assert F.spice_factual([""], [""], synonyms).f1 == 1.0
    assert F.spice_factual([""], [GRAPHS["exact reference"]], synonyms).f1 == 0.0
