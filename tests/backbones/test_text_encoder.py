"""One text-encoding mechanism (``capeval.backbones.text_encoder.TextEncoder``) for CLIP, Alpha-CLIP, Long-CLIP,
MPNet, SimCSE and BLIP-2: each states only its tokenizer, forward and width rule. On FULL-SIZE random weights every
encoder's features equal an independent computation — the model's own forward on each caption alone, unsorted and
unpadded (transformers), or open_clip's ``encode_text`` on its own tokenization (CLIP, Long-CLIP) — to ≤ 1e-5, and a
caption's feature is bitwise the same in any batch; truncation counts equal counts made with the tokenizers directly."""

import random

import numpy as np
import pytest
import torch

from capeval.backbones.text_encoder import TextEncoder

LONG = "a man riding a brown horse along the beach at sunset while friends watch "
CAPTIONS = ["a dog.", "two cats on a sofa", "a child playing with a ball in a park near a lake.", "x",
            "A photo depicts a bowl of fruit", "A photo depicts " + LONG * 6, LONG * 20, "a bowl of fruit " * 12]


def _random_long_clip(tmp_path):
    """A random full-size ViT-B/32 CLIP with Long-CLIP's 248 text positions."""
    import open_clip

    from capeval.backbones.clip import build_clip, save_open_clip
    from capeval.core.constants import OPENAI_PREPROCESS

    cfg = dict(open_clip.get_model_config("ViT-B-32"), quick_gelu=True)
    cfg["text_cfg"] = {**cfg["text_cfg"], "context_length": 248}
    torch.manual_seed(0)
    save_open_clip(tmp_path, build_clip(cfg).state_dict(), cfg, OPENAI_PREPROCESS)
    return str(tmp_path)


def _check(encoder, expected, captions=CAPTIONS):
    """``encoder``'s features equal ``expected`` (≤ 1e-5) at any batch size and order, and each caption's feature is
    bitwise the same alone and among the others."""
    order = list(range(len(captions)))
    random.Random(0).shuffle(order)
    features = {}
    for batch_size, indices in ((64, range(len(captions))), (3, order)):
        encoder.batch_size = batch_size
        encoder.text_cache = type(encoder.text_cache)(encoder.text_cache.namespace)  # empty
        got = encoder.encode_texts([captions[i] for i in indices], show_progress=False)
        np.testing.assert_allclose(got.numpy(), expected[list(indices)], atol=1e-5, rtol=0)
        for i, row in zip(indices, got):
            assert torch.equal(features.setdefault(i, row), row), captions[i]
    encoder.text_cache = type(encoder.text_cache)(encoder.text_cache.namespace)
    assert torch.equal(encoder.encode_texts(captions[-1:], show_progress=False)[0], features[len(captions) - 1])


def test_every_text_encoder_states_only_what_differs():
    from capeval.backbones.alpha_clip import AlphaClip
    from capeval.backbones.clip import ClipBackbone
    from capeval.blip2.scorer import Blip2Backbone
    from capeval.polos.scorer import SimcseEncoder
    from capeval.text.mpnet import MPNetEncoder

    for encoder in (ClipBackbone, AlphaClip, MPNetEncoder, SimcseEncoder, Blip2Backbone):
        assert issubclass(encoder, TextEncoder), encoder
        for shared in ("encode_texts", "truncation", "text_length"):  # caching, sorting, counting: the base's
            assert all(shared not in vars(cls) for cls in encoder.__mro__ if cls is not TextEncoder), (encoder, shared)


@pytest.mark.parametrize("context_length", [None, 248], ids=["clip", "long_clip"])
def test_clip_features_equal_open_clips_own_forward(full_size_clip_dir, tmp_path, context_length):
    import open_clip

    from capeval.backbones.clip import ClipBackbone

    weights = _random_long_clip(tmp_path) if context_length else str(full_size_clip_dir)  # both full-size ViT-B/32
    clip = ClipBackbone(weights, device="cpu")
    assert clip.model.context_length == (context_length or 77) and clip.model.transformer.width == 512
    limit = context_length or 77
    with torch.inference_mode():  # open_clip's tokenizer and forward, the whole context wide
        expected = clip.model.encode_text(open_clip.tokenize(CAPTIONS, context_length=limit)).numpy()
    _check(clip, expected)
    lengths = [len(open_clip.tokenizer.SimpleTokenizer().encode(c)) + 2 for c in CAPTIONS]  # SOT and EOT
    assert clip.truncation.count(CAPTIONS) == sum(n > limit for n in lengths) == (2 if limit == 77 else 1)


