"""Alpha-CLIP (Sun et al. 2024): a CLIP ViT whose patch embedding also sees a region mask.

The visual tower gains ``conv1_alpha = Conv2d(1, width, kernel=patch, stride=patch, bias=False)``; its output is
added to the RGB patch embedding. The text tower is the unchanged OpenAI CLIP one. Weights use our CLIP layout
(``open_clip_config.json`` + ``open_clip_model.safetensors``) with the extra key ``visual.conv1_alpha.weight``.

Preprocessing is the official one: the image gets CLIP's Resize → CenterCrop → RGB → ToTensor → Normalize, the
mask (uint8 0/255) gets ToTensor → Resize((n, n)) (stretched, bilinear, no antialiasing) → Normalize(0.5, 0.26); the whole image is the
all-ones mask. For non-square images the stretched mask and the centre-cropped image do not cover the same
pixels; ``mask_alignment="crop"`` gives the mask the image's resize and crop instead (a documented deviation).
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from PIL import Image

from capeval.backbones.clip import ClipBackbone, build_clip, load_open_clip
from capeval.backbones.clip_pooled import encode_image_pooled
from capeval.core.caches import encode_cached, image_key
from capeval.core.shapes import in_fixed_rows

ALPHA_KEY = "visual.conv1_alpha.weight"
MASK_MEAN, MASK_STD = 0.5, 0.26
MASK_ALIGNMENTS = ("official", "crop")


def add_alpha_channel(model: torch.nn.Module) -> torch.nn.Module:
    """Give an open_clip ViT CLIP the Alpha-CLIP ``conv1_alpha`` (zero-initialised) in place and return it.

    The alpha embedding is added by a forward hook on ``visual.conv1``, so open_clip's own visual forward runs
    unchanged; the alpha batch for a call is set with :func:`set_alpha`.
    """
    visual = model.visual
    conv = visual.conv1
    visual.conv1_alpha = torch.nn.Conv2d(1, conv.out_channels, kernel_size=conv.kernel_size, stride=conv.stride,
                                         bias=False)
    torch.nn.init.zeros_(visual.conv1_alpha.weight)
    visual._alpha = None

    def add_alpha(module, inputs, output):
        if visual._alpha is None:
            raise RuntimeError("Alpha-CLIP image encoding needs an alpha mask (use AlphaClip.encode_image)")
        return output + visual.conv1_alpha(visual._alpha.to(output.dtype))

    conv.register_forward_hook(add_alpha)
    return model


def encode_image_with_alpha(model: torch.nn.Module, pixels: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Image features of ``pixels`` [B,3,H,W] seen through the normalised masks ``alpha`` [B,1,H,W]."""
    model.visual._alpha = alpha
    try:
        return encode_image_pooled(model, pixels)
    finally:
        model.visual._alpha = None


def load_alpha_clip(ref: str, *, cache_dir=None):
    """(model with its alpha channel, preprocess_cfg, directory) of Alpha-CLIP weights ``ref``."""
    try:
        return load_open_clip(ref, cache_dir=cache_dir, builder=build_alpha_clip)
    except ValueError as exc:
        if ALPHA_KEY in str(exc):
            raise ValueError(f"{ref!r} holds a plain CLIP, not Alpha-CLIP weights (no {ALPHA_KEY}); "
                             f"convert an official Alpha-CLIP visual checkpoint with `capeval convert alpha-clip`") from exc
        raise


def build_alpha_clip(model_cfg) -> torch.nn.Module:
    """A randomly initialised Alpha-CLIP of an open_clip config (zero alpha kernel)."""
    return add_alpha_channel(build_clip(model_cfg))


