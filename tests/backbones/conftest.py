"""Full-size random models shared by the backbone tests: each is built and written once per session (per worker
under pytest-xdist), in its own temporary folder, and every test loads it afresh from there through the production
loaders. Seeds are fixed, so the weights are the same in every session."""

import pytest
import torch


@pytest.fixture(scope="session")
def full_size_clip_dir(tmp_path_factory):
    """A random OpenAI ViT-B/32 CLIP (open_clip's architecture, ``pretrained=None``) in capeval's CLIP layout."""
    from capeval.bench import random_clip_dir

    return random_clip_dir("ViT-B-32", tmp_path_factory.mktemp("full-size-clip"))


def _full_size_transformer(directory, tiny_writer, model_class, config_class):
    """A tiny test tokenizer with a full-size (base: 768 wide, 12 layers) random model of its vocabulary."""
    from transformers import AutoTokenizer

    tiny_writer(directory)
    for name in ("model.safetensors", "pytorch_model.bin"):
        (directory / name).unlink(missing_ok=True)
    vocab = len(AutoTokenizer.from_pretrained(str(directory)))
    torch.manual_seed(3)
    model = model_class(config_class(vocab_size=vocab, max_position_embeddings=514, pad_token_id=1))
    assert model.config.hidden_size == 768 and model.config.num_hidden_layers == 12
    model.save_pretrained(str(directory))
    return directory


@pytest.fixture(scope="session")
def full_size_roberta_dir(tmp_path_factory):
    """SimCSE's RoBERTa-base size, random, with the tiny RoBERTa tokenizer."""
    from transformers import RobertaConfig, RobertaModel

    from capeval.testing import tiny_roberta

    return _full_size_transformer(tmp_path_factory.mktemp("full-size-roberta"), tiny_roberta, RobertaModel,
                                  RobertaConfig)


@pytest.fixture(scope="session")
def full_size_mpnet_dir(tmp_path_factory):
    """all-mpnet-base-v2's size, random, with the tiny MPNet tokenizer."""
    from transformers import MPNetConfig, MPNetModel

    from capeval.testing import tiny_mpnet

    return _full_size_transformer(tmp_path_factory.mktemp("full-size-mpnet"), tiny_mpnet, MPNetModel, MPNetConfig)


@pytest.fixture(scope="session")
def full_size_qformer_blip2_dir(tmp_path_factory):
    """BLIP-2 retrieval with a BERT-base-size Q-Former (a tiny vision tower), random, with the tiny BLIP-2
    tokenizer."""
    from transformers import Blip2Config, Blip2ForImageTextRetrieval

    from capeval.testing import write_tiny_blip2

    directory = tmp_path_factory.mktemp("full-size-qformer-blip2")
    write_tiny_blip2(directory)  # the tokenizer; the model is replaced
    vocab = len((directory / "vocab.txt").read_text().split())
    config = Blip2Config(vision_config={"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1,
                                        "num_attention_heads": 2, "image_size": 224, "patch_size": 32},
                         qformer_config={"vocab_size": vocab, "encoder_hidden_size": 32,
                                         "use_qformer_text_input": True},
                         num_query_tokens=32)
    torch.manual_seed(2)
    Blip2ForImageTextRetrieval(config).save_pretrained(str(directory), safe_serialization=True)
    return directory
