"""The CLIP forward guard: a tower that cannot run the pooled forward warns once naming why, says so in the
provenance and gets open_clip's own forward (simulated on real tiny random open_clip models); OpenAI's fp16 numerics
are refused where they cannot be emulated; persisted features are keyed by the forwards' code
(``clip_pooled.forwards_tag``), so a changed forward never reuses them."""

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

import capeval
from capeval.backbones import clip_pooled
from capeval.backbones.clip import ClipBackbone, build_clip, load_open_clip, save_open_clip
from capeval.backbones.clip_pooled import POOLED, ForwardFallbackWarning
from capeval.core import shapes

CONFIG = {"embed_dim": 32, "quick_gelu": False,
          "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 64, "layers": 3, "head_width": 16},
          "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 4, "layers": 3}}
TEXTS = ["A photo depicts a dog on a red sofa", "two cats", "a man riding a horse along the beach at sunset"]


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    torch.manual_seed(0)
    model = build_clip(CONFIG)
    for parameter in model.parameters():  # zero-initialised weights would hide a skipped term
        torch.nn.init.normal_(parameter, std=0.05)
    directory = tmp_path_factory.mktemp("clip")
    save_open_clip(directory, model.state_dict(), CONFIG, {})
    return str(directory)


def _images():
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (40, 36, 3), dtype=np.uint8)) for _ in range(3)]


def _renamed_block(model):
    """Block 1 of the text tower becomes a subclass of open_clip's block (same parameters, same arithmetic)."""
    from open_clip.transformer import ResidualAttentionBlock

    model.transformer.resblocks[1].__class__ = type("RenamedBlock", (ResidualAttentionBlock,), {})
    return "text", f"block 1 is {__name__}.RenamedBlock, not open_clip's ResidualAttentionBlock"


class _OwnAttention(torch.nn.Module):
    """An attention that is not ``nn.MultiheadAttention`` (as open_clip main's ``Attention``), same arithmetic."""

    def forward(self, query, key, value, need_weights=False, attn_mask=None):  # self-attention, batch-first
        def split(t):
            return t.unflatten(-1, (self.num_heads, -1)).transpose(1, 2)

        q, k, v = torch.nn.functional.linear(query, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        attended = torch.nn.functional.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=attn_mask)
        return self.out_proj(attended.transpose(1, 2).flatten(2)), None


def _own_attention(model):
    model.visual.transformer.resblocks[2].attn.__class__ = _OwnAttention
    return "image", f"block 2's attention is {__name__}._OwnAttention, not torch.nn.MultiheadAttention"


def _sequence_first(model):
    for module in model.visual.modules():
        if hasattr(module, "batch_first"):
            module.batch_first = False
    return "image", "its blocks run sequence-first (batch_first=False)"


def _backbone(weights, change=None, **options):
    """A ClipBackbone on ``weights`` whose freshly built open_clip model had ``change`` applied (the production
    loader and builder otherwise); returns it and what ``change`` returned."""
    told = []

    def builder(config):
        model = build_clip(config)
        if change is not None:
            told.append(change(model))
        return model

    backbone = ClipBackbone(weights, device="cpu", loader=lambda ref, cache_dir=None: load_open_clip(
        ref, cache_dir=cache_dir, builder=builder), **options)
    return backbone, (told[0] if told else None)


