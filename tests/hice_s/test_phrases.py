"""Phrase extraction for HICE-S: FACTUAL's output format, the phrase rules, the tiny FACTUAL T5 offline, spaCy."""

import random

import pytest

from capeval import InputError
from capeval.core.errors import ModelNotAvailableError, TruncationWarning
from capeval.core.caches import text_key
from capeval.hice_s.phrases import (FACTUAL_PROMPT, PhraseExtractor, SceneGraph, SpacyParser, load_phrase_extractor,
                             parse_scene_graph, phrases_from_graph)


def phrases(text, **options):
    return phrases_from_graph(parse_scene_graph(text), **options)


def test_relations_attributes_and_quantities_become_phrases():
    text = "( pigs , is , 2 ) , ( pigs , fly on , sky ) , ( pigs , is , pink )"
    graph = parse_scene_graph(text)
    assert graph == SceneGraph(triplets=[("pigs", "is", "2"), ("pigs", "fly on", "sky"), ("pigs", "is", "pink")],
                               entities=["pigs", "sky"])
    assert phrases(text) == ["2 pink pigs", "sky", "2 pigs", "pink pigs", "pigs fly on sky"]
    assert phrases(text, attribute_phrases=False) == ["2 pink pigs", "sky", "pigs fly on sky"]
    # the quantity goes first whatever the triplet order; a single attribute equals its entity phrase
    assert phrases("( dogs , is , brown ) , ( dogs , is , 3 ) , ( ball , is , red )") == [
        "3 brown dogs", "red ball", "brown dogs", "3 dogs"]


def test_duplicates_are_removed_in_first_appearance_order():
    text = "( dog , on , grass ) , ( dog , on , grass ) , ( dog , is , brown ) , ( dog , is , brown ) , ( grass )"
    # the lone "( grass )" among triplets is dropped, as the official graph_string_to_object skips any piece that is
    # not a triplet when the output holds several ("grass" stays an entity through its triplet)
    assert parse_scene_graph(text) == SceneGraph(triplets=[("dog", "on", "grass"), ("dog", "is", "brown")],
                                                 entities=["dog", "grass"], malformed=1)
    assert phrases(text) == ["brown dog", "grass", "dog on grass"]
    assert phrases("( cup ) , ( dog , is , brown )") == ["brown dog"]  # "( cup )" was kept before (audit, #18)
    assert phrases("( cat , on , mat ) , ( dog )") == ["cat", "mat", "cat on mat"]
    graph = SceneGraph(triplets=[("man", "ride", "horse")], entities=["field", "man"])
    assert phrases_from_graph(graph) == ["field", "man", "horse", "man ride horse"]


def test_malformed_pieces_are_skipped_and_counted():
    graph = parse_scene_graph("( a , b ) , ( dog , on , grass ) , ( , is , red ) , trailing words")
    assert graph == SceneGraph(triplets=[("dog", "on", "grass")], entities=["dog", "grass"], malformed=3)
    nested = parse_scene_graph("( a ( b , on , c ) ) )")  # an unclosed piece and stray ") )"
    assert nested == SceneGraph(triplets=[("b", "on", "c")], entities=["b", "c"], malformed=2)
    garbage = parse_scene_graph("dddddddd")
    assert garbage == SceneGraph(malformed=1) and phrases_from_graph(garbage) == []
    assert parse_scene_graph("") == SceneGraph()


def test_cut_off_output_and_lone_pieces_follow_the_official_cleaning():
    # a piece cut off by the output length is dropped ...
    assert parse_scene_graph("( bench , is , wooden ) , ( bench , faces , se") == SceneGraph(
        triplets=[("bench", "is", "wooden")], entities=["bench"], malformed=1)
    # ... unless it is the only one: its complete first field is kept (official: "( bench , is , woo" → "( bench )")
    assert parse_scene_graph("( bench , is , woo") == SceneGraph(entities=["bench"], malformed=1)
    assert parse_scene_graph("( ben") == SceneGraph(malformed=1)
    assert parse_scene_graph("( boy )") == SceneGraph(entities=["boy"])
    assert parse_scene_graph("( boy , is )") == SceneGraph(entities=["boy"], malformed=1)
    echoed = parse_scene_graph("Generate Scene Graph: ( cat , on , mat )")  # an echoed prompt is dropped
    assert echoed == SceneGraph(triplets=[("cat", "on", "mat")], entities=["cat", "mat"])


