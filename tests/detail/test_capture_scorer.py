"""``capture``, ``spice_factual`` and ``soft_spice`` through ``load_scorer`` with the tiny parser, encoder, NLTK data
and SPICE synonyms: equal to the pure functions on the same parses (NLTK's own module-level functions and an
independent MPNet embedding give the expected values), batch- and order-independent, one parse per distinct text."""

import nltk
import numpy as np
import pytest
import torch

from capeval import InputError
from capeval.core.caches import DEFAULT_CACHE_BYTES
from capeval.core.scoring import load_scorer
from capeval.functional import capture as capture_fn
from capeval.functional.factual_graph import graph_text
from capeval.functional.factual_spice import SpiceSynonyms, soft_spice, spice_factual
from capeval.testing.tiny_detail import TINY_SPICE_EXCEPTIONS, TINY_SPICE_SYNSETS
from capeval.testing.tiny_nltk import write_tiny_nltk_data
from scene_graph_oracles import SENTENCE_GRAPHS

PREDICTIONS = ["A red car is on the street. Two men walk a dog.", "A dog sits on a red car.",
               "The man sits on a bench."]
REFERENCES = [["A red automobile is on a road.", "Two men and a dog are near a car."], ["A puppy is on a car."],
              ["A man is sitting on a bench. The bench is wooden."]]
# hand-written FACTUAL outputs (raw, as the model decodes them) for every sentence and every whole text above
GRAPHS = {
    **SENTENCE_GRAPHS,
    PREDICTIONS[0]: "(car, is, red), (car, on, street), (men, walk, dog)",
    REFERENCES[2][0]: "(man, sit on, bench), (bench, is, wooden)",
}
OPTIONS = dict(device="cpu", batch_size=4)


@pytest.fixture(scope="module")
def tiny_nltk_module(tmp_path_factory):
    """NLTK's module-level functions reading the tiny data (the same bytes the tiny builders file in the hub)."""
    data = write_tiny_nltk_data(tmp_path_factory.mktemp("nltk"), wordnet="tiny")
    nltk.data.path.insert(0, str(data))
    nltk.tag._get_tagger.cache_clear()
    yield nltk
    nltk.data.path.remove(str(data))
    nltk.tag._get_tagger.cache_clear()


def seed(parser, monkeypatch, calls=None):
    """The parser's model answers the hand-written output of each text (whatever its input limit) for the rest of
    the test: the scorers read their parses through the parser and its cache. ``calls`` records (text, limit)."""
    def generate(texts, input_limits=None):
        if calls is not None:
            calls.extend(zip(texts, input_limits))
        return [GRAPHS[text.strip()] for text in texts]

    monkeypatch.setattr(parser, "generate", generate)


def embedder(encoder):
    def encode(texts):  # one phrase at a time, no padding: mean over its tokens, float64
        rows = []
        for text in texts:
            ids = encoder.tokenizer(text, return_tensors="pt")
            with torch.no_grad():
                hidden = encoder.model(**ids).last_hidden_state[0].numpy().astype(np.float64)
            rows.append(hidden.mean(0))
        return np.stack(rows)
    return encode


def expected_capture_elements(nltk_module, text):
    from nltk.stem import WordNetLemmatizer

    lemmatize = WordNetLemmatizer().lemmatize
    sentences = nltk_module.sent_tokenize(text)
    nouns = capture_fn.text_nouns(nltk_module.pos_tag(nltk_module.word_tokenize(text)), lemmatize)
    return capture_fn.capture_elements([graph_text(GRAPHS[s]) for s in sentences], nouns, lemmatize)


def synonyms_of(nltk_module):
    from nltk.corpus import wordnet

    return lambda word: {lemma.name() for synset in wordnet.synsets(word) for lemma in synset.lemmas()}


def test_capture_equals_the_pure_functions_on_the_same_parses(tiny_hub, tiny_nltk_module, monkeypatch):
    scorer = load_scorer("capture", **OPTIONS)
    seed(scorer.parser, monkeypatch)
    result = scorer.score(PREDICTIONS, references=REFERENCES)
    encode = embedder(scorer.encoder)
    expected = [capture_fn.capture_sample(expected_capture_elements(tiny_nltk_module, p),
                                          [expected_capture_elements(tiny_nltk_module, r) for r in refs],
                                          synonyms=synonyms_of(tiny_nltk_module), encode=encode)
                for p, refs in zip(PREDICTIONS, REFERENCES)]
    np.testing.assert_allclose(result["capture_per_sample"], [e.score for e in expected], rtol=0, atol=1e-5)
    assert result["capture"] == pytest.approx(np.mean([e.score for e in expected]), abs=1e-5)
    assert 0 < min(result["capture_per_sample"]) and max(result["capture_per_sample"]) < 1  # not degenerate
    for detail, e in zip(result["capture_details"], expected):
        for kind in ("objects", "attributes", "relations"):
            want = getattr(e, kind)
            assert detail[kind]["f1"] == pytest.approx(want.f1, abs=1e-5)
            assert detail[kind]["matched"] == [list(pair) for pair in want.matched]
            assert detail[kind]["missed"] == list(want.missed) and detail[kind]["invented"] == list(want.invented)
    objects = result["capture_details"][0]["objects"]  # the synonym stage (tiny WordNet: car ~ automobile) shows
    assert ["car", "automobile"] in objects["matched"] and ["dog", "dog"] in objects["matched"]
    assert objects["invented"] == ["street"] and objects["missed"] == ["road"]


