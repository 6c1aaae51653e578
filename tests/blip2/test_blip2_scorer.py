"""BLIP2Score against transformers' own ITC forward and a hand-written max-over-queries cosine."""

import random
import re

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError
from capeval.core.hub import resolve
from capeval.core.scoring import load_scorer


def _images(n, seed=0):
    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 256, (30 + 7 * i, 50, 3), dtype=np.uint8)) for i in range(n)]


def _independent_itc(images, captions):
    """LAVIS preprocessing written out by hand, then ``Blip2ForImageTextRetrieval.forward`` (ITC branch)."""
    from torchvision.transforms import functional as TF
    from transformers import BertTokenizer, Blip2ForImageTextRetrieval

    directory = resolve("blip2-itm-vit-g")
    model = Blip2ForImageTextRetrieval.from_pretrained(str(directory)).eval()
    tokenizer = BertTokenizer(str(directory / "vocab.txt"), do_lower_case=True)
    mean, std = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
    pixels = torch.stack([
        TF.normalize(TF.to_tensor(TF.resize(im.convert("RGB"), [224, 224], TF.InterpolationMode.BICUBIC)), mean, std)
        for im in images])
    scores, manual = [], []
    with torch.no_grad():
        for i, caption in enumerate(captions):  # one pair at a time, unpadded, as the official loop
            text = " ".join(re.sub(r"([.!\"()*#:;~])", " ", caption.lower()).split())
            tokens = tokenizer(text, truncation=True, max_length=32, return_tensors="pt")
            out = model(pixel_values=pixels[i:i + 1], input_ids=tokens.input_ids, attention_mask=tokens.attention_mask,
                        use_image_text_matching_head=False)
            scores.append(float(out.logits_per_image[0, 0]))
            image_embeds = model.vision_model(pixel_values=pixels[i:i + 1]).last_hidden_state
            queries = model.qformer(query_embeds=model.query_tokens,
                                    encoder_hidden_states=image_embeds).last_hidden_state
            q = model.vision_projection(queries)[0].numpy()
            cls = model.qformer(query_embeds=model.embeddings(input_ids=tokens.input_ids), query_length=0,
                                attention_mask=tokens.attention_mask).last_hidden_state[0, 0]
            t = model.text_projection(cls).numpy()
            manual.append(float(max(row @ t / (np.linalg.norm(row) * np.linalg.norm(t)) for row in q)))
    return np.array(scores), np.array(manual)


CAPTIONS = ["A dog runs on the grass.", "a red car (parked) on the street!", "two people riding bike " * 12,
            "a cat", "The man; the woman: a ball"]


def test_blip2_score_equals_transformers_itc_and_manual_max_over_queries(tiny_hub):
    images = _images(len(CAPTIONS))
    with pytest.warns(UserWarning, match=r"1 distinct caption\(s\) exceed 32 BLIP-2 tokens"):
        result = load_scorer("blip2_score", device="cpu", batch_size=2).score(CAPTIONS, images)
    expected, manual = _independent_itc(images, CAPTIONS)
    np.testing.assert_allclose(expected, manual, atol=1e-5)  # the two independent routes agree
    np.testing.assert_allclose(result["blip2_score_per_sample"], expected, atol=1e-5)
    assert result["blip2_score"] == pytest.approx(expected.mean(), abs=1e-6)
    assert result["truncated_texts"] == 1
    assert np.ptp(expected) > 1e-3  # the tiny model tells the pairs apart


def test_batch_size_order_and_deduplication(tiny_hub):
    images = _images(4, seed=1)
    preds = [CAPTIONS[i % 4] for i in range(12)]
    pairs = [images[i % 4].copy() for i in range(12)]
    scorer = load_scorer("blip2_score", device="cpu", batch_size=5)
    model = scorer.backbone.model
    seen = {"images": 0, "texts": 0}
    vision_forward, embed_forward = model.vision_model.forward, model.embeddings.forward

    def count_images(pixel_values=None, **kw):
        seen["images"] += pixel_values.shape[0]
        return vision_forward(pixel_values=pixel_values, **kw)

    def count_texts(input_ids=None, **kw):  # text rows; the rows that fill a fixed-row forward are all padding
        seen["texts"] += int((input_ids != scorer.backbone.tokenizer.pad_token_id).any(1).sum())
        return embed_forward(input_ids=input_ids, **kw)

    model.vision_model.forward, model.embeddings.forward = count_images, count_texts
    with pytest.warns(UserWarning, match="exceed 32 BLIP-2 tokens"):
        baseline = scorer.score(preds, pairs)["blip2_score_per_sample"]
    assert seen == {"images": 4, "texts": 4}
    order = list(range(12))
    random.Random(0).shuffle(order)
    with pytest.warns(UserWarning, match="exceed 32 BLIP-2 tokens"):
        other = load_scorer("blip2_score", device="cpu", batch_size=1).score([preds[i] for i in order],
                                                                             [pairs[i] for i in order])
    np.testing.assert_allclose(other["blip2_score_per_sample"], [baseline[i] for i in order], atol=1e-5)


def test_bad_inputs(tiny_hub):
    scorer = load_scorer("blip2_score", device="cpu")
    image = Image.new("RGB", (8, 8))
    with pytest.raises(InputError, match="mismatched lengths"):
        scorer.score(["a", "b"], [image])
    with pytest.raises(InputError, match="empty caption"):
        scorer.score([" "], [image])
    with pytest.raises(InputError, match="needs one image"):
        scorer.score(["a"], None)
    with pytest.raises(InputError, match="not found"):
        scorer.score(["a"], ["/no/such/image.png"])