def test_parser_never_raises_on_random_output():
    rng = random.Random(0)
    alphabet = ["(", ")", ",", " ", "dog", "is", "2", "on", "Generate Scene Graph:"]
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        graph = parse_scene_graph(text)
        assert all(len(t) == 3 and all(t) for t in graph.triplets)
        assert all(isinstance(p, str) and p.strip() == p and p for p in phrases_from_graph(graph))


@pytest.fixture(scope="module")
def spacy_parser():
    return load_phrase_extractor("spacy", device="cpu")


def test_spacy_fallback_phrases(spacy_parser):
    assert isinstance(spacy_parser, PhraseExtractor)
    cases = {
        "two brown dogs run on the green grass":
            ["two brown dogs", "green grass", "two dogs", "brown dogs", "dogs run on grass"],
        "a man in a red shirt riding a horse in front of the building":
            ["man", "red shirt", "horse", "building", "man in shirt", "man riding horse",
             "man riding in front of building"],
        "There is a dog on the grass.": ["dog", "grass", "dog on grass"],
        "The sky is blue and the clouds are white": ["blue sky", "white clouds"],
        "a man and a woman sit and read books": ["man", "woman", "books", "man read books", "woman read books"],
        "a tennis player holding a tennis racket":
            ["tennis player", "tennis racket", "tennis player holding tennis racket"],
        "a man who rides a horse": ["man", "horse", "man rides horse"],
        "a cat sitting on top of a car": ["cat", "car", "cat sitting on top of car"],
        "A dog is lying on the couch next to a cat": ["dog", "couch", "cat", "dog lying on couch",
                                                      "dog lying next to cat"],
        "it is": [],
    }
    assert spacy_parser.extract(list(cases)) == list(cases.values())
    folded = SpacyParser(attribute_phrases=False).extract(["two brown dogs run on the green grass"])
    assert folded == [["two brown dogs", "green grass", "dogs run on grass"]]


def test_bad_captions_raise_input_errors(spacy_parser):
    with pytest.raises(InputError, match="empty caption"):
        spacy_parser.extract(["a dog", "  "])
    with pytest.raises(InputError, match="list of strings"):
        spacy_parser.extract("a dog")
    assert spacy_parser.extract([]) == []
    with pytest.raises(ModelNotAvailableError, match="not installed"):
        SpacyParser(model="no_such_spacy_model")
    with pytest.raises(KeyError, match="unknown phrase parser"):
        load_phrase_extractor("nope")


class GenerateSpy:
    """Wraps ``model.generate`` and records each call's inputs."""

    def __init__(self, model):
        self.calls, self.original = [], model.generate
        model.generate = self

    def __call__(self, input_ids, **kwargs):
        self.calls.append({"input_ids": input_ids, **kwargs})
        return self.original(input_ids, **kwargs)