def test_capture_options_reach_the_computation(tiny_hub, tiny_nltk_module, monkeypatch):
    scorer = load_scorer("capture", synonym_matching=False, soft_matching=False, stop_words=False, gamma=1.0,
                         **OPTIONS)
    seed(scorer.parser, monkeypatch)
    result = scorer.score(PREDICTIONS, references=REFERENCES)
    from nltk.stem import WordNetLemmatizer

    lemmatize = WordNetLemmatizer().lemmatize

    def elements(text):
        nouns = capture_fn.text_nouns(tiny_nltk_module.pos_tag(tiny_nltk_module.word_tokenize(text)), lemmatize)
        return capture_fn.capture_elements([graph_text(GRAPHS[s]) for s in tiny_nltk_module.sent_tokenize(text)],
                                           nouns, lemmatize, stop_words=frozenset())

    synonyms = synonyms_of(tiny_nltk_module)
    expected = [capture_fn.capture_sample(elements(p), [elements(r) for r in refs], synonyms=synonyms,
                                          synonym_matching=False, soft_matching=False, gamma=1.0).score
                for p, refs in zip(PREDICTIONS, REFERENCES)]
    assert result["capture_per_sample"] == pytest.approx(expected, abs=1e-12)
    assert scorer.encoder is None  # no soft stage, no encoder loaded
    with pytest.raises(InputError, match="alpha"):
        load_scorer("capture", alpha=0.7, **OPTIONS)
    with pytest.raises(InputError, match="gamma"):
        load_scorer("capture", gamma=-1.0, **OPTIONS)


def test_spice_variants_equal_the_pure_functions_on_the_same_parses(tiny_hub, monkeypatch):
    spice = load_scorer("spice_factual", **OPTIONS)
    soft = load_scorer("soft_spice", **OPTIONS)
    assert spice.parser is soft.parser
    predictions, references = PREDICTIONS[:2], REFERENCES[:2]
    seed(spice.parser, monkeypatch)
    synonyms = SpiceSynonyms({w: frozenset(ids) for w, ids in TINY_SPICE_SYNSETS.items()},
                             {form: (base,) for base, forms in TINY_SPICE_EXCEPTIONS.items() for form in forms})
    expected_spice = [spice_factual([graph_text(GRAPHS[p])], [graph_text(GRAPHS[r]) for r in refs], synonyms).f1
                      for p, refs in zip(predictions, references)]
    encode = embedder(soft.encoder)
    expected_soft = [soft_spice([graph_text(GRAPHS[p])], [graph_text(GRAPHS[r]) for r in refs], encode)
                     for p, refs in zip(predictions, references)]
    assert spice.score(predictions, references=references)["spice_factual_per_sample"] == \
        pytest.approx(expected_spice, abs=1e-12)
    assert 0 < min(expected_spice) and max(expected_spice) < 1  # the synonym stage matters (automobile, road)
    np.testing.assert_allclose(soft.score(predictions, references=references)["soft_spice_per_sample"],
                               expected_soft, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["capture", "spice_factual", "soft_spice"])
def test_scores_do_not_depend_on_batch_or_order(tiny_hub, name, monkeypatch):
    scorer, other = (load_scorer(name, device="cpu", batch_size=size) for size in (3, 1))
    seed(scorer.parser, monkeypatch)
    seed(other.parser, monkeypatch)
    key = f"{name}_per_sample"
    whole = scorer.score(PREDICTIONS, references=REFERENCES)[key]
    order = [2, 0, 1]
    shuffled = scorer.score([PREDICTIONS[i] for i in order], references=[REFERENCES[i] for i in order])[key]
    assert [shuffled[order.index(i)] for i in range(3)] == whole and max(whole) > 0
    assert [other.score([p], references=[r])[key][0] for p, r in zip(PREDICTIONS, REFERENCES)] == whole