class AlphaClip(ClipBackbone):
    """:class:`capeval.backbones.clip.ClipBackbone` whose image encoder takes (image, mask) pairs.

    ``encode_regions(image, masks)`` encodes every mask of one image in batches; ``encode_images`` uses the
    all-ones mask (the whole image). Encodings are cached by image content and mask content.
    """

    def __init__(self, weights: str, *, mask_alignment: str = "official", **options):
        if mask_alignment not in MASK_ALIGNMENTS:
            raise ValueError(f"mask_alignment must be one of {MASK_ALIGNMENTS}, not {mask_alignment!r}")
        if options.get("preprocess_workers"):
            raise ValueError("preprocess_workers is not supported by Alpha-CLIP (image and mask are encoded together)")
        self.mask_alignment = mask_alignment
        super().__init__(weights, loader=load_alpha_clip, **options)

    def _forward_code(self) -> tuple:
        """The CLIP forwards' code, the alpha channel's and the masks' preprocessing (see ClipBackbone)."""
        return (*super()._forward_code(), add_alpha_channel, encode_image_with_alpha, type(self).preprocess_mask,
                type(self)._encode_masked_batch, MASK_MEAN, MASK_STD)

    def reset_caches(self) -> None:
        super().reset_caches()
        self.region_cache = self.feature_cache("alpha-clip-region", mask_alignment=self.mask_alignment)

    def preprocess_mask(self, mask: np.ndarray, image_size: Tuple[int, int]) -> torch.Tensor:
        """A boolean [H, W] mask → the normalised [1, n, n] alpha tensor."""
        from torchvision import transforms as T

        mask = np.asarray(mask)
        if mask.shape != (image_size[1], image_size[0]):
            raise ValueError(f"mask shape {mask.shape} does not match the image ({image_size[1]}, {image_size[0]})")
        alpha = T.ToTensor()((mask.astype(bool) * 255).astype(np.uint8))
        # bilinear without antialiasing, pinned: the tensor Resize of the torchvision Alpha-CLIP ran with did not
        # antialias; torchvision >= 0.17 would by default (region features move by ~1.6e-4)
        if self.mask_alignment == "official":
            alpha = T.Resize((self.image_size, self.image_size), antialias=False)(alpha)
        else:
            alpha = T.CenterCrop(self.image_size)(T.Resize(self.image_size, antialias=False)(alpha))
        return T.Normalize(MASK_MEAN, MASK_STD)(alpha)

    @torch.inference_mode()
    def _encode_masked_batch(self, items: List[Tuple[torch.Tensor, np.ndarray, Tuple[int, int]]]) -> torch.Tensor:
        pixels = torch.stack([pixel for pixel, _, _ in items]).to(self.device, self.dtype)
        alpha = torch.stack([self.preprocess_mask(mask, size) for _, mask, size in items]).to(self.device, self.dtype)
        return in_fixed_rows(lambda p, a: encode_image_with_alpha(self.model, p, a).float(), pixels, alpha,
                             rows=self.image_rows)  # bitwise batch-independent

    def _encode_image_batch(self, images: List[Image.Image]) -> torch.Tensor:
        pixels = list(self._pool.map(self.preprocess, images))
        return self._encode_masked_batch([(p, np.ones((im.height, im.width), bool), im.size)
                                          for p, im in zip(pixels, images)])

    def encode_regions(self, image: Image.Image, masks: Sequence[np.ndarray], *,
                       show_progress: Optional[bool] = False) -> torch.Tensor:
        """Raw features of ``image`` seen through each boolean mask (one row per mask)."""
        if not len(masks):
            return torch.zeros(0, self.model.visual.output_dim)
        base = image_key(image)
        keys = [f"{base}|{mask_key(mask)}" for mask in masks]
        pixels = self.preprocess(image)
        items = [(pixels, mask, image.size) for mask in masks]
        return encode_cached(items, keys, self._encode_masked_batch, self.region_cache,
                             batch_size=self.batch_size, desc="Alpha-CLIP regions", show_progress=show_progress)


def mask_key(mask: np.ndarray) -> str:
    """Content key of a boolean mask (shape + packed bits)."""
    import hashlib

    mask = np.asarray(mask, dtype=bool)
    digest = hashlib.sha1(np.packbits(mask).tobytes())
    digest.update(str(mask.shape).encode())
    return digest.hexdigest()
