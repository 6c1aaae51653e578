"""Image feature extractors for the image round-trip metric, each with its own preprocessing.

- ``clip``: the image tower of an open_clip CLIP (:class:`capeval.backbones.clip.ClipBackbone`; its preprocessing:
  Resize(shorter side, bicubic) → CenterCrop → RGB → ToTensor → Normalize).
- ``dinov2``: a transformers DINOv2 model; the CLS token after the final layer norm (``pooler_output``); the
  repository's ``preprocessor_config.json`` (shortest edge 256, bicubic, centre crop 224, ImageNet mean/std).

Every extractor returns raw float32 features on CPU, one row per image, encoding each distinct image once.
"""

from __future__ import annotations

import json
from typing import Callable, Dict, List, Optional, Protocol, Sequence, runtime_checkable

import torch
from PIL import Image

from capeval.backbones.registration import DINOV2_FILES
from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import DEFAULT_CACHE_BYTES, EmbeddingCache, encode_cached, image_keys
from capeval.core.device import resolve_device, resolve_dtype
from capeval.core.hub import resolve

_PIL_RESAMPLE = {0: "NEAREST", 1: "LANCZOS", 2: "BILINEAR", 3: "BICUBIC", 4: "BOX", 5: "HAMMING"}


@runtime_checkable
class ImageFeatureExtractor(Protocol):
    identity: str  # its features' cache namespace (capeval.core.cache_keys): other extractors' never mix

    def encode_images(self, images: Sequence[Image.Image], *, show_progress: Optional[bool] = None) -> torch.Tensor:
        """(n, d) float32 features on CPU."""


class ClipImageFeatures:
    """CLIP image features (unnormalised) of an open_clip CLIP."""

    def __init__(self, weights: str, *, device: str = "auto", dtype=None, batch_size: int = 64, cache_dir=None,
                 persist_dir=None, cache_bytes: int = DEFAULT_CACHE_BYTES):
        from capeval.backbones.clip import ClipBackbone

        self.backbone = ClipBackbone(weights, device=device, dtype=dtype, batch_size=batch_size,
                                     cache_dir=cache_dir, persist_dir=persist_dir, cache_bytes=cache_bytes)
        self.identity = str(self.backbone.image_cache.namespace)

    def encode_images(self, images, *, show_progress=None):
        return self.backbone.encode_images(images, show_progress=show_progress)


class Dinov2ImageFeatures:
    """DINOv2 (transformers ``Dinov2Model``) CLS features after the final layer norm."""

    def __init__(self, weights: str, *, device: str = "auto", dtype=None, batch_size: int = 64, cache_dir=None,
                 persist_dir=None, cache_bytes: int = DEFAULT_CACHE_BYTES):
        from transformers import Dinov2Model

        directory = resolve(weights, DINOV2_FILES, cache_dir=cache_dir)
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self.batch_size = batch_size
        self.model = Dinov2Model.from_pretrained(str(directory), dtype=self.dtype).to(self.device).eval()
        self._transform = _dinov2_transform(json.loads((directory / "preprocessor_config.json").read_text()))
        self.cache = EmbeddingCache(cache_namespace("dinov2-image", directory, dtype=self.dtype), persist_dir,
                                    max_bytes=cache_bytes)
        self.identity = str(self.cache.namespace)

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        return self._transform(image)

    @torch.inference_mode()
    def _encode_batch(self, images: List[Image.Image]) -> torch.Tensor:
        pixels = torch.stack([self.preprocess(image) for image in images]).to(self.device, self.dtype)
        return self.model(pixel_values=pixels).pooler_output.float()

    def encode_images(self, images, *, show_progress=None):
        return encode_cached(images, image_keys(images), self._encode_batch, self.cache,
                             batch_size=self.batch_size, desc="DINOv2 images", show_progress=show_progress)


def _dinov2_transform(config: Dict) -> Callable[[Image.Image], torch.Tensor]:
    """The image processor's steps with torchvision: RGB → Resize(shortest edge) → CenterCrop → [0,1] → Normalize."""
    from torchvision import transforms as T

    resample = getattr(T.InterpolationMode, _PIL_RESAMPLE[int(config.get("resample", 3))])
    size = config.get("size", {"shortest_edge": 256})
    crop = config.get("crop_size", {"height": 224, "width": 224})
    steps = [lambda image: image.convert("RGB")]
    if config.get("do_resize", True):
        steps.append(T.Resize(size["shortest_edge"], interpolation=resample))
    if config.get("do_center_crop", True):
        steps.append(T.CenterCrop((crop["height"], crop["width"])))
    steps.append(T.ToTensor())
    if config.get("do_normalize", True):
        steps.append(T.Normalize(config.get("image_mean", (0.485, 0.456, 0.406)),
                                 config.get("image_std", (0.229, 0.224, 0.225))))
    return T.Compose(steps)


EXTRACTORS = {"clip": ClipImageFeatures, "dinov2": Dinov2ImageFeatures}
DEFAULT_WEIGHTS = {"clip": "laion-clip-vit-g-14", "dinov2": "dinov2-small"}


def load_image_features(kind: str = "clip", weights: Optional[str] = None, **options) -> ImageFeatureExtractor:
    """An extractor of ``kind`` ("clip" or "dinov2") with ``weights`` (registry name, hub id or directory)."""
    if kind not in EXTRACTORS:
        raise ValueError(f"unknown image feature extractor {kind!r}; use one of {sorted(EXTRACTORS)}")
    return EXTRACTORS[kind](weights or DEFAULT_WEIGHTS[kind], **options)
