"""Caption → image generation for the image round-trip metric: the generator interface, a diffusers
text-to-image generator, per-caption seeds and the on-disk cache of generated images.

Any object with ``identity`` (its weights' content), ``settings`` (everything else that changes the pixels),
``batch_size`` and ``generate(prompts, seeds) -> list of PIL images`` is a generator, so an API-backed model
can be plugged in without new dependencies. A generator that truncates long prompts may also offer
``truncated_prompts(prompts) -> list of bool`` and ``text_token_limit`` (:class:`DiffusersGenerator` does), so that
the scorer counts and warns about them. Each image has its own seed, derived from the caption text, the
user seed and the image index, so an image never depends on the batch it was generated in.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
import warnings
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, runtime_checkable

from PIL import Image
from PIL.PngImagePlugin import PngInfo
from tqdm.auto import tqdm

from capeval.core.cache_keys import cache_namespace
from capeval.core.hub import default_cache_dir, resolve
from capeval.core.device import resolve_device
from capeval.image_roundtrip.registration import DIFFUSERS_FILES


@runtime_checkable
class TextToImageGenerator(Protocol):
    """What the round-trip metric needs from a text-to-image model."""

    identity: str  # what the weights are: a model and its revision, or (DiffusersGenerator) a cache namespace
    settings: Mapping[str, Any]  # JSON-serialisable; every option that changes the generated pixels
    batch_size: int

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> List[Image.Image]:
        """One image per prompt, the i-th generated from seed ``seeds[i]`` alone."""


def caption_seed(caption: str, seed: int = 0, index: int = 0) -> int:
    """A 63-bit seed for the ``index``-th image of ``caption``: independent of batch composition and order."""
    digest = hashlib.sha256(f"{seed}\x00{index}\x00{caption}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def _default_generation_dtype(device, dtype):
    import torch

    from capeval.core.device import resolve_dtype

    if dtype in (None, "auto"):
        return torch.float16 if device.type == "cuda" else torch.float32
    return resolve_dtype(dtype)


class DiffusersGenerator:
    """A diffusers text-to-image pipeline (loaded with ``AutoPipelineForText2Image``) by registry name, hub id
    (``org/name[@revision]``) or directory in the diffusers layout.

    ``dtype`` "auto" runs float16 on CUDA and float32 on CPU. Latents are drawn from CPU generators seeded
    per image, so the starting noise is the same on every device.
    """

    def __init__(self, weights: str = "sd-turbo", *, steps: int = 1, guidance_scale: float = 0.0,
                 height: int = 512, width: int = 512, device: str = "auto", dtype=None, batch_size: int = 4,
                 cache_dir=None, files: Sequence[str] = DIFFUSERS_FILES):
        import torch
        from diffusers import AutoPipelineForText2Image

        if steps < 1 or height < 8 or width < 8 or batch_size < 1:
            raise ValueError("steps and batch_size must be >= 1 and height/width >= 8")
        self.device = resolve_device(device)
        self.dtype = _default_generation_dtype(self.device, dtype)
        self.batch_size = batch_size
        directory = resolve(weights, files, cache_dir=cache_dir)
        with warnings.catch_warnings():  # newer diffusers rename torch_dtype to dtype; older ones know only torch_dtype
            warnings.filterwarnings("ignore", message=".*torch_dtype.*")
            self.pipeline = AutoPipelineForText2Image.from_pretrained(str(directory), torch_dtype=self.dtype)
        self.pipeline.to(self.device)
        self.pipeline.set_progress_bar_config(disable=True)
        # the weights' content (a local folder rewritten in place is another generator); settings: the rest
        self.cache_namespace = cache_namespace("text-to-image", directory)
        self.identity = str(self.cache_namespace)
        self.settings = {
            "steps": steps, "guidance_scale": float(guidance_scale), "height": height, "width": width,
            "dtype": str(self.dtype).removeprefix("torch."), "pipeline": type(self.pipeline).__name__,
            "scheduler": type(self.pipeline.scheduler).__name__,
        }
        self.pipeline_calls = 0
        self.images_generated = 0
        self._torch = torch

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> List[Image.Image]:
        generators = [self._torch.Generator("cpu").manual_seed(int(seed)) for seed in seeds]
        with self._torch.inference_mode():
            images = self.pipeline(
                prompt=list(prompts), num_inference_steps=self.settings["steps"],
                guidance_scale=self.settings["guidance_scale"], height=self.settings["height"],
                width=self.settings["width"], generator=generators, output_type="pil",
            ).images
        self.pipeline_calls += 1
        self.images_generated += len(images)
        return images

    def _tokenizers(self) -> list:
        """The pipeline's CLIP tokenizers (``tokenizer``, and SDXL's ``tokenizer_2``), each truncating its prompts to
        its ``model_max_length`` tokens before the text encoder."""
        tokenizers = (getattr(self.pipeline, name, None) for name in ("tokenizer", "tokenizer_2"))
        return [tokenizer for tokenizer in tokenizers if tokenizer is not None]

    @property
    def text_token_limit(self) -> Optional[int]:
        """Tokens (start and end tokens included) the text encoder sees of a prompt: 77 for CLIP."""
        limits = [int(t.model_max_length) for t in self._tokenizers()]
        return min(limits) if limits else None

    def truncated_prompts(self, prompts: Sequence[str]) -> List[bool]:
        """Which prompts the pipeline truncates: longer than a tokenizer's ``model_max_length`` tokens, start and end
        tokens included, counted with the pipeline's own tokenizer(s) as the pipeline tokenizes them."""
        flags = [False] * len(prompts)
        for tokenizer in self._tokenizers():
            limit = int(tokenizer.model_max_length)
            lengths = [len(ids) for ids in tokenizer(list(prompts), verbose=False)["input_ids"]]
            flags = [flag or length > limit for flag, length in zip(flags, lengths)]
        return flags


