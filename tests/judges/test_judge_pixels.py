"""The pixels the judge's vision tower receives are those of LLaVA's ``process_images`` with
``image_aspect_ratio="pad"`` (the official FLEUR scripts): the image centred on a square of the mean colour, then
the CLIP image processor of LLaVA's transformers 4.31 (PIL bicubic resize of the shortest edge, centre crop,
rescale, normalise in float32). Checked on the tiny random LLaVA through the real loader and scorer."""

import numpy as np
import torch
from PIL import Image

from capeval import load_scorer
from capeval.core.constants import OPENAI_MEAN, OPENAI_STD

SIDE = 28  # the tiny judge's image processor: shortest edge 28, crop 28x28


def official_pixels(image: Image.Image) -> torch.Tensor:
    """LLaVA's expand2square + transformers 4.31 ``CLIPImageProcessor.preprocess``, transcribed independently."""
    width, height = image.size
    side = max(width, height)
    square = Image.new("RGB", (side, side), tuple(int(m * 255) for m in OPENAI_MEAN))
    square.paste(image, ((side - width) // 2, (side - height) // 2))
    resized = square.resize((SIDE, SIDE), resample=Image.BICUBIC)  # a square: shortest edge = both edges
    scaled = (np.asarray(resized) * (1 / 255)).astype(np.float32)
    mean, std = np.array(OPENAI_MEAN, dtype=np.float32), np.array(OPENAI_STD, dtype=np.float32)
    return torch.from_numpy(((scaled - mean) / std).transpose(2, 0, 1).copy())


def test_the_vision_tower_sees_the_official_pixels(tiny_hub):
    rng = np.random.default_rng(3)
    images = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in ((45, 30), (31, 52))]
    scorer = load_scorer("fleur", device="cpu", max_new_tokens=2)
    seen = []

    def record(module, args, kwargs):
        seen.append((args[0] if args else kwargs["pixel_values"]).detach().clone())

    scorer.judge.model.model.vision_tower.register_forward_pre_hook(record, with_kwargs=True)
    scorer.score(["a photo", "a picture"], images=images)
    pixels = seen[0]
    assert pixels.shape == (2, 3, SIDE, SIDE) and pixels.dtype == torch.float32
    for row, image in zip(pixels, images):
        expected = official_pixels(image)
        assert torch.allclose(row, expected, atol=1e-6, rtol=0), float((row - expected).abs().max())
