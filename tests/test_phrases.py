"""Phrase extraction for HICE-S: the scene-graph output parser, the tiny FACTUAL model offline, the spaCy fallback."""

import pytest

from capeval import InputError
from capeval.phrases import (FACTUAL_PROMPT, load_phrase_extractor, parse_scene_graph, phrases_from_triplets)


def test_scene_graph_output_is_parsed_into_triplets_and_phrases():
    triplets, malformed = parse_scene_graph("( pigs , is , 2 ) , ( pigs , fly on , sky ) , ( pigs , is , pink )")
    assert triplets == [("pigs", "is", "2"), ("pigs", "fly on", "sky"), ("pigs", "is", "pink")]
    assert malformed == 0
    assert phrases_from_triplets(triplets) == ["2 pink pigs", "sky", "pigs fly on sky"]


def test_malformed_pieces_are_skipped_and_counted():
    triplets, malformed = parse_scene_graph("( a , b ) , ( dog , on , grass ) , ( , is , red ) , trailing words")
    assert triplets == [("dog", "on", "grass")]
    assert malformed == 3
    assert parse_scene_graph("") == ([], 0)


def test_duplicates_are_removed_in_first_appearance_order():
    triplets = [("dog", "on", "grass"), ("dog", "on", "grass"), ("dog", "is", "brown"), ("dog", "is", "brown")]
    assert phrases_from_triplets(triplets, entities=["grass"]) == ["grass", "brown dog", "dog on grass"]


def test_spacy_fallback_phrases():
    parser = load_phrase_extractor("spacy")
    assert parser.extract(["two brown dogs run on the green grass", "a picture"]) == [
        ["two brown dogs", "green grass", "dogs run on grass"], ["picture"]]
    with pytest.raises(InputError, match="empty caption"):
        parser.extract(["  "])


def test_factual_parser_generation_arguments_and_batching(tiny_hub):
    parser = load_phrase_extractor("factual", device="cpu", batch_size=2)
    seen = []
    original = parser.model.generate

    def spy(**kwargs):
        seen.append(kwargs)
        return original(**kwargs)

    parser.model.generate = spy
    long_caption = "a man riding a horse " * 20
    captions = ["two dogs on grass", long_caption, "two dogs on grass", "a cat"]
    with pytest.warns(UserWarning, match="truncated"):
        batched = parser.extract(captions)
    assert [len(call["input_ids"]) for call in seen] == [2, 1]  # 3 distinct captions in batches of 2
    assert all(call["num_beams"] == 5 and call["max_length"] == 128 for call in seen)
    assert max(call["input_ids"].shape[1] for call in seen) == 64
    assert parser.truncated == 1
    first_ids = parser.tokenizer(FACTUAL_PROMPT + "two dogs on grass")["input_ids"]
    assert seen[0]["input_ids"][0][: len(first_ids)].tolist() == first_ids
    single = load_phrase_extractor("factual", device="cpu", batch_size=1)
    assert [single.extract([c])[0] for c in captions] == batched


def test_unknown_parser_name():
    with pytest.raises(KeyError, match="unknown phrase parser"):
        load_phrase_extractor("nope")
