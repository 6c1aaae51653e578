"""``ClipBackbone(preprocess_workers=N)``: the official preprocessing in worker processes gives the same pixels and
features as the default in-process path (which stays the default)."""

import numpy as np
import torch
from PIL import Image

from capeval.backbones.clip import ClipBackbone


def _images():
    rng = np.random.default_rng(0)
    rgb = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in ((48, 64), (300, 200))]
    grey = Image.fromarray(rng.integers(0, 256, (50, 50), dtype=np.uint8))  # "L": converted to RGB after resizing
    rgba = Image.fromarray(rng.integers(0, 256, (40, 90, 4), dtype=np.uint8))
    palette = rgb[0].convert("P")
    return [rgb[0], grey, rgba, rgb[1], palette, rgb[0].copy(), grey.copy()]  # duplicates are encoded once


def test_worker_processes_give_the_official_pixels_and_features(tiny_hub):
    images = _images()
    default = ClipBackbone("openai-clip-vit-b-32", device="cpu", batch_size=2)
    assert default.preprocess_workers == 0
    workers = ClipBackbone("openai-clip-vit-b-32", device="cpu", batch_size=2, preprocess_workers=2)
    batches = list(workers._preprocessed_batches(iter([images[:2], images[2:5], images[5:]])))
    official = [default.preprocess(image) for image in images]
    assert [len(b) for b in batches] == [2, 3, 2]
    assert torch.equal(torch.cat(batches), torch.stack(official))  # bit-identical preprocessing
    expected = default.encode_images(images, show_progress=False)
    np.testing.assert_allclose(workers.encode_images(images, show_progress=False).numpy(), expected.numpy(),
                               atol=1e-6, rtol=0)
    assert len(workers.image_cache) == 5
    with torch.inference_mode():  # independently of both paths: the model on the official pixels
        direct = default.model.encode_image(torch.stack(official)).float()
    np.testing.assert_allclose(expected.numpy(), direct.numpy(), atol=1e-5, rtol=0)
