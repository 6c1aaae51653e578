"""Long-CLIP: capeval's features (the authors' checkpoint through the registered converter, run by ClipBackbone) equal
the official forward (``beichenzbc/Long-CLIP`` ``model/model_longclip.py``), re-implemented here from its semantics, on
random weights; truncation is counted at 248 tokens for Long-CLIP and at 77 for CLIP."""

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from capeval.backbones.clip import ClipBackbone
from capeval.core.constants import OPENAI_MEAN, OPENAI_STD
from capeval.core.convert import convert
from capeval.core.errors import ConversionError, TruncationWarning
from capeval.core.scoring import load_scorer
from capeval.testing.tiny_long_clip import tiny_long_clip_state_dict

CONTEXT = 248
SHORT = "a dog runs on the grass"
LONG = ("a wide street at dusk with " + "a red bus , a yellow taxi and a man on a bicycle , " * 6).strip()  # ~90 tokens
TOO_LONG = "a dog " * 150  # 302 tokens
TOLERANCE = 2e-5  # fp32; both forwards differ only in operation order (capeval trims padding after the EOT)


def _official_ids(tokenizer, text):
    """``longclip.tokenize(text, truncate=True)``: SOT, BPE, EOT, cut at 248 with the EOT kept, zero-padded."""
    ids = [tokenizer.sot_token_id, *tokenizer.encode(text), tokenizer.eot_token_id]
    if len(ids) > CONTEXT:
        ids = ids[:CONTEXT]
        ids[-1] = tokenizer.eot_token_id
    return ids + [0] * (CONTEXT - len(ids))


def _block(sd, prefix, x, mask=None):
    """One OpenAI ``ResidualAttentionBlock`` on sequence-first ``x``."""
    width = x.shape[-1]

    def ln(name, y):
        return F.layer_norm(y, (width,), sd[f"{prefix}.{name}.weight"], sd[f"{prefix}.{name}.bias"], 1e-5)

    y = ln("ln_1", x)
    attended, _ = F.multi_head_attention_forward(
        y, y, y, width, width // 64, sd[f"{prefix}.attn.in_proj_weight"], sd[f"{prefix}.attn.in_proj_bias"],
        None, None, False, 0.0, sd[f"{prefix}.attn.out_proj.weight"], sd[f"{prefix}.attn.out_proj.bias"],
        training=False, need_weights=False, attn_mask=mask)
    x = x + attended
    hidden = F.linear(ln("ln_2", x), sd[f"{prefix}.mlp.c_fc.weight"], sd[f"{prefix}.mlp.c_fc.bias"])
    hidden = hidden * torch.sigmoid(1.702 * hidden)  # QuickGELU
    return x + F.linear(hidden, sd[f"{prefix}.mlp.c_proj.weight"], sd[f"{prefix}.mlp.c_proj.bias"])


def _layers(sd, prefix):
    return sorted({int(k[len(prefix) + 1:].split(".")[0]) for k in sd if k.startswith(prefix + ".")})


def official_encode_text(sd, tokens):
    """``CLIP.encode_text`` of Long-CLIP: ``positional_embedding`` masked to positions < 20 plus
    ``positional_embedding_res`` masked to positions ≥ 20, the 248-wide causal transformer, EOT (argmax) pooling."""
    width = sd["ln_final.weight"].shape[0]
    mask1 = torch.zeros(CONTEXT, 1)
    mask1[:20] = 1
    mask2 = torch.zeros(CONTEXT, 1)
    mask2[20:] = 1
    x = sd["token_embedding.weight"][tokens]
    x = x + sd["positional_embedding"] * mask1 + sd["positional_embedding_res"] * mask2
    causal = torch.full((CONTEXT, CONTEXT), float("-inf")).triu_(1)
    x = x.permute(1, 0, 2)
    for i in _layers(sd, "transformer.resblocks"):
        x = _block(sd, f"transformer.resblocks.{i}", x, causal)
    x = F.layer_norm(x.permute(1, 0, 2), (width,), sd["ln_final.weight"], sd["ln_final.bias"], 1e-5)
    return x[torch.arange(x.shape[0]), tokens.argmax(dim=-1)] @ sd["text_projection"]