def _single(tokenizer, caption, limit):
    return tokenizer(caption, truncation=True, max_length=limit, return_tensors="pt")


def test_mpnet_features_equal_the_models_forward_on_each_caption_alone(full_size_mpnet_dir):
    from capeval.text.mpnet import MAX_TOKENS, MPNetEncoder

    encoder = MPNetEncoder(str(full_size_mpnet_dir), device="cpu")
    assert encoder.model.config.hidden_size == 768 and encoder.model.config.num_hidden_layers == 12
    with torch.inference_mode():  # unpadded: the mean over all of its tokens
        expected = torch.cat([torch.nn.functional.normalize(
            encoder.model(**_single(encoder.tokenizer, c, MAX_TOKENS)).last_hidden_state.mean(1), dim=-1)
            for c in CAPTIONS]).numpy()
    _check(encoder, expected)
    lengths = [len(encoder.tokenizer(c)["input_ids"]) for c in CAPTIONS]
    assert encoder.truncation.count(CAPTIONS) == sum(n > MAX_TOKENS for n in lengths) >= 1


def test_simcse_features_equal_the_models_forward_on_each_caption_alone(full_size_roberta_dir):
    from capeval.functional.polos import scalar_mix
    from capeval.polos.checkpoint import head_config
    from capeval.polos.scorer import SimcseEncoder, head_from_config

    roberta = str(full_size_roberta_dir)
    head = head_from_config(head_config(text_dim=768, clip_dim=512, clip_weights="unused", text_encoder=roberta))
    torch.manual_seed(4)
    with torch.no_grad():
        head.scalar_parameters.normal_()
    encoder = SimcseEncoder(roberta, head, device=torch.device("cpu"), dtype=torch.float32)
    assert encoder.model.config.hidden_size == 768 and encoder.model.config.num_hidden_layers == 12
    expected = []
    with torch.inference_mode():
        for caption in CAPTIONS:
            tokens = _single(encoder.tokenizer, caption, 512)
            states = encoder.model(**tokens, output_hidden_states=True).hidden_states
            expected.append(scalar_mix([h.float() for h in states], tokens["attention_mask"], head.scalar_parameters,
                                       head.gamma, per_sentence=True)[:, 0])
    _check(encoder, torch.cat(expected).numpy())
    lengths = [len(encoder.tokenizer(c)["input_ids"]) for c in CAPTIONS]
    assert encoder.truncation.count(CAPTIONS) == sum(n > 512 for n in lengths) >= 1


def test_blip2_features_equal_the_models_itc_forward_on_each_caption_alone(full_size_qformer_blip2_dir):
    from capeval.blip2.scorer import MAX_TEXT_TOKENS, Blip2Backbone, lavis_clean_caption

    backbone = Blip2Backbone(str(full_size_qformer_blip2_dir), device="cpu")  # a BERT-base-size Q-Former
    qformer = backbone.model.config.qformer_config
    assert qformer.hidden_size == 768 and qformer.num_hidden_layers == 12
    expected = []
    with torch.inference_mode():  # transformers' own ITC forward (normalised text embeddings), one caption each
        for caption in CAPTIONS:
            tokens = _single(backbone.tokenizer, lavis_clean_caption(caption), MAX_TEXT_TOKENS)
            expected.append(backbone.model(**tokens, pixel_values=torch.zeros(1, 3, 224, 224),
                                           use_image_text_matching_head=False).text_embeds.float())

    class Normalised:  # the ITC score reads cosines: compare unit features
        def __getattr__(self, name):
            return getattr(backbone, name)

        def __setattr__(self, name, value):
            setattr(backbone, name, value)

        def encode_texts(self, texts, **kwargs):
            return torch.nn.functional.normalize(backbone.encode_texts(texts, **kwargs), dim=-1)

    _check(Normalised(), torch.cat(expected).numpy())
    lengths = [len(backbone.tokenizer(lavis_clean_caption(c))["input_ids"]) for c in CAPTIONS]
    assert backbone.truncation.count(CAPTIONS) == sum(n > MAX_TEXT_TOKENS for n in lengths) >= 1