@pytest.mark.parametrize("change", [_renamed_block, _own_attention, _sequence_first])
def test_an_incompatible_tower_warns_once_with_the_reason_and_gets_open_clips_own_features(weights, change):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backbone, (tower, reason) = _backbone(weights, change)
        text, image = backbone.encode_texts(TEXTS), backbone.encode_images(_images())
        backbone.encode_texts(["another text"])
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, ForwardFallbackWarning)]
    assert len(fallbacks) == 1 and reason in fallbacks[0] and f"the {tower} features" in fallbacks[0], fallbacks
    assert backbone.forward_paths[tower] == f"open_clip: {tower} tower: {reason}"
    assert backbone.forward_paths[{"text": "image", "image": "text"}[tower]] == POOLED
    with torch.inference_mode():  # open_clip's own forwards on the same model, 77 tokens wide
        expected_text = backbone.model.encode_text(backbone.tokenize(TEXTS))
        expected_image = backbone.model.encode_image(torch.stack([backbone.preprocess(i) for i in _images()]))
    np.testing.assert_allclose(text.numpy(), expected_text.numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(image.numpy(), expected_image.numpy(), atol=1e-5, rtol=0)


def test_the_provenance_says_which_forward_ran(weights):
    with pytest.warns(ForwardFallbackWarning):
        changed, (tower, reason) = _backbone(weights, _renamed_block)
    plain, _ = _backbone(weights)
    scorers = [capeval.load_scorer("clip_s", weights=weights, clip_backbone=b, device="cpu") for b in (changed, plain)]
    forwards = [scorer.provenance["clip_forwards"] for scorer in scorers]
    assert forwards[0]["text"] == f"open_clip: text tower: {reason}" and forwards[0]["image"] == POOLED
    assert forwards[1]["text"] == forwards[1]["image"] == POOLED
    assert scorers[0].hashcode != scorers[1].hashcode
    result = scorers[0].score(predictions=TEXTS[:2], images=_images()[:2])
    assert result["provenance"]["clip_forwards"] == forwards[0]


def test_a_plain_model_and_openai_fp16_do_not_warn(weights):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ForwardFallbackWarning)
        plain, _ = _backbone(weights)
        fp16, _ = _backbone(weights, precision="openai-fp16")
    assert plain.forward_paths == {"text": POOLED, "image": POOLED}
    assert fp16.forward_paths["text"] == "open_clip: text tower: its blocks run sequence-first (batch_first=False)"


def test_openai_fp16_is_refused_where_its_attention_cannot_be_emulated(weights):
    with pytest.raises(ValueError, match="cannot emulate OpenAI's fp16 numerics: block 2's attention is not torch.nn"):
        _backbone(weights, _own_attention, precision="openai-fp16")


def test_the_forwards_tag_is_the_same_in_a_fresh_process(weights):
    tag = _backbone(weights)[0].provenance_extras()["clip_forwards"]["tag"]
    code = ("from capeval.backbones.clip import ClipBackbone; import sys; "
            "print(ClipBackbone(sys.argv[1], device='cpu').provenance_extras()['clip_forwards']['tag'])")
    fresh = subprocess.run([sys.executable, "-c", code, weights], capture_output=True, text=True, check=True)
    assert fresh.stdout.strip() == tag


def test_the_forwards_tag_follows_the_fixed_shape_code(weights, monkeypatch):
    before = _backbone(weights)[0].provenance_extras()["clip_forwards"]["tag"]
    monkeypatch.setattr(shapes, "TEXT_ROWS_CPU", (16, 8, 4))
    assert _backbone(weights)[0].provenance_extras()["clip_forwards"]["tag"] != before


def test_a_changed_forward_does_not_reuse_persisted_features(weights, tmp_path, monkeypatch):
    first, _ = _backbone(weights, persist_dir=tmp_path)
    old_text, old_image = first.encode_texts(TEXTS), first.encode_images(_images())
    one_query = clip_pooled.attention_at_one_query

    def edited(attn, queries, keys, key_mask=None):  # as an edit of the pooled forward's code would
        return one_query(attn, queries, keys, key_mask) * 1.5

    monkeypatch.setattr(clip_pooled, "attention_at_one_query", edited)
    again, _ = _backbone(weights, persist_dir=tmp_path)
    text, image = again.encode_texts(TEXTS), again.encode_images(_images())
    fresh, _ = _backbone(weights)  # nothing persisted: the edited forward's own features
    assert torch.equal(text, fresh.encode_texts(TEXTS)) and torch.equal(image, fresh.encode_images(_images()))
    assert not torch.allclose(text, old_text) and not torch.allclose(image, old_image)