def official_encode_image(sd, pixels):
    """``VisionTransformer.forward``: patches, class token, positions, ln_pre, blocks, ln_post (class token), proj."""
    x = F.conv2d(pixels, sd["visual.conv1.weight"], stride=sd["visual.conv1.weight"].shape[-1])
    x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
    width = x.shape[-1]
    x = torch.cat([sd["visual.class_embedding"] + torch.zeros(x.shape[0], 1, width), x], dim=1)
    x = F.layer_norm(x + sd["visual.positional_embedding"], (width,), sd["visual.ln_pre.weight"],
                     sd["visual.ln_pre.bias"], 1e-5).permute(1, 0, 2)
    for i in _layers(sd, "visual.transformer.resblocks"):
        x = _block(sd, f"visual.transformer.resblocks.{i}", x)
    x = F.layer_norm(x.permute(1, 0, 2)[:, 0], (width,), sd["visual.ln_post.weight"], sd["visual.ln_post.bias"], 1e-5)
    return x @ sd["visual.proj"]


def official_preprocess(image, size):
    """The authors' ``_transform``: Resize (bicubic), CenterCrop, RGB, ToTensor, Normalize (OpenAI mean/std)."""
    from torchvision import transforms as T

    return T.Compose([T.Resize(size, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(size),
                      lambda im: im.convert("RGB"), T.ToTensor(), T.Normalize(OPENAI_MEAN, OPENAI_STD)])(image)


@pytest.fixture(scope="module")
def long_clip(tmp_path_factory):
    """(the authors' state dict, capeval's converted weights directory) of a tiny random Long-CLIP."""
    root = tmp_path_factory.mktemp("long_clip")
    official = tiny_long_clip_state_dict(seed=5)
    torch.save(official, root / "longclip-tiny.pt")
    convert("long-clip", root / "longclip-tiny.pt", root / "converted")
    return official, root / "converted"


def test_long_clip_features_equal_the_official_forward(long_clip):
    official, converted = long_clip
    backbone = ClipBackbone(str(converted), device="cpu")
    assert backbone.context_length == CONTEXT
    texts = [SHORT, LONG, TOO_LONG, "A photo depicts " + LONG]
    ids = [_official_ids(backbone.tokenizer, text) for text in texts]
    assert 77 < len(backbone.text_ids(LONG)) < CONTEXT  # read past CLIP's 77 tokens
    with torch.no_grad():
        expected = official_encode_text(official, torch.tensor(ids))
    np.testing.assert_allclose(backbone.encode_texts(texts).numpy(), expected.numpy(), atol=TOLERANCE, rtol=0)

    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8)) for shape in ((240, 320, 3), (224, 224, 3))]
    with torch.no_grad():
        expected = official_encode_image(official, torch.stack([official_preprocess(im, 224) for im in images]))
    np.testing.assert_allclose(backbone.encode_images(images).numpy(), expected.numpy(), atol=TOLERANCE, rtol=0)


def test_long_clip_positions_past_20_come_from_the_second_embedding(long_clip):
    """A text's feature depends on ``positional_embedding_res`` (not ``positional_embedding``) at positions ≥ 20."""
    official, converted = long_clip
    backbone = ClipBackbone(str(converted), device="cpu")
    swapped = {**official, "positional_embedding_res": official["positional_embedding"]}
    ids = torch.tensor([_official_ids(backbone.tokenizer, LONG)])
    with torch.no_grad():
        assert not torch.allclose(official_encode_text(swapped, ids), backbone.encode_texts([LONG]), atol=1e-3)


def test_truncation_counted_at_248_for_long_clip_and_77_for_clip(tiny_hub):
    images = [Image.new("RGB", (64, 48), "red")] * 3
    captions = [SHORT, LONG, TOO_LONG]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        long_result = load_scorer("clip_s", weights="long-clip-b", device="cpu").score(captions, images)
        clip_result = load_scorer("clip_s", weights="openai-clip-vit-b-32", device="cpu").score(captions, images)
    assert long_result["truncated_texts"] == 1  # only the 302-token caption
    assert clip_result["truncated_texts"] == 2
    truncations = [str(w.message) for w in caught if issubclass(w.category, TruncationWarning)]
    assert any("248" in message for message in truncations) and any("77" in message for message in truncations)


def test_long_clip_registered_weights_resolve_and_differ(tiny_hub):
    """Both registered Long-CLIP weights load through the registry at 248 tokens (tiny stand-ins here)."""
    for name in ("long-clip-b", "long-clip-l"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert ClipBackbone(name, device="cpu").context_length == CONTEXT


def test_converter_refuses_a_plain_clip_checkpoint(tmp_path):
    plain = {k: v for k, v in tiny_long_clip_state_dict().items() if k != "positional_embedding_res"}
    torch.save(plain, tmp_path / "clip.pt")
    with pytest.raises(ConversionError, match="positional_embedding_res"):
        convert("long-clip", tmp_path / "clip.pt", tmp_path / "out")
