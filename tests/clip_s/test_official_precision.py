"""precision="official" of CLIP-S / PAC-S against an independent emulation of the official code: OpenAI's
``clip.load`` model on CUDA (``convert_weights``: conv/linear/attention/projection weights fp16; its ``LayerNorm``
computes in fp32 and casts back; sequence-first ``nn.MultiheadAttention``), written here from the state dict with
torch functionals, and the official numpy scoring (clipscore.py / pacscore), on tiny and full-size random weights."""

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from PIL import Image

from capeval.core.hub import load_safetensors, resolve
from capeval.core.scoring import load_scorer

HALF_KEYS = ("conv1.weight", "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias", "c_fc.weight",
             "c_fc.bias", "c_proj.weight", "c_proj.bias", "text_projection", "visual.proj")


class OpenAIClip:
    """OpenAI CLIP's forward (model.py), fp16 where ``convert_weights`` makes it fp16 when ``half``, fp32 otherwise."""

    def __init__(self, directory, half: bool):
        self.cfg = json.loads((directory / "open_clip_config.json").read_text())
        state = load_safetensors(directory / "open_clip_model.safetensors")
        self.dtype = torch.float16 if half else torch.float32
        self.w = {k: v.to(self.dtype) if k.endswith(HALF_KEYS) else v.float() for k, v in state.items()}

    def layer_norm(self, x, name):  # OpenAI's LayerNorm subclass: super().forward(x.float()).type(orig)
        w = self.w
        return TF.layer_norm(x.type(torch.float32), x.shape[-1:], w[name + ".weight"], w[name + ".bias"],
                             1e-5).type(x.dtype)

    def transformer(self, x, prefix, heads, mask):  # x: (L, N, D)
        w, layers = self.w, len({k[len(prefix):].split(".")[0] for k in self.w if k.startswith(prefix)})
        for i in range(layers):
            p = f"{prefix}{i}."
            h = self.layer_norm(x, p + "ln_1")
            mask_i = mask.to(dtype=x.dtype) if mask is not None else None
            attn = TF.multi_head_attention_forward(
                h, h, h, x.shape[-1], heads, w[p + "attn.in_proj_weight"], w[p + "attn.in_proj_bias"], None, None,
                False, 0.0, w[p + "attn.out_proj.weight"], w[p + "attn.out_proj.bias"], training=False,
                need_weights=False, attn_mask=mask_i)[0]
            x = x + attn
            h = TF.linear(self.layer_norm(x, p + "ln_2"), w[p + "mlp.c_fc.weight"], w[p + "mlp.c_fc.bias"])
            h = h * torch.sigmoid(1.702 * h)  # QuickGELU
            x = x + TF.linear(h, w[p + "mlp.c_proj.weight"], w[p + "mlp.c_proj.bias"])
        return x

    @torch.no_grad()
    def encode_image(self, pixels):
        w, width = self.w, self.cfg["model_cfg"]["vision_cfg"]["width"]
        patch = self.cfg["model_cfg"]["vision_cfg"]["patch_size"]
        x = TF.conv2d(pixels.type(self.dtype), w["visual.conv1.weight"], stride=patch)
        x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
        cls = w["visual.class_embedding"].to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1], dtype=x.dtype)
        x = torch.cat([cls, x], dim=1) + w["visual.positional_embedding"].to(x.dtype)
        x = self.layer_norm(x, "visual.ln_pre").permute(1, 0, 2)
        x = self.transformer(x, "visual.transformer.resblocks.", width // 64, None).permute(1, 0, 2)
        return self.layer_norm(x[:, 0, :], "visual.ln_post") @ w["visual.proj"]

    @torch.no_grad()
    def encode_text(self, tokens):
        w, text_cfg = self.w, self.cfg["model_cfg"]["text_cfg"]
        mask = torch.empty(text_cfg["context_length"], text_cfg["context_length"]).fill_(float("-inf")).triu_(1)
        x = w["token_embedding.weight"][tokens].type(self.dtype) + w["positional_embedding"].type(self.dtype)
        x = self.transformer(x.permute(1, 0, 2), "transformer.resblocks.", text_cfg["heads"], mask).permute(1, 0, 2)
        x = self.layer_norm(x, "ln_final").type(self.dtype)
        return x[torch.arange(x.shape[0]), tokens.argmax(dim=-1)] @ w["text_projection"]


def _pixels(path, size=224):
    from torchvision.transforms import functional as F

    image = Image.open(path)
    image = F.center_crop(F.resize(image, size, interpolation=F.InterpolationMode.BICUBIC), size).convert("RGB")
    return F.normalize(F.to_tensor(image), (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))


def _official_scores(model, image_paths, captions, references, w):
    """clipscore.py / pacscore: features as numpy arrays of the model's dtype, then the official numpy scoring."""
    import open_clip

    prefix = "A photo depicts "
    images = model.encode_image(torch.stack([_pixels(p) for p in image_paths])).numpy()
    cands = model.encode_text(open_clip.tokenize([prefix + c for c in captions])).numpy()
    images = images / np.sqrt(np.sum(images ** 2, axis=1, keepdims=True))
    cands = cands / np.sqrt(np.sum(cands ** 2, axis=1, keepdims=True))
    per = w * np.clip(np.sum(images * cands, axis=1), 0, None)
    flat = model.encode_text(open_clip.tokenize([prefix + r for refs in references for r in refs])).numpy()
    idxs = [i for i, refs in enumerate(references) for _ in refs]
    cands = cands / np.sqrt(np.sum(cands ** 2, axis=1, keepdims=True))  # the official code normalises again
    flat = flat / np.sqrt(np.sum(flat ** 2, axis=1, keepdims=True))
    groups = {}
    for feats, i in zip(flat, idxs):
        groups.setdefault(i, []).append(feats)
    text_text = [np.max(c.dot(np.vstack(groups[i]).transpose())) for i, c in enumerate(cands)]
    return per, 2 * per * text_text / (per + text_text)


def _images(tmp_path, n=3):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        path = tmp_path / f"image{i}.png"
        Image.fromarray(rng.integers(0, 256, (240 + 20 * i, 300, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    return paths


CAPTIONS = ["a dog runs across a grassy field", "two people riding bicycles down a street", "a bowl of fruit"]
REFERENCES = [["a dog in a field", "an animal running outdoors"], ["cyclists on a road"],
              ["apples and bananas in a bowl", "fruit on a table", "a kitchen"]]


def _ulps(actual, expected):
    """Distance in fp16 units in the last place."""
    a, e = np.asarray(actual, dtype=np.float16), np.asarray(expected, dtype=np.float16)
    return np.abs(a.view(np.int16).astype(np.int32) - e.view(np.int16).astype(np.int32))


def _check_clip_s(weights, directory, image_paths):
    result = load_scorer("clip_s", weights=weights, device="cpu", precision="official").score(
        CAPTIONS, image_paths, REFERENCES)
    expected, expected_ref = _official_scores(OpenAIClip(directory, half=True), image_paths, CAPTIONS, REFERENCES, 2.5)
    assert expected.dtype == np.float16 and expected_ref.dtype == np.float16
    assert _ulps(result["clip_s_per_sample"], expected).max() <= 1
    assert _ulps(result["refclip_s_per_sample"], expected_ref).max() <= 1
    # each value is an fp16 number, as the official scores are
    assert np.array_equal(np.float16(result["clip_s_per_sample"]).astype(np.float64), result["clip_s_per_sample"])
    return result, expected


def test_official_clip_s_equals_openai_fp16_emulation_on_tiny_weights(tiny_hub, tmp_path):
    image_paths = _images(tmp_path)
    result, expected = _check_clip_s("openai-clip-vit-b-32", resolve("openai-clip-vit-b-32"), image_paths)
    assert np.array_equal(np.float16(result["clip_s_per_sample"]), expected)  # bit-equal here
    # dtype="float16" (the whole model fp16, fp32 scoring) is a different computation
    half = load_scorer("clip_s", device="cpu", dtype="float16").score(CAPTIONS, image_paths, REFERENCES)
    assert not np.array_equal(half["clip_s_per_sample"], result["clip_s_per_sample"])


def test_official_clip_s_equals_openai_fp16_emulation_on_full_size_vit_b_32(tmp_path):
    from capeval.bench import random_clip_dir

    directory = random_clip_dir("ViT-B-32", tmp_path / "vit-b-32")
    _check_clip_s(str(directory), directory, _images(tmp_path))


def test_official_pac_s_is_fp32_with_the_official_scoring(tiny_hub, tmp_path):
    image_paths = _images(tmp_path)
    result = load_scorer("pac_s", device="cpu", precision="official").score(CAPTIONS, image_paths, REFERENCES)
    model = OpenAIClip(resolve("pacs-clip-vit-b-32"), half=False)
    expected, expected_ref = _official_scores(model, image_paths, CAPTIONS, REFERENCES, 2.0)
    assert expected.dtype == np.float32
    np.testing.assert_allclose(result["pac_s_per_sample"], expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(result["refpac_s_per_sample"], expected_ref, rtol=0, atol=1e-6)


def test_official_precision_refuses_a_dtype_and_a_backbone_of_other_precision(tiny_hub):
    from capeval.backbones.clip import ClipBackbone

    with pytest.raises(ValueError, match="leave dtype unset"):
        load_scorer("clip_s", device="cpu", precision="official", dtype="float16")
    with pytest.raises(ValueError, match="precision must be one of"):
        load_scorer("clip_s", device="cpu", precision="fp16")
    fp32 = ClipBackbone("openai-clip-vit-b-32", device="cpu")
    from capeval import InputError

    with pytest.raises(InputError, match="precision"):
        load_scorer("clip_s", device="cpu", precision="official", clip_backbone=fp32)


def test_openai_fp16_layout_and_its_own_persistent_cache(tiny_hub, tmp_path):
    """OpenAI's convert_weights layout (embeddings and LayerNorm weights stay fp32), and fp32 features persisted on
    disk are never served to the official precision (nor the reverse)."""
    from capeval.backbones.clip import ClipBackbone

    backbone = ClipBackbone("openai-clip-vit-b-32", device="cpu", precision="openai-fp16")
    params = dict(backbone.model.named_parameters())
    for name in ("visual.conv1.weight", "visual.proj", "text_projection", "transformer.resblocks.0.attn.in_proj_weight",
                 "transformer.resblocks.0.mlp.c_fc.weight", "visual.transformer.resblocks.0.attn.out_proj.bias"):
        assert params[name].dtype == torch.float16, name
    for name in ("token_embedding.weight", "positional_embedding", "visual.class_embedding", "ln_final.weight",
                 "visual.transformer.resblocks.0.ln_1.weight"):
        assert params[name].dtype == torch.float32, name
    image_paths = _images(tmp_path)
    persist = tmp_path / "persist"
    fp32 = load_scorer("clip_s", device="cpu", persist_dir=persist).score(CAPTIONS, image_paths)
    official = load_scorer("clip_s", device="cpu", precision="official", persist_dir=persist).score(
        CAPTIONS, image_paths)
    again = load_scorer("clip_s", device="cpu", persist_dir=persist).score(CAPTIONS, image_paths)
    fresh = load_scorer("clip_s", device="cpu", precision="official").score(CAPTIONS, image_paths)
    assert official["clip_s_per_sample"] == fresh["clip_s_per_sample"] != fp32["clip_s_per_sample"]
    assert again["clip_s_per_sample"] == fp32["clip_s_per_sample"]
