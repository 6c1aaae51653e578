"""The VCRScore family: registered weights and their tiny stand-ins, the MCIP converter (a fabricated open_clip
ViT-L-14-336-shaped state dict, scaled down), and feature rows."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from capeval.cli import main
from capeval.core.hub import registered_weights
from capeval.testing import TINY_BUILDERS


def test_registered_weights_and_tiny_layouts(tmp_path):
    weights = registered_weights()
    expected = {"vilt-b32-finetuned-coco": "dandelin/vilt-b32-finetuned-coco",
                "detr-resnet-50": "facebook/detr-resnet-50", "yolos-small": "hustvl/yolos-small",
                "mcip-vit-l-14-336": "capeval/mcip-vit-l-14-336"}
    for name, repo in expected.items():
        spec = weights[name]
        assert spec.repo_id == repo
        TINY_BUILDERS[name](tmp_path / name)
        assert sorted(p.name for p in (tmp_path / name).iterdir()) == sorted(spec.files), name
    # not on the Hub: fetched from the authors' URL and converted by the MCIP converter (`capeval fetch`)
    mcip = weights["mcip-vit-l-14-336"].upstream
    assert mcip.converter == "mcip" and mcip.filename == "MCIP-ViT-L-14-336.pth" and mcip.url.endswith(mcip.filename)
    config = json.loads((tmp_path / "mcip-vit-l-14-336" / "open_clip_config.json").read_text())["model_cfg"]
    assert config["vision_cfg"]["image_size"] == 336 and config["vision_cfg"]["patch_size"] == 14
    detr = json.loads((tmp_path / "detr-resnet-50" / "config.json").read_text())
    assert detr["id2label"]["1"] == "person" and len(detr["id2label"]) == 91


def test_mcip_converter_round_trip(tmp_path):
    """An open_clip CLIP state dict with ViT-L-14-336's geometry (patch 14, 336 px, 77 tokens), saved as a plain
    ``.pth`` like MCIP's, converts with ``weights_only=True`` and encodes exactly as the original model."""
    from open_clip.model import CLIP
    from open_clip.tokenizer import tokenize

    from capeval.backbones.clip import ClipBackbone

    cfg = {"embed_dim": 24, "quick_gelu": True,
           "vision_cfg": {"layers": 1, "width": 64, "patch_size": 14, "image_size": 336},
           "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1}}
    torch.manual_seed(0)
    original = CLIP(**cfg).eval()
    torch.save(original.state_dict(), tmp_path / "MCIP-ViT-L-14-336.pth")
    assert main(["convert", "mcip", str(tmp_path / "MCIP-ViT-L-14-336.pth"), "--output", str(tmp_path / "mcip")]) == 0
    backbone = ClipBackbone(str(tmp_path / "mcip"), device="cpu")
    assert backbone.image_size == 336
    texts = ["a bluebery cake is on a plate", "a plate of food"]
    with torch.no_grad():
        expected = original.encode_text(tokenize(texts))
    torch.testing.assert_close(backbone.encode_texts(texts), expected, atol=1e-5, rtol=1e-5)
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (340, 400, 3), dtype=np.uint8))
    from open_clip.transform import image_transform

    transform = image_transform(336, is_train=False, mean=(0.48145466, 0.4578275, 0.40821073),
                                std=(0.26862954, 0.26130258, 0.27577711))
    with torch.no_grad():
        expected_image = original.encode_image(transform(image).unsqueeze(0))
    torch.testing.assert_close(backbone.encode_images([image]), expected_image, atol=1e-5, rtol=1e-5)


def test_feature_rows_validate_their_length(tmp_path):
    from capeval.vcrscore.regressor import feature_rows, write_feature_rows
    from capeval.vcrscore.regressor import read_feature_rows

    rows = feature_rows([[70.0, 0.44, 0.68], [10, -1, 0]], scores=[0.8, 0.1], extra=[{"id": "a"}, {"id": "b"}])
    assert rows == [{"id": "a", "features": [70.0, 0.44, 0.68], "score": 0.8},
                    {"id": "b", "features": [10.0, -1.0, 0.0], "score": 0.1}]
    assert read_feature_rows(write_feature_rows(tmp_path / "rows.jsonl", rows)) == rows
    with pytest.raises(ValueError, match="expected 3"):
        feature_rows([[1.0, 2.0]])


def _mcip_refusal_cases(tmp_path):
    import pickle

    from sklearn.linear_model import LinearRegression

    from open_clip.model import CLIP

    cases = {}

    def saved(name, obj, **kwargs):
        torch.save(obj, tmp_path / name, **kwargs)
        return (tmp_path / name).read_bytes()

    cfg = {"embed_dim": 8, "vision_cfg": {"layers": 1, "width": 64, "patch_size": 14, "image_size": 28},
           "text_cfg": {"context_length": 77, "vocab_size": 100, "width": 64, "heads": 1, "layers": 1}}
    resnet_like = {k: v for k, v in CLIP(**cfg).state_dict().items() if k != "visual.proj"}
    cases["empty"] = (b"", "not a PyTorch checkpoint: the file is empty")
    cases["not a checkpoint"] = (b"MCIP weights\n", "not a PyTorch checkpoint: neither a torch.save zip archive")
    cases["truncated"] = (saved("t.pth", {"visual.proj": torch.zeros(4, 4)})[:40],
                         "not a readable PyTorch checkpoint: a truncated or corrupt zip archive")
    cases["truncated legacy"] = (saved("g.pth", {"visual.proj": torch.zeros(4, 4)},
                                       _use_new_zipfile_serialization=False)[:60],
                                "not a readable PyTorch checkpoint \\(EOFError: the file ends early\\)")
    cases["list"] = (saved("l.pth", [torch.zeros(2)]), "not a state dict: the checkpoint holds a list")
    cases["tensor"] = (saved("x.pth", torch.zeros(2)), "not a state dict: the checkpoint holds a Tensor")
    cases["other state dict"] = (saved("o.pth", {"encoder.weight": torch.zeros(2)}),
                                 "not an OpenAI/OpenCLIP ViT CLIP state dict: no tensor 'visual.proj'")
    cases["missing keys"] = (saved("m.pth", resnet_like), "no tensor 'visual.proj' among its")
    cases["objects (zip)"] = (saved("z.pth", {"model": LinearRegression()}),
                              "refused it \\(Unsupported global: GLOBAL sklearn.linear_model._base.LinearRegression\\)")
    cases["plain pickle"] = (pickle.dumps({"visual.proj": LinearRegression()}),
                             "torch.load\\(weights_only=True\\) refused it")
    return cases


@pytest.mark.parametrize("case", ["empty", "not a checkpoint", "truncated", "truncated legacy", "list", "tensor",
                                  "other state dict", "missing keys", "objects (zip)", "plain pickle"])
def test_mcip_converter_refusals_are_one_clean_line(tmp_path, capsys, case):
    import re

    data, expected = _mcip_refusal_cases(tmp_path)[case]
    path = tmp_path / "MCIP-ViT-L-14-336.pth"
    path.write_bytes(data)
    capsys.readouterr()
    assert main(["convert", "mcip", str(path), "--output", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"capeval convert: error: {path}: cannot convert to 'mcip': "), lines[0]
    assert re.search(expected, lines[0]), lines[0]
    assert "Traceback" not in captured.err and "will likely succeed" not in lines[0]  # not torch's boilerplate
    assert not (tmp_path / "out").exists()