def test_factual_generation_arguments_caching_and_truncation(tiny_hub):
    parser = load_phrase_extractor("factual", device="cpu", batch_size=2)
    assert isinstance(parser, PhraseExtractor)
    spy = GenerateSpy(parser.parser.model)
    long_caption = "a man riding a horse " * 20
    captions = ["two dogs on grass", long_caption, "  two dogs on grass ", "a cat"]
    with pytest.warns(TruncationWarning, match="1 of 4 captions exceed the parser's 64 input tokens") as caught:
        first = parser.extract(captions)
    assert len([w for w in caught if "parser's" in str(w.message)]) == 1
    assert parser.truncated_inputs == 1
    # 3 distinct stripped captions of 3 input lengths: a batch holds one length (nothing padded), so 3 batches
    assert [len(call["input_ids"]) for call in spy.calls] == [1, 1, 1]
    for call in spy.calls:
        assert call["num_beams"] == 5 and call["max_length"] == 128 and call["early_stopping"] is True
        assert call["decoder_start_token_id"] == parser.parser.tokenizer.pad_token_id == 0
        assert call["num_return_sequences"] == 1 and call["attention_mask"].shape == call["input_ids"].shape
    rows = [(row, mask) for call in spy.calls for row, mask in zip(call["input_ids"], call["attention_mask"])]
    prompted = {}
    for caption in dict.fromkeys(c.strip() for c in captions):
        ids = parser.parser.tokenizer(FACTUAL_PROMPT + caption)["input_ids"]
        prompted[caption] = ids[:63] + [parser.parser.tokenizer.eos_token_id] if len(ids) > 64 else ids
    sent = [row[mask.bool()].tolist() for row, mask in rows]
    assert sorted(sent) == sorted(prompted.values())
    assert max(len(ids) for ids in sent) == 64
    # each caption's phrases are the phrase rules applied to its own generated scene graph
    raw = dict(zip(prompted, parser.generate(list(prompted))))
    assert first == [phrases_from_graph(parse_scene_graph(raw[c.strip()])) for c in captions]
    calls = len(spy.calls)
    with pytest.warns(TruncationWarning, match="1 of 4 captions exceed the parser's 64 input tokens"):
        assert parser.extract(captions[::-1]) == first[::-1]  # cached, still truncated: counted and warned again
    assert len(spy.calls) == calls  # parsed captions are cached by text
    assert parser.truncated_inputs == 1  # per call, not a running total


def test_factual_batched_equals_one_at_a_time(tiny_hub):
    captions = ["two dogs on grass", "a man riding a horse in a field", "a cat", "green trees near a lake"]
    batched = load_phrase_extractor("factual", device="cpu", batch_size=4)
    single = load_phrase_extractor("factual", device="cpu", batch_size=1)
    assert batched.generate(captions) == [single.generate([c])[0] for c in captions]
    assert batched.graphs(captions) == [single.graphs([c])[0] for c in captions]
    assert batched.extract(captions) == [single.extract([c])[0] for c in captions]


def test_factual_dtype_option(tiny_hub):
    import torch

    parser = load_phrase_extractor("factual", device="cpu", dtype="bfloat16", attribute_phrases=False)
    assert {p.dtype for p in parser.parser.model.parameters()} == {torch.bfloat16}
    raw = parser.generate(["two dogs on grass"])
    assert parser.extract(["two dogs on grass"]) == [phrases_from_graph(parse_scene_graph(raw[0]),
                                                                        attribute_phrases=False)]


def test_factual_graph_cache_is_bounded_and_evicted_captions_are_parsed_again(tiny_hub):
    # generation is sorted by token length, then text: "a cat", "a red car", "two dogs on grass", ...
    captions = ["two dogs on grass", "a cat", "a man riding a horse", "a red car"]
    parser = load_phrase_extractor("factual", device="cpu", batch_size=1, max_output_length=24,
                                   max_cached_captions=2)
    spy = GenerateSpy(parser.parser.model)
    first = parser.graphs(captions)  # more distinct captions than the bound in one call
    assert len(spy.calls) == 4 and len(parser.parser.memory) == 2
    raw = parser.generate(captions)
    assert first == [parse_scene_graph(r) for r in raw]
    assert (parser.parser.namespace, text_key("a cat")) not in parser.parser.memory  # generated first, evicted

    spy.calls.clear()
    assert parser.extract(["a cat"]) == [phrases_from_graph(first[1])]
    sent = [call["input_ids"].tolist() for call in spy.calls]
    assert sent == [[parser.parser.tokenizer(FACTUAL_PROMPT + "a cat")["input_ids"]]]  # the evicted one, exactly once
    assert parser.graphs(["a cat"]) == [first[1]] and len(spy.calls) == 1  # now cached
    assert len(parser.parser.memory) == 2


