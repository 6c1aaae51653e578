"""The full-size random stand-ins of the speed benchmark (capeval.testing.full_size_detail): the configurations are
flan-t5-base's and all-mpnet-base-v2's, and the builders, run at a reduced size through the same code, file models
and NLTK data that capeval's own loaders read offline."""

import json

import pytest
import torch

from capeval.testing import full_size_detail as full

SMALL_T5 = dict(full.FLAN_T5_BASE, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1, num_heads=2,
                vocab_size=512)
SMALL_MPNET = dict(full.MPNET_BASE, vocab_size=400, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                   intermediate_size=32)


def test_the_configurations_are_the_published_base_models():
    from transformers import MPNetConfig, MPNetModel, T5Config, T5ForConditionalGeneration

    t5 = T5Config(**full.FLAN_T5_BASE)
    assert (t5.d_model, t5.d_kv, t5.d_ff, t5.num_layers, t5.num_decoder_layers, t5.num_heads, t5.vocab_size) == \
        (768, 64, 2048, 12, 12, 12, 32128)
    assert t5.is_gated_act and t5.dense_act_fn == "gelu_new"
    # T5 v1.1's unscaled decoder output (transformers 5 states it as scale_decoder_outputs and ties the output
    # layer to the input embedding when no checkpoint holds a separate one: the same shapes, the same cost)
    assert not getattr(t5, "scale_decoder_outputs", t5.tie_word_embeddings)
    mpnet = MPNetConfig(**full.MPNET_BASE)
    assert (mpnet.hidden_size, mpnet.num_hidden_layers, mpnet.num_attention_heads, mpnet.vocab_size) == \
        (768, 12, 12, 30527)
    with torch.device("meta"):  # the parameter counts of flan-t5-base and MPNet-base, without allocating them
        model = T5ForConditionalGeneration(t5)
        tied = model.lm_head.weight is model.shared.weight
        assert tuple(model.lm_head.weight.shape) == (32128, 768)
        assert sum(p.numel() for p in model.parameters()) + tied * 32128 * 768 == 247_577_856
        assert sum(p.numel() for p in MPNetModel(mpnet).parameters()) == 109_486_464


@pytest.fixture(scope="module")
def small_cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("full_size_detail")
    nltk_data = full.populate_full_size_detail_cache(root / "hub", root, factual_config=SMALL_T5, t5_pieces=500,
                                                     mpnet_config=SMALL_MPNET, corpus_limit=3000)
    return root, nltk_data


def test_english_corpus_is_wordnet_glosses():
    corpus = full.english_corpus(limit=5)
    assert len(corpus) == 5 and all(line and "|" not in line for line in corpus)
    assert corpus[1] == "an entity that has physical existence"  # physical_entity.n.01's gloss in WordNet 3.0


def test_reduced_builds_load_through_capeval(small_cache, monkeypatch):
    import huggingface_hub.constants as hub_constants

    from capeval.backbones.scene_graph_parser import SceneGraphParser
    from capeval.core.hub import resolve
    from capeval.detail.language import NltkLanguage
    from capeval.text.mpnet import MPNetEncoder

    root, nltk_data = small_cache
    monkeypatch.setenv("HF_HUB_CACHE", str(root / "hub"))
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(root / "hub"))
    parser = SceneGraphParser(device="cpu", max_output_length=8)
    assert parser.model.config.d_model == 16 and parser.model.config.vocab_size == 512
    assert len(parser.tokenizer) == 500
    assert (parser.tokenizer.pad_token_id, parser.tokenizer.eos_token_id, parser.tokenizer.unk_token_id) == (0, 1, 2)
    text = "a small animal that is kept as a pet"
    ids = parser.tokenizer(text)["input_ids"]
    assert ids[-1] == 1 and parser.tokenizer.decode(ids, skip_special_tokens=True) == text
    assert len(parser.parse([text])) == 1
    encoder = MPNetEncoder(device="cpu")
    assert len(encoder.tokenizer) == 400 and encoder.tokenizer.convert_ids_to_tokens([0, 1, 2, 3, 399]) == \
        ["<s>", "<pad>", "</s>", "[UNK]", "<mask>"]
    assert encoder.encode_texts(["a pet"], show_progress=False).shape == (1, 16)
    language = NltkLanguage(*(resolve(name) for name in full.NLTK_PACKAGES))
    assert language.lemmatize("dogs", "n") == "dog" and "domestic_dog" in language.synonyms("dog")  # WordNet 3.0
    assert (nltk_data / "corpora" / "wordnet" / "data.noun").read_bytes() == \
        (resolve("nltk-wordnet") / "corpora" / "wordnet" / "data.noun").read_bytes()
    assert json.loads((root / "built.json").read_text())["t5_pieces"] == 500


def test_too_small_a_corpus_for_the_vocabulary_is_refused(tmp_path):
    with pytest.raises(ValueError, match="WordPiece entries"):
        full.write_mpnet(tmp_path, ["a dog"], config=dict(SMALL_MPNET, vocab_size=5000))
