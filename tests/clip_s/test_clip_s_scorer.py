"""CLIP-S / RefCLIP-S / PAC-S / RefPAC-S against an independent computation from raw embeddings."""

import json
import random

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError
from capeval.core.hub import resolve
from capeval.core.scoring import load_scorer


def _independent_scores(weights, image_paths, captions, references, w):
    """Re-derive the official numbers with open_clip's own tokenizer and a hand-written preprocessing."""
    import open_clip
    from safetensors.torch import load_file
    from torchvision.transforms import functional as TF

    directory = resolve(weights)
    cfg = json.loads((directory / "open_clip_config.json").read_text())
    model = open_clip.model.CLIP(**cfg["model_cfg"]).eval()
    model.load_state_dict(load_file(str(directory / "open_clip_model.safetensors")), strict=False)
    mean, std = cfg["preprocess_cfg"]["mean"], cfg["preprocess_cfg"]["std"]

    def pixels(path):
        image = Image.open(path)
        image = TF.resize(image, 224, interpolation=TF.InterpolationMode.BICUBIC)
        image = TF.center_crop(image, 224).convert("RGB")
        return TF.normalize(TF.to_tensor(image), mean, std)

    with torch.no_grad():
        img = model.encode_image(torch.stack([pixels(p) for p in image_paths])).numpy()
        cand = model.encode_text(open_clip.tokenize(["A photo depicts " + c for c in captions])).numpy()
        refs = [model.encode_text(open_clip.tokenize(["A photo depicts " + r for r in rs])).numpy() for rs in references]
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    clip_s = w * np.clip((unit(img) * unit(cand)).sum(1), 0, None)
    ref_side = np.array([(unit(r) @ unit(c)).max() for r, c in zip(refs, cand)])
    return clip_s, 2 * clip_s * ref_side / (clip_s + ref_side)


@pytest.mark.parametrize("metric, weights, w", [("clip_s", "openai-clip-vit-b-32", 2.5),
                                                ("pac_s", "pacs-clip-vit-b-32", 2.0)])
def test_scores_on_real_example_images_equal_independent_computation(tiny_hub, shared_data, metric, weights, w):
    folder = shared_data / "images" / "clipscore"
    captions = json.loads((folder / "good_captions.json").read_text())
    names = sorted(captions)
    image_paths = [folder / f"{name}.jpg" for name in names]
    preds = [captions[name] for name in names]
    refs = [["a dog runs across a field", "an animal outdoors"], ["something else entirely"]]
    result = load_scorer(metric, device="cpu").score(preds, [str(p) for p in image_paths], refs)
    expected, expected_ref = _independent_scores(weights, image_paths, preds, refs, w)
    np.testing.assert_allclose(result[f"{metric}_per_sample"], expected, atol=1e-6)
    np.testing.assert_allclose(result[f"ref{metric}_per_sample"], expected_ref, atol=1e-6)
    assert result[metric] == pytest.approx(float(np.mean(expected)), abs=1e-6)


def _workload(n=12):
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (40 + i, 60, 3), dtype=np.uint8)) for i in range(5)]
    preds = [f"caption number {i} about a {['dog', 'cat', 'car'][i % 3]}" for i in range(n)]
    refs = [[f"reference {j} for {i}" for j in range(1 + i % 4)] for i in range(n)]
    return preds, [images[i % 5] for i in range(n)], refs


def test_batch_size_and_order_invariance(tiny_hub):
    preds, images, refs = _workload()
    baseline = None
    for batch_size in (1, 3, 64):
        result = load_scorer("clip_s", device="cpu", batch_size=batch_size).score(preds, images, refs)
        if baseline is None:
            baseline = result
        for key in ("clip_s_per_sample", "refclip_s_per_sample"):
            np.testing.assert_allclose(result[key], baseline[key], atol=1e-5)
    order = list(range(len(preds)))
    random.Random(0).shuffle(order)
    shuffled = load_scorer("clip_s", device="cpu", batch_size=3).score(
        [preds[i] for i in order], [images[i] for i in order], [refs[i] for i in order])
    np.testing.assert_allclose(shuffled["clip_s_per_sample"], [baseline["clip_s_per_sample"][i] for i in order], atol=1e-5)


def test_each_distinct_image_encoded_once(tiny_hub):
    rng = np.random.default_rng(1)
    distinct = [Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(20)]
    # 200 pairs over 20 distinct images; the same pixels arriving as separate objects still count once
    images = [distinct[i % 20].copy() for i in range(200)]
    preds = [f"a caption {i % 50}" for i in range(200)]
    scorer = load_scorer("clip_s", device="cpu", batch_size=16)
    model = scorer.backbone.model
    seen = {"images": 0, "texts": 0}
    original_image, original_text = model.visual.conv1.forward, model.token_embedding.forward

    def count_images(x):  # the patch embedding: the first step of every image forward
        seen["images"] += int((x != 0).flatten(1).any(dim=1).sum())  # real images (forwards are padded with zeros)
        return original_image(x)

    def count_texts(x):  # the token embedding: the first step of every text forward (trimmed or not)
        seen["texts"] += int((x != 0).any(dim=1).sum())  # rows of real texts (forwards are padded with zero rows)
        return original_text(x)

    model.visual.conv1.forward, model.token_embedding.forward = count_images, count_texts
    scorer.score(preds, images)
    assert seen == {"images": 20, "texts": 50 + 1}  # and the "A photo depicts" prompt, once per backbone


def test_long_captions_are_truncated_counted_and_warned(tiny_hub):
    long_caption = "a " + "very " * 100 + "long caption"
    scorer = load_scorer("clip_s", device="cpu")
    with pytest.warns(UserWarning, match="1 of 2 texts exceed 77 CLIP tokens"):
        result = scorer.score([long_caption, "short"], [Image.new("RGB", (8, 8))] * 2)
    assert result["truncated_texts"] == 1


def test_bad_inputs(tiny_hub):
    scorer = load_scorer("clip_s", device="cpu")
    image = Image.new("RGB", (8, 8))
    with pytest.raises(InputError, match="mismatched lengths"):
        scorer.score(["a", "b"], [image])
    with pytest.raises(InputError, match="empty caption"):
        scorer.score([""], [image])
    with pytest.raises(InputError, match="empty reference list"):
        scorer.score(["a"], [image], [[]])
    with pytest.raises(InputError, match="not found"):
        scorer.score(["a"], ["/no/such/file.png"])
