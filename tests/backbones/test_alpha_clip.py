"""Alpha-CLIP: zero alpha kernel = plain CLIP, the official checkpoint converter, mask preprocessing."""

import copy

import numpy as np
import pytest
import torch
from PIL import Image

from capeval.backbones.alpha_clip import AlphaClip, add_alpha_channel, encode_image_with_alpha
from capeval.backbones.clip import build_clip
from capeval.core.convert import convert

TINY_L14 = {"embed_dim": 32, "quick_gelu": True,
            "vision_cfg": {"layers": 1, "width": 64, "patch_size": 14, "image_size": 224},
            "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1}}


def test_zero_alpha_kernel_gives_plain_clip_features():
    torch.manual_seed(0)
    plain = build_clip(TINY_L14).eval()
    alpha_model = add_alpha_channel(copy.deepcopy(plain)).eval()
    pixels = torch.randn(2, 3, 224, 224)
    alpha = torch.randn(2, 1, 224, 224)
    with torch.no_grad():
        expected = plain.encode_image(pixels)
        got = encode_image_with_alpha(alpha_model, pixels, alpha)
        torch.nn.init.normal_(alpha_model.visual.conv1_alpha.weight)
        changed = encode_image_with_alpha(alpha_model, pixels, alpha)
    torch.testing.assert_close(got, expected)
    assert not torch.allclose(changed, expected, atol=1e-4)


def official_visual_forward(sd, pixels, alpha, heads=1):
    """The official Alpha-CLIP VisionTransformer written out from the official-format tensors."""
    F = torch.nn.functional
    x = F.conv2d(pixels, sd["conv1.weight"], stride=14) + F.conv2d(alpha, sd["conv1_alpha.weight"], stride=14)
    x = x.flatten(2).transpose(1, 2)
    cls = sd["class_embedding"].expand(x.shape[0], 1, -1)
    x = torch.cat([cls, x], 1) + sd["positional_embedding"]
    x = F.layer_norm(x, (x.shape[-1],), sd["ln_pre.weight"], sd["ln_pre.bias"])
    p = "transformer.resblocks.0."
    h = F.layer_norm(x, (x.shape[-1],), sd[p + "ln_1.weight"], sd[p + "ln_1.bias"])
    q, k, v = F.linear(h, sd[p + "attn.in_proj.weight"], sd[p + "attn.in_proj.bias"]).chunk(3, -1)
    attn = torch.softmax(q @ k.transpose(1, 2) / (q.shape[-1] // heads) ** 0.5, -1)
    x = x + F.linear(attn @ v, sd[p + "attn.out_proj.weight"], sd[p + "attn.out_proj.bias"])
    h = F.layer_norm(x, (x.shape[-1],), sd[p + "ln_2.weight"], sd[p + "ln_2.bias"])
    h = F.linear(h, sd[p + "mlp.c_fc.weight"], sd[p + "mlp.c_fc.bias"])
    x = x + F.linear(h * torch.sigmoid(1.702 * h), sd[p + "mlp.c_proj.weight"], sd[p + "mlp.c_proj.bias"])
    x = F.layer_norm(x[:, 0], (x.shape[-1],), sd["ln_post.weight"], sd["ln_post.bias"])
    return x @ sd["proj"]


def test_official_checkpoint_converts_and_loads_with_identical_outputs(tiny_hub, tmp_path):
    torch.manual_seed(3)
    model = add_alpha_channel(build_clip(TINY_L14))
    torch.nn.init.normal_(model.visual.conv1_alpha.weight, std=0.05)
    official = {k.replace("in_proj_weight", "in_proj.weight").replace("in_proj_bias", "in_proj.bias"): v.clone()
                for k, v in model.visual.state_dict().items()}
    assert "transformer.resblocks.0.attn.in_proj.weight" in official and "conv1_alpha.weight" in official
    torch.save(official, tmp_path / "clip_l14_fabricated.pth")
    out = convert("alpha-clip", tmp_path / "clip_l14_fabricated.pth", tmp_path / "converted")
    backbone = AlphaClip(str(out), device="cpu")
    pixels, alpha = torch.randn(2, 3, 224, 224), torch.randn(2, 1, 224, 224)
    with torch.no_grad():
        got = encode_image_with_alpha(backbone.model, pixels, alpha)
        expected = official_visual_forward(official, pixels, alpha)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    # the text tower is the OpenAI CLIP of the same size
    from capeval.backbones.clip import load_open_clip

    text_clip, _, _ = load_open_clip("openai-clip-vit-l-14")
    torch.testing.assert_close(backbone.model.token_embedding.weight, text_clip.token_embedding.weight)
    assert (out / "README.md").exists()


def test_converter_refuses_a_plain_visual_checkpoint(tmp_path):
    torch.save({"conv1.weight": torch.zeros(64, 3, 14, 14)}, tmp_path / "plain.pth")
    with pytest.raises(ValueError, match="not an Alpha-CLIP"):
        convert("alpha-clip", tmp_path / "plain.pth", tmp_path / "out")


def test_plain_clip_weights_are_refused_with_a_clear_error(tiny_hub):
    with pytest.raises(ValueError, match="plain CLIP"):
        AlphaClip("openai-clip-vit-l-14", device="cpu")


@pytest.mark.parametrize("alignment", ["official", "crop"])
def test_mask_preprocessing(tiny_hub, alignment):
    backbone = AlphaClip("alpha-clip-vit-l-14", device="cpu", mask_alignment=alignment)
    on, off = (1 - 0.5) / 0.26, (0 - 0.5) / 0.26
    full = backbone.preprocess_mask(np.ones((10, 40), bool), (40, 10))
    assert full.shape == (1, 224, 224)
    torch.testing.assert_close(full, torch.full_like(full, on))
    left = np.zeros((10, 40), bool)
    left[:, :10] = True  # the left quarter of a wide image
    alpha = backbone.preprocess_mask(left, (40, 10))[0]
    if alignment == "official":  # stretched: the left quarter of the 224 columns
        assert torch.allclose(alpha[:, :50], torch.tensor(on)) and torch.allclose(alpha[:, 60:], torch.tensor(off))
    else:  # resized to height 224 then centre-cropped: the left quarter lies outside the crop
        torch.testing.assert_close(alpha, torch.full_like(alpha, off))
    with pytest.raises(ValueError, match="does not match the image"):
        backbone.preprocess_mask(left, (10, 40))


def test_regions_of_one_image_are_encoded_once_in_batches(tiny_hub):
    backbone = AlphaClip("alpha-clip-vit-l-14", device="cpu", batch_size=2)
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (30, 40, 3), dtype=np.uint8))
    masks = [np.zeros((30, 40), bool) for _ in range(3)]
    for k, mask in enumerate(masks):
        mask[:, 10 * k:10 * k + 10] = True
    calls = []
    original = backbone._encode_masked_batch
    backbone._encode_masked_batch = lambda items: calls.append(len(items)) or original(items)
    features = backbone.encode_regions(image, masks + masks[:1])
    assert calls == [2, 1]  # 3 distinct masks in batches of 2; the repeated mask is not re-encoded
    torch.testing.assert_close(features[0], features[3])
    whole = backbone.encode_regions(image, [np.ones((30, 40), bool)])
    torch.testing.assert_close(whole[0], backbone.encode_images([image])[0])



def test_mask_resize_is_bilinear_without_antialiasing_as_alpha_clip_ran(tiny_hub):
    """Pinned: torchvision >= 0.17 antialiases tensor resizes by default; Alpha-CLIP's torchvision did not."""
    import torch.nn.functional as F

    backbone = AlphaClip("alpha-clip-vit-l-14", device="cpu")
    mask = np.zeros((448, 600), bool)
    mask[::3, ::2] = True  # fine detail that antialiasing would blur
    alpha = backbone.preprocess_mask(mask, (600, 448))
    raw = torch.from_numpy(mask.astype(np.float32))[None, None]
    plain = F.interpolate(raw, size=(224, 224), mode="bilinear", align_corners=False, antialias=False)[0]
    blurred = F.interpolate(raw, size=(224, 224), mode="bilinear", align_corners=False, antialias=True)[0]
    torch.testing.assert_close(alpha, (plain - 0.5) / 0.26, rtol=0, atol=1e-6)
    assert (alpha - (blurred - 0.5) / 0.26).abs().max() > 0.1
