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

    def count_texts(input_ids=None, **kw):
        seen["texts"] += input_ids.shape[0]
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
