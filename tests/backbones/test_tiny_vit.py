"""MobileSAM: the TinyViT image encoder (official key layout, independent forward), the safe converter, tiny
MobileSAM segment-everything through the offline hub cache, and HICE-S selecting it on a real image."""

import itertools
import json
import os
import pickle

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from capeval.core.convert import convert
from capeval.core.errors import ConversionError
from capeval.backbones.sam import SAM_ARCHITECTURES, RegionSettings, SegmentEverything, build_sam, load_sam
from capeval.backbones.tiny_vit import TinyViTEncoder

# MobileSAM's build_sam_vit_t, written out here (not imported from capeval)
MOBILE = {"embed_dims": [64, 128, 160, 320], "depths": [2, 2, 6, 2], "num_heads": [2, 4, 5, 10],
          "window_sizes": [7, 7, 14, 7], "mlp_ratio": 4, "expand": 4, "classes": 1000, "out": 256,
          "strides": [2, 2, 1]}
SETTINGS = RegionSettings(points_per_side=4, pred_iou_thresh=0.0, stability_score_thresh=0.0, max_regions=5)


def official_encoder_shapes(embed_dims, depths, num_heads, window_sizes, mlp_ratio, expand, classes, out, **_):
    """Key → shape of an official MobileSAM ``image_encoder`` (layout of the authors' tiny_vit_sam.py)."""
    shapes = {}

    def conv_bn(name, cin, cout, k, groups=1):
        shapes[f"{name}.c.weight"] = (cout, cin // groups, k, k)
        for stat in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{name}.bn.{stat}"] = (cout,)
        shapes[f"{name}.bn.num_batches_tracked"] = ()

    d0 = embed_dims[0]
    conv_bn("patch_embed.seq.0", 3, d0 // 2, 3)
    conv_bn("patch_embed.seq.2", d0 // 2, d0, 3)
    for i, d in enumerate(embed_dims):
        for j in range(depths[i]):
            b = f"layers.{i}.blocks.{j}"
            if i == 0:
                h = d * expand
                conv_bn(f"{b}.conv1", d, h, 1)
                conv_bn(f"{b}.conv2", h, h, 3, groups=h)
                conv_bn(f"{b}.conv3", h, d, 1)
                continue
            shapes[f"{b}.attn.attention_biases"] = (num_heads[i], window_sizes[i] ** 2)
            for norm in ("attn.norm", "mlp.norm"):
                shapes[f"{b}.{norm}.weight"] = shapes[f"{b}.{norm}.bias"] = (d,)
            shapes[f"{b}.attn.qkv.weight"], shapes[f"{b}.attn.qkv.bias"] = (3 * d, d), (3 * d,)
            shapes[f"{b}.attn.proj.weight"], shapes[f"{b}.attn.proj.bias"] = (d, d), (d,)
            shapes[f"{b}.mlp.fc1.weight"], shapes[f"{b}.mlp.fc1.bias"] = (mlp_ratio * d, d), (mlp_ratio * d,)
            shapes[f"{b}.mlp.fc2.weight"], shapes[f"{b}.mlp.fc2.bias"] = (d, mlp_ratio * d), (d,)
            conv_bn(f"{b}.local_conv", d, d, 3, groups=d)
        if i + 1 < len(embed_dims):
            m, e = f"layers.{i}.downsample", embed_dims[i + 1]
            conv_bn(f"{m}.conv1", d, e, 1)
            conv_bn(f"{m}.conv2", e, e, 3, groups=e)
            conv_bn(f"{m}.conv3", e, e, 1)
    shapes["norm_head.weight"] = shapes["norm_head.bias"] = (embed_dims[-1],)
    shapes["head.weight"], shapes["head.bias"] = (classes, embed_dims[-1]), (classes,)
    shapes["neck.0.weight"], shapes["neck.2.weight"] = (out, embed_dims[-1], 1, 1), (out, out, 3, 3)
    for k in ("neck.1", "neck.3"):
        shapes[f"{k}.weight"] = shapes[f"{k}.bias"] = (out,)
    return shapes


def random_weights(shapes, seed):
    g = torch.Generator().manual_seed(seed)
    out = {}
    for key, shape in shapes.items():
        if key.endswith("num_batches_tracked"):
            out[key] = torch.tensor(7, dtype=torch.long)
        elif key.endswith("running_var"):
            out[key] = torch.rand(shape, generator=g) + 0.5
        elif key.endswith(("bn.weight", "norm.weight", "neck.1.weight", "neck.3.weight", "norm_head.weight")):
            out[key] = 1 + 0.2 * torch.randn(shape, generator=g)
        else:
            out[key] = 0.2 * torch.randn(shape, generator=g) / max(1, int(np.prod(shape[1:])) ** 0.5 / 3)
    return out


def reference_encoder(w, x, cfg):
    """TinyViT-for-SAM forward written from the paper/official description with functional ops and explicit
    per-window loops; attention-bias offsets numbered in order of first appearance over the token pairs."""

    def cbn(name, x, stride=1, pad=0, groups=1):
        x = F.conv2d(x, w[f"{name}.c.weight"], None, stride, pad, 1, groups)
        return F.batch_norm(x, w[f"{name}.bn.running_mean"], w[f"{name}.bn.running_var"], w[f"{name}.bn.weight"],
                            w[f"{name}.bn.bias"], False, 0.0, 1e-5)

    def ln(x, name, eps=1e-5):
        return F.layer_norm(x, x.shape[-1:], w[f"{name}.weight"], w[f"{name}.bias"], eps)

    def attention(tokens, b, heads, s):  # (B, N, C) one window
        points = list(itertools.product(range(s), range(s)))
        offsets, idx = {}, []
        for p in points:
            for q in points:
                idx.append(offsets.setdefault((abs(p[0] - q[0]), abs(p[1] - q[1])), len(offsets)))
        bias = w[f"{b}.attn.attention_biases"][:, torch.tensor(idx)].view(heads, len(points), len(points))
        n_b, n, c = tokens.shape
        hd = c // heads
        qkv = F.linear(ln(tokens, f"{b}.attn.norm"), w[f"{b}.attn.qkv.weight"], w[f"{b}.attn.qkv.bias"])
        qkv = qkv.view(n_b, n, heads, 3 * hd)
        q, k, v = (qkv[..., i * hd:(i + 1) * hd].permute(0, 2, 1, 3) for i in range(3))
        attn = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + bias, dim=-1)
        out = (attn @ v).permute(0, 2, 1, 3).reshape(n_b, n, c)
        return F.linear(out, w[f"{b}.attn.proj.weight"], w[f"{b}.attn.proj.bias"])

    x = cbn("patch_embed.seq.2", F.gelu(cbn("patch_embed.seq.0", x, 2, 1)), 2, 1)
    for i, d in enumerate(cfg["embed_dims"]):
        for j in range(cfg["depths"][i]):
            b = f"layers.{i}.blocks.{j}"
            if i == 0:
                y = F.gelu(cbn(f"{b}.conv1", x))
                y = F.gelu(cbn(f"{b}.conv2", y, 1, 1, groups=y.shape[1]))
                x = F.gelu(cbn(f"{b}.conv3", y) + x)
                continue
            s, heads = cfg["window_sizes"][i], cfg["num_heads"][i]
            n_b, c, h, wd = x.shape
            hp, wp = -(-h // s) * s, -(-wd // s) * s
            padded = torch.zeros(n_b, hp, wp, c)
            padded[:, :h, :wd] = x.permute(0, 2, 3, 1)
            attended = torch.zeros_like(padded)
            for wy in range(hp // s):
                for wx in range(wp // s):
                    win = padded[:, wy * s:(wy + 1) * s, wx * s:(wx + 1) * s].reshape(n_b, s * s, c)
                    attended[:, wy * s:(wy + 1) * s, wx * s:(wx + 1) * s] = attention(win, b, heads, s).view(
                        n_b, s, s, c)
            x = x + attended[:, :h, :wd].permute(0, 3, 1, 2)
            x = cbn(f"{b}.local_conv", x, 1, 1, groups=c)
            t = x.permute(0, 2, 3, 1)
            hidden = F.gelu(F.linear(ln(t, f"{b}.mlp.norm"), w[f"{b}.mlp.fc1.weight"], w[f"{b}.mlp.fc1.bias"]))
            t = t + F.linear(hidden, w[f"{b}.mlp.fc2.weight"], w[f"{b}.mlp.fc2.bias"])
            x = t.permute(0, 3, 1, 2)
        if i + 1 < len(cfg["embed_dims"]):
            m = f"layers.{i}.downsample"
            x = F.gelu(cbn(f"{m}.conv1", x))
            x = F.gelu(cbn(f"{m}.conv2", x, cfg["strides"][i], 1, groups=x.shape[1]))
            x = cbn(f"{m}.conv3", x)

    def ln2d(x, name):
        mean = x.mean(1, keepdim=True)
        var = ((x - mean) ** 2).mean(1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-6) * w[f"{name}.weight"][:, None, None] + w[f"{name}.bias"][:, None,
                                                                                                            None]

    x = ln2d(F.conv2d(x, w["neck.0.weight"]), "neck.1")
    return ln2d(F.conv2d(x, w["neck.2.weight"], padding=1), "neck.3")


def encoder_kwargs(cfg):
    return {"embed_dims": cfg["embed_dims"], "depths": cfg["depths"], "num_heads": cfg["num_heads"],
            "window_sizes": cfg["window_sizes"], "mlp_ratio": cfg["mlp_ratio"], "mbconv_expand_ratio": cfg["expand"],
            "merge_strides": cfg["strides"], "num_classes": cfg["classes"], "out_chans": cfg["out"]}


def test_encoder_state_dict_has_the_official_keys_and_shapes():
    expected = official_encoder_shapes(**MOBILE)
    encoder = build_sam(SAM_ARCHITECTURES["mobile_sam"]).image_encoder
    got = {k: tuple(v.shape) for k, v in encoder.state_dict().items()}
    assert set(got) == set(expected)
    assert got == {k: tuple(v) for k, v in expected.items()}
    assert len(expected) == 302


@pytest.mark.parametrize("image_side", [128, 200, 448])
def test_tiny_vit_forward_matches_an_independent_reference(image_side):
    """Small widths; every stage pads its windows (stages at 32/16/8/8 tokens for 128 px, 50/25/13/13 for 200),
    or none does (112/56/28/28 for 448: the windows tile every stage exactly)."""
    cfg = {"embed_dims": [8, 16, 24, 32], "depths": [1, 2, 1, 1], "num_heads": [1, 2, 3, 4],
           "window_sizes": [7, 7, 14, 7], "mlp_ratio": 2, "expand": 3, "classes": 5, "out": 16,
           "strides": [2, 2, 1]}
    weights = random_weights(official_encoder_shapes(**cfg), seed=1)
    encoder = TinyViTEncoder(**encoder_kwargs(cfg)).eval()
    encoder.load_state_dict(weights, strict=True)
    x = torch.randn(2, 3, image_side, image_side, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        got, expected = encoder(x), reference_encoder(weights, x, cfg)
    side = -(-image_side // 16)
    assert got.shape == expected.shape == (2, 16, side, side)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def vit_b_state():
    """segment-anything's ViT-B SAM, randomly initialised (seed 4), built once for the module: the fabricated
    MobileSAM file takes its decoder and prompt encoder, and the whole of it is a file the MobileSAM converter
    refuses."""
    torch.manual_seed(4)
    return build_sam(SAM_ARCHITECTURES["vit_b"]).state_dict()


@pytest.fixture(scope="module")
def official_checkpoint(tmp_path_factory, vit_b_state):
    """A fabricated official-format mobile_sam.pt: random values under the authors' key names (the decoder and
    prompt encoder are segment-anything's own modules)."""
    encoder = {f"image_encoder.{k}": v for k, v in random_weights(official_encoder_shapes(**MOBILE), 3).items()}
    decoder = {k: v + 0.01 * torch.randn_like(v) for k, v in vit_b_state.items() if not k.startswith("image_encoder.")}
    path = tmp_path_factory.mktemp("official") / "mobile_sam.pt"
    torch.save({**encoder, **decoder}, path)
    return path, {**encoder, **decoder}


@pytest.mark.parametrize("artifact", ["sam", "mobile-sam"])
def test_official_mobile_sam_converts_loads_and_encodes_identically(official_checkpoint, tmp_path, artifact):
    path, state = official_checkpoint
    if artifact == "mobile-sam":  # through the command line
        from capeval.cli import main

        assert main(["convert", artifact, str(path), "--output", str(tmp_path / "mobile-sam")]) == 0
        out = tmp_path / "mobile-sam"
    else:
        out = convert(artifact, path, tmp_path / "mobile-sam")
    config = json.loads((out / "sam_config.json").read_text())
    assert config["tiny_vit"]["embed_dims"] == MOBILE["embed_dims"]
    assert config["tiny_vit"]["window_sizes"] == MOBILE["window_sizes"]
    assert config["tiny_vit"]["merge_strides"] == MOBILE["strides"]
    assert "MobileSAM" in (out / "README.md").read_text()
    loaded, _ = load_sam(str(out))
    converted = loaded.state_dict()
    assert set(converted) == set(state)
    for key, value in state.items():
        assert torch.equal(converted[key], value), key
    if artifact == "mobile-sam":
        return  # the forward is checked once
    direct = TinyViTEncoder(**encoder_kwargs(MOBILE)).eval()
    direct.load_state_dict({k[len("image_encoder."):]: v for k, v in state.items() if k.startswith("image_encoder.")})
    x = torch.randn(2, 3, 1024, 1024, generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        got = loaded.image_encoder(x)
        expected = direct(x)
    assert got.shape == (2, 256, 64, 64)
    assert torch.equal(got, expected)
    assert got.std() > 0.1


def test_official_file_without_batchnorm_counters_converts(official_checkpoint, tmp_path):
    _, state = official_checkpoint
    slim = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    torch.save(slim, tmp_path / "mobile_sam.pt")
    loaded, _ = load_sam(str(convert("mobile-sam", tmp_path / "mobile_sam.pt", tmp_path / "out")))
    for key, value in slim.items():
        assert torch.equal(loaded.state_dict()[key], value), key


def test_mobile_sam_converter_rejects_other_files(tmp_path, vit_b_state):
    torch.save(vit_b_state, tmp_path / "sam_vit_b.pth")
    with pytest.raises(ValueError, match="not a MobileSAM"):
        convert("mobile-sam", tmp_path / "sam_vit_b.pth", tmp_path / "out")
    torch.save({"image_encoder.neck.0.weight": torch.zeros(256, 320, 1, 1), "image_encoder.patch_embed.seq.0.c.weight":
                torch.zeros(32, 3, 3, 3)}, tmp_path / "partial.pt")
    with pytest.raises(ValueError):
        convert("mobile-sam", tmp_path / "partial.pt", tmp_path / "out2")


@pytest.mark.parametrize("artifact", ["sam", "mobile-sam"])
def test_mobile_sam_converter_refuses_code_execution(tmp_path, artifact):
    class Exploit:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    (tmp_path / "mobile_sam.pt").write_bytes(pickle.dumps({"image_encoder.patch_embed.seq.0.c.weight": Exploit()}))
    with pytest.raises(ConversionError, match="mobile_sam.pt: cannot convert") as refused:
        convert(artifact, tmp_path / "mobile_sam.pt", tmp_path / "out")
    assert isinstance(refused.value.__cause__, pickle.UnpicklingError)  # refused by the weights-only unpickler
    assert not (tmp_path / "pwned").exists()
    assert not (tmp_path / "out").exists()


def test_tiny_mobile_sam_segments_through_the_hub_cache(tiny_hub, segments_each_image_once):
    regions = SegmentEverything("mobile_sam", settings=SETTINGS, device="cpu")
    assert isinstance(regions.generator.predictor.model.image_encoder, TinyViTEncoder)
    by_weight_name = SegmentEverything("mobile-sam", settings=SETTINGS, device="cpu")
    assert regions._namespace == by_weight_name._namespace
    assert '"capeval/mobile-sam@' in regions._namespace.description
    segments_each_image_once(regions)


class TablePhrases:
    def extract(self, captions):
        return [{"two cats sleeping": ["two cats", "cats sleeping"]}.get(c, []) for c in captions]


def test_hice_s_selects_mobile_sam_end_to_end_on_a_real_image(tiny_hub, shared_data):
    from capeval.core.scoring import load_scorer

    image = str(shared_data / "images" / "pacscore" / "image1.jpg")
    settings = {"points_per_side": 4, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0, "max_regions": 4}
    scorer = load_scorer("hice_s", sam="mobile_sam", phrase_parser=TablePhrases(), region_settings=settings,
                         device="cpu")
    assert isinstance(scorer.regions.generator.predictor.model.image_encoder, TinyViTEncoder)
    result = scorer.score(["two cats sleeping"], [image], [["a cat"]], return_report=True)
    for key in ("hice_s", "refhice_s", "global_itc", "local_itc"):
        value = result[f"{key}_per_sample"][0]
        assert np.isfinite(value) and 0 <= value <= 2.5, key
    assert set(result["timings"]) == {"segmentation", "parsing", "encoding", "scoring"}
    # the report's regions are MobileSAM's own masks of the image, segmented independently here
    masks = SegmentEverything("mobile-sam", settings=RegionSettings(**settings), device="cpu").masks(
        Image.open(image))
    report = result["reports"][0]
    expected_areas = [int(m.sum()) for m in masks] or [Image.open(image).width * Image.open(image).height]
    assert [r["area"] for r in report["regions"]] == expected_areas
    assert [p["phrase"] for p in report["phrases"]] == ["two cats", "cats sleeping"]