def _lavis_image_embeds(model, pixels):
    """LAVIS on CUDA, written from its code: ``convert_weights_to_fp16`` (conv/linear fp16), then
    ``ln_vision(visual_encoder(image))`` under fp16 autocast (conv/linear/matmul fp16; layer_norm and softmax fp32;
    gelu in its input dtype; cat/add promote) and ``.float()``. EVA: q scaled before q·kᵀ; ln_vision eps 1e-5."""
    sd = {k: v.float() for k, v in model.vision_model.state_dict().items()}
    cfg = model.config.vision_config
    heads, width = cfg.num_attention_heads, cfg.hidden_size
    h = lambda name: sd[name].half()  # noqa: E731  (a weight converted to fp16)
    x = torch.nn.functional.conv2d(pixels.half(), h("embeddings.patch_embedding.weight"),
                                   h("embeddings.patch_embedding.bias"), stride=cfg.patch_size)
    x = x.flatten(2).transpose(1, 2)
    x = torch.cat((sd["embeddings.class_embedding"].expand(x.shape[0], -1, -1), x), dim=1)
    x = x + sd["embeddings.position_embedding"]
    assert x.dtype == torch.float32  # the residual stream
    for i in range(cfg.num_hidden_layers):
        p = f"encoder.layers.{i}."
        y = torch.nn.functional.layer_norm(x, (width,), sd[p + "layer_norm1.weight"], sd[p + "layer_norm1.bias"], 1e-6)
        qkv = torch.nn.functional.linear(y.half(), h(p + "self_attn.qkv.weight"), h(p + "self_attn.qkv.bias"))
        qkv = qkv.reshape(x.shape[0], x.shape[1], 3, heads, -1).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * (width // heads) ** -0.5
        attn = (q @ k.transpose(-2, -1)).float().softmax(dim=-1)
        y = (attn.half() @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
        x = x + torch.nn.functional.linear(y, h(p + "self_attn.projection.weight"), h(p + "self_attn.projection.bias"))
        y = torch.nn.functional.layer_norm(x, (width,), sd[p + "layer_norm2.weight"], sd[p + "layer_norm2.bias"], 1e-6)
        y = torch.nn.functional.linear(y.half(), h(p + "mlp.fc1.weight"), h(p + "mlp.fc1.bias"))
        y = torch.nn.functional.gelu(y)
        x = x + torch.nn.functional.linear(y, h(p + "mlp.fc2.weight"), h(p + "mlp.fc2.bias"))
    return torch.nn.functional.layer_norm(x, (width,), sd["post_layernorm.weight"], sd["post_layernorm.bias"], 1e-5)


def test_official_precision_equals_lavis_numerics(tiny_hub):
    """precision="official": LAVIS's fp16-autocast EVA ViT, then the fp32 Q-Former (``image_embeds.float()``)."""
    from torchvision.transforms import functional as TF

    images, captions = _images(3, seed=2), CAPTIONS[:3]
    scorer = load_scorer("blip2_score", device="cpu", precision="official")
    model = scorer.backbone.model
    assert model.qformer.dtype == torch.float32
    result = scorer.score(captions, images)["blip2_score_per_sample"]
    mean, std = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
    pixels = torch.stack([
        TF.normalize(TF.to_tensor(TF.resize(im.convert("RGB"), [224, 224], TF.InterpolationMode.BICUBIC)), mean, std)
        for im in images])
    tokenizer = scorer.backbone.tokenizer
    expected = []
    with torch.no_grad():
        embeds = _lavis_image_embeds(model, pixels)
        queries = model.qformer(query_embeds=model.query_tokens.expand(3, -1, -1),
                                encoder_hidden_states=embeds).last_hidden_state
        query_feats = model.vision_projection(queries)
        image_feats = torch.nn.functional.normalize(query_feats, dim=-1)
        for i, caption in enumerate(captions):
            text = " ".join(re.sub(r"([.!\"()*#:;~])", " ", caption.lower()).split())
            tokens = tokenizer(text, truncation=True, max_length=32, return_tensors="pt")
            cls = model.qformer(query_embeds=model.embeddings(input_ids=tokens.input_ids), query_length=0,
                                attention_mask=tokens.attention_mask).last_hidden_state[:, 0]
            text_feat = torch.nn.functional.normalize(model.text_projection(cls), dim=-1)
            expected.append(float((image_feats[i] @ text_feat[0]).max()))
    np.testing.assert_allclose(result, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(scorer.backbone.encode_images(images), query_feats, rtol=0, atol=1e-7)
    for other in ({}, {"dtype": "float16"}):  # neither fp32 nor an all-fp16 model is LAVIS's computation
        feats = load_scorer("blip2_score", device="cpu", **other).backbone.encode_images(images)
        assert (feats - query_feats).abs().max() > 1e-6


def test_official_precision_refuses_a_dtype_and_a_backbone_of_other_precision(tiny_hub):
    with pytest.raises(ValueError, match="leave dtype unset"):
        load_scorer("blip2_score", device="cpu", precision="official", dtype="float16")
    backbone = load_scorer("blip2_score", device="cpu").backbone
    with pytest.raises(InputError, match="precision"):
        load_scorer("blip2_score", device="cpu", precision="official", backbone=backbone)