def test_factual_graph_cache_is_bounded_by_bytes(tiny_hub):
    """A long caption costs its cache entry no more than a short one (keyed by its sha256), and the cache holds at
    most ``cache_bytes``; evicted graphs are generated again, equal."""
    captions = [f"{n} dogs on grass near a lake " * 8 for n in range(6)]
    unbounded = load_phrase_extractor("factual", device="cpu", max_output_length=24)
    expected = unbounded.graphs(captions)
    one_entry = max(unbounded.parser.memory.nbytes // len(captions), 1) if unbounded.parser.memory.nbytes else 0
    assert unbounded.parser.memory.nbytes > 0 and one_entry < 2_000  # the caption text is not held
    parser = load_phrase_extractor("factual", device="cpu", max_output_length=24, cache_bytes=3 * one_entry)
    assert parser.graphs(captions) == expected
    assert 0 < parser.parser.memory.nbytes <= 3 * one_entry and parser.parser.memory.evictions > 0
    assert parser.graphs(captions[:1]) == expected[:1]


def _words_to_input_length(tokenizer, length):
    """A caption whose prompted input is exactly ``length`` tokens long (end token included)."""
    def size(caption):
        return len(tokenizer(FACTUAL_PROMPT + caption)["input_ids"])

    words = ["a"]
    while size(" ".join(words + ["a"])) <= length:
        words.append("a")
    for tail in ("", "s", "t", "n", "og", "nd"):  # the last word lengthened to hit the length exactly
        caption = " ".join(words) + tail
        if size(caption) == length:
            return caption
    pytest.fail(f"no caption of {length} input tokens found")


def test_factual_truncation_is_counted_per_call_and_per_occurrence_whatever_the_cache_holds(tiny_hub):
    """The count is that of the inputs the tokenizer cuts at 64 tokens (prompt and end token included; counted
    here independently), for every occurrence of the call, cached or not; ``warn=False`` stays silent."""
    import warnings

    parser = load_phrase_extractor("factual", device="cpu", max_output_length=16)
    tokenizer = parser.parser.tokenizer
    at_limit = _words_to_input_length(tokenizer, 64)
    over_limit = at_limit + " dog"
    long_caption = "a man riding a horse " * 20
    captions = ["a cat", at_limit, f"  {over_limit} ", long_caption, over_limit, "a cat"]
    expected = sum(len(tokenizer(FACTUAL_PROMPT + c.strip())["input_ids"]) > 64 for c in captions)
    assert expected == 3  # over_limit twice (once with spaces) and the long caption; at_limit is not cut

    def truncation_warnings(call):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = call()
        return out, [w for w in caught if issubclass(w.category, TruncationWarning)]

    first, caught = truncation_warnings(lambda: parser.extract(captions))
    assert parser.truncated_inputs == expected and parser.count_truncated(captions) == expected
    assert len(caught) == 1 and str(caught[0].message).startswith(f"{expected} of {len(captions)} captions")
    assert all(parser.parser.memory.get((parser.parser.namespace, text_key(c.strip()))) is not None for c in captions)
    again, caught = truncation_warnings(lambda: parser.extract(captions))  # everything cached now
    assert again == first and parser.truncated_inputs == expected and len(caught) == 1
    _, caught = truncation_warnings(lambda: parser.extract(captions * 2, warn=False))
    assert parser.truncated_inputs == 2 * expected and caught == []
    _, caught = truncation_warnings(lambda: parser.extract(["a cat", at_limit]))
    assert parser.truncated_inputs == 0 and caught == []
    assert parser.count_truncated([]) == 0 and parser.extract([]) == [] and parser.truncated_inputs == 0


def test_spacy_parser_accepts_the_uniform_options_and_truncates_nothing(spacy_parser, tmp_path):
    parser = SpacyParser(device="cpu", dtype=None, cache_dir=tmp_path)  # accepted and ignored
    caption = "a man riding a horse " * 40
    assert parser.extract([caption], warn=False) == spacy_parser.extract([caption])
    assert parser.count_truncated([caption, "a dog"]) == 0


def test_spacy_parser_records_which_spacy_model_ran(spacy_parser):
    import importlib.metadata

    record = spacy_parser.provenance_extras()["spacy_model"]
    assert record["version"] == importlib.metadata.version(record["package"])
    assert record["name"].startswith("en_core_web_")