class GeneratedImageCache:
    """Generated images as PNG files keyed by (generator identity, caption, seed, settings).

    Files are written under a temporary name and renamed, so concurrent writers are safe; the PNG text
    chunks record the caption, seed and generator for inspection.
    """

    def __init__(self, directory: Optional[os.PathLike] = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir() / "roundtrip_images"

    @staticmethod
    def key(identity: str, settings: Mapping[str, Any], caption: str, seed: int) -> str:
        payload = json.dumps({"generator": identity, "settings": dict(settings), "caption": caption, "seed": seed},
                             sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.png"

    def get(self, key: str) -> Optional[Image.Image]:
        path = self.path(key)
        if not path.exists():
            return None
        with Image.open(path) as image:
            image.load()
            return image.copy()

    def put(self, key: str, image: Image.Image, metadata: Mapping[str, Any]) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        info = PngInfo()
        for name, value in metadata.items():
            info.add_text(name, json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value)
        tmp = path.with_suffix(f".{uuid.uuid4().hex}.tmp")
        image.save(tmp, format="PNG", pnginfo=info)
        os.replace(tmp, path)


def render(generator: TextToImageGenerator, captions: Sequence[str], *, images_per_caption: int = 1, seed: int = 0,
           cache: Optional[GeneratedImageCache] = None, show_progress: Optional[bool] = None) -> List[List[Image.Image]]:
    """``images_per_caption`` images per caption, generated once per distinct (caption, image seed) and taken
    from ``cache`` when already there; batched by ``generator.batch_size`` with a progress bar and ETA."""
    if images_per_caption < 1:
        raise ValueError("images_per_caption must be >= 1")
    wanted: List[List[Tuple[str, str, int]]] = []
    for caption in captions:
        row = []
        for index in range(images_per_caption):
            image_seed = caption_seed(caption, seed, index)
            row.append((GeneratedImageCache.key(generator.identity, generator.settings, caption, image_seed),
                        caption, image_seed))
        wanted.append(row)
    found: Dict[str, Image.Image] = {}
    pending: Dict[str, Tuple[str, int]] = {}
    for key, caption, image_seed in (item for row in wanted for item in row):
        if key in found or key in pending:
            continue
        cached = cache.get(key) if cache is not None else None
        if cached is None:
            pending[key] = (caption, image_seed)
        else:
            found[key] = cached
    todo = list(pending.items())
    if show_progress is None:
        show_progress = len(todo) > generator.batch_size
    with tqdm(total=len(todo), desc="generating images", unit="image", disable=not show_progress) as bar:
        for start in range(0, len(todo), generator.batch_size):
            chunk = todo[start:start + generator.batch_size]
            images = generator.generate([caption for _, (caption, _) in chunk], [s for _, (_, s) in chunk])
            if len(images) != len(chunk):
                raise RuntimeError(f"generator returned {len(images)} images for {len(chunk)} prompts")
            for (key, (caption, image_seed)), image in zip(chunk, images):
                if cache is not None:
                    cache.put(key, image, {"caption": caption, "seed": image_seed, "generator": generator.identity,
                                           "settings": dict(generator.settings)})
                found[key] = image
            bar.update(len(chunk))
    return [[found[key] for key, _, _ in row] for row in wanted]