def test_each_text_s_sentences_are_cut_as_the_official_parse_call_cuts_them(tiny_hub, tiny_nltk_module,
                                                                            monkeypatch):
    """capture-metric parses a text's sentences in one ``parse`` call: each batch is truncated at its longest
    prompt's length without the end token, so its longest sentence loses its last token (here its full stop)."""
    scorer = load_scorer("capture", device="cpu", batch_size=6)  # a parser no other test has filled
    calls = []
    seed(scorer.parser, monkeypatch, calls)
    scorer.score(PREDICTIONS, references=REFERENCES)
    tokenizer = scorer.parser.tokenizer
    expected, texts = set(), {*PREDICTIONS, *(r for refs in REFERENCES for r in refs)}
    for text in texts:
        sentences = tiny_nltk_module.sent_tokenize(text)
        lengths = [len(tokenizer.encode("Generate Scene Graph: " + s.strip(), add_special_tokens=False))
                   for s in sentences]  # as FactualSceneGraph's _parse_batch measures them
        expected |= {(s, min(64, max(lengths))) for s in sentences}
    assert set(calls) <= expected and {s for s, _ in calls} == {s for s, _ in expected}
    cut = [(s, limit) for s, limit in expected if len(tokenizer.encode("Generate Scene Graph: " + s)) > limit]
    assert len(cut) == len(texts)  # the longest sentence of every text (no ties here)


def test_one_parse_per_distinct_text_across_the_three_scorers(tiny_hub, monkeypatch):
    options = dict(device="cpu", batch_size=5)  # settings of their own: a parser no other test has filled
    scorers = [load_scorer(name, **options) for name in ("capture", "spice_factual", "soft_spice")]
    parser = scorers[0].parser
    assert all(s.parser is parser for s in scorers)
    generated = []
    original = parser.generate

    def counting(texts, input_limits=None):
        generated.extend(effective_input(parser, text, limit) for text, limit in zip(texts, input_limits))
        return original(texts, input_limits)

    monkeypatch.setattr(parser, "generate", counting)
    second_system = ["A dog sits on a red car.", "A man sits."]
    for scorer in scorers:
        for system in (PREDICTIONS[:2], second_system):
            scorer.score(system, references=REFERENCES[:2])
    texts = [*PREDICTIONS[:2], *second_system, *(r for refs in REFERENCES[:2] for r in refs)]
    inputs = {effective_input(parser, t, 64) for t in texts}  # the SPICE variants: whole texts
    for text in texts:  # CAPTURE: sentences, each text's longest cut by one token (see the test above)
        sentences = scorers[0].language.sentences(text)
        limit = min(64, max(parser.input_length(s) - 1 for s in sentences))
        inputs |= {effective_input(parser, s, limit) for s in sentences}
    assert sorted(generated) == sorted(inputs)  # each distinct input generated once, over both systems and scorers


def effective_input(parser, text, limit):
    """The input the model sees: the stripped text and how many of its prompted tokens are kept."""
    return text.strip(), min(parser.input_length(text), limit)


@pytest.mark.parametrize("name", ["capture", "spice_factual", "soft_spice"])
def test_an_empty_caption_is_refused_before_any_parse(tiny_hub, name):
    scorer = load_scorer(name, **OPTIONS)
    before = scorer.parser.generated_texts
    with pytest.raises(InputError, match=r"predictions\[1\]"):
        scorer.score(["a dog", "  "], references=[["a dog"], ["a cat"]])
    assert scorer.parser.generated_texts == before


def test_capture_soft_spice_and_mpnet_score_share_one_all_mpnet_base_v2_load(tiny_hub, monkeypatch):
    """One encoder per weights and settings in a process: the real constructor runs once for both scorers (counted
    on the real class), other settings load their own; the shared encoder embeds both scorers' phrases."""
    from capeval.text.mpnet import MPNetEncoder

    loads = []
    init = MPNetEncoder.__init__

    def counting_init(self, weights, **options):
        loads.append((weights, options["cache_bytes"]))
        init(self, weights, **options)

    monkeypatch.setattr(MPNetEncoder, "__init__", counting_init)
    options = dict(device="cpu", batch_size=9)  # settings no other test uses: no encoder of theirs alive
    capture, soft = load_scorer("capture", **options), load_scorer("soft_spice", **options)
    assert capture.encoder is soft.encoder and loads == [("all-mpnet-base-v2", DEFAULT_CACHE_BYTES)]
    seed(capture.parser, monkeypatch)
    capture.score(PREDICTIONS, references=REFERENCES)
    soft.score(PREDICTIONS[:2], references=REFERENCES[:2])
    assert len(loads) == 1
    other = load_scorer("soft_spice", cache_bytes=1 << 20, **options)
    assert other.encoder is not soft.encoder and len(loads) == 2
    assert load_scorer("capture", soft_matching=False, **options).encoder is None and len(loads) == 2
    assert load_scorer("mpnet_score", **options).encoder is capture.encoder and len(loads) == 2  # MPNetScore too
