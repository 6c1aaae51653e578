"""Image round-trip score (Huang et al. 2024): render the caption with a text-to-image model and compare the
image features of the original and the rendered image (cosine by default), averaged over the renders."""

from __future__ import annotations

import logging
from typing import Annotated, Optional, Sequence, Tuple, Union

from capeval.backbones.image_features import EXTRACTORS, ImageFeatureExtractor, load_image_features
from capeval.core.caches import DEFAULT_CACHE_BYTES
from capeval.core.inputs import ValidInputs, check_captions
from capeval.core.keys import ScoreKey
from capeval.core.option_types import AtLeast, BatchSize, Bytes, Device, Dtype, OneOf, PathLike
from capeval.core.scoring import Scorer, summarize
from capeval.core.truncation import warn_truncated
from capeval.functional.roundtrip import SIMILARITIES, roundtrip_score
from capeval.image_roundtrip.pipeline import DiffusersGenerator, GeneratedImageCache, TextToImageGenerator, render

logger = logging.getLogger(__name__)


class ImageRoundTripScorer(Scorer):
    """``mean_j sim(f(image), f(G(caption, seed_j)))`` over ``images_per_caption`` generated images.

    ``weights``: the generator's weights name / hub id / diffusers directory (built as :class:`DiffusersGenerator` with
    ``steps``, ``guidance_scale``, ``height``, ``width``, ``generation_dtype``, ``generation_batch_size``) or any
    :class:`~capeval.image_roundtrip.pipeline.TextToImageGenerator`. ``features``: "clip" (default) or "dinov2" with
    ``feature_weights``, or any :class:`~capeval.backbones.image_features.ImageFeatureExtractor`. ``dtype`` applies to the
    feature extractor (float32 by default). Generated images are cached on disk in ``image_cache_dir`` (default
    ``<capeval cache>/roundtrip_images``); ``use_image_cache=False`` keeps no generated image at all (neither on disk
    nor in memory): every call generates its images again. The metric is reference-free: references are refused.

    The result's ``truncated_texts`` counts the captions of the call that the generator's text encoder truncates
    (over 77 CLIP tokens for Stable Diffusion, counted per occurrence with the pipeline's own tokenizer, whether their
    images are generated or come from the cache), with one :class:`~capeval.core.errors.TruncationWarning` per call;
    a plugged-in generator without ``truncated_prompts`` leaves it out.
    """

    name, images, references = "image_roundtrip", "required", "unused"
    # both similarities grow with agreement: "negative_l2" is minus the distance
    key_metadata = {"image_roundtrip": ScoreKey("Image round-trip")}

    def __init__(self, weights: Union[str, TextToImageGenerator] = "sd-turbo", *,
                 features: Union[Annotated[str, OneOf(EXTRACTORS)], ImageFeatureExtractor] = "clip",
                 feature_weights: Optional[str] = None, similarity: Annotated[str, OneOf(SIMILARITIES)] = "cosine",
                 steps: Annotated[int, AtLeast(1)] = 1, guidance_scale: float = 0.0,
                 height: Annotated[int, AtLeast(8)] = 512, width: Annotated[int, AtLeast(8)] = 512,
                 images_per_caption: Annotated[int, AtLeast(1)] = 1, seed: int = 0, device: Device = "auto",
                 dtype: Optional[Dtype] = None, generation_dtype: Optional[Dtype] = None, batch_size: BatchSize = 64,
                 generation_batch_size: BatchSize = 4, cache_dir: Optional[PathLike] = None,
                 persist_dir: Optional[PathLike] = None, cache_bytes: Bytes = DEFAULT_CACHE_BYTES,
                 image_cache_dir: Optional[PathLike] = None, use_image_cache: bool = True):
        if similarity not in SIMILARITIES:
            raise ValueError(f"unknown similarity {similarity!r}; use one of {sorted(SIMILARITIES)}")
        if images_per_caption < 1:
            raise ValueError("images_per_caption must be >= 1")
        self.similarity = similarity
        self.images_per_caption = images_per_caption
        self.seed = seed
        generator = weights
        if isinstance(generator, str):
            generator = DiffusersGenerator(generator, steps=steps, guidance_scale=guidance_scale, height=height,
                                           width=width, device=device, dtype=generation_dtype,
                                           batch_size=generation_batch_size, cache_dir=cache_dir)
        self.generator = generator
        if isinstance(features, str):
            features = load_image_features(features, feature_weights, device=device, dtype=dtype,
                                           batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir,
                                           cache_bytes=cache_bytes)
        self.extractor = features
        self.image_cache = GeneratedImageCache(image_cache_dir) if use_image_cache else None

    def provenance_parts(self) -> Tuple[object, ...]:
        return (self, self.extractor)

    def generated_images(self, predictions: Sequence[str], *, show_progress: Optional[bool] = None):
        """The images generated for each caption (``images_per_caption`` each; from the cache when there)."""
        predictions = check_captions(predictions)
        device = getattr(self.generator, "device", None)
        if getattr(device, "type", None) == "cpu":
            logger.info("generating up to %d images on CPU: slow (the progress bar shows the estimate)",
                        len(predictions) * self.images_per_caption)
        return render(self.generator, predictions, images_per_caption=self.images_per_caption, seed=self.seed,
                      cache=self.image_cache, show_progress=show_progress)

    def truncated_captions(self, predictions: Sequence[str]) -> Optional[int]:
        """How many of ``predictions`` the generator truncates (one TruncationWarning when some are), or None if it
        cannot tell."""
        flags = getattr(self.generator, "truncated_prompts", None)
        if flags is None:
            return None
        truncated = sum(bool(flag) for flag in flags(list(predictions)))
        if truncated:
            limit = getattr(self.generator, "text_token_limit", None)
            warn_truncated([f"{truncated} of {len(predictions)} captions exceed the text-to-image model's "
                            f"{f'{limit} ' if limit else ''}text tokens (their images render only the beginning)"])
        return truncated

    def _score(self, inputs: ValidInputs, *, return_images: bool = False) -> dict:
        """``return_images`` (a per-call option of :meth:`score`) adds the generated images to the result."""
        predictions, originals, n = inputs.predictions, inputs.images, len(inputs)
        truncated = self.truncated_captions(predictions)
        generated = self.generated_images(predictions)
        original_features = self.extractor.encode_images(originals)
        generated_features = self.extractor.encode_images([image for row in generated for image in row])
        generated_features = generated_features.view(n, self.images_per_caption, -1)
        scores = roundtrip_score(original_features, generated_features, self.similarity)
        result = summarize({self.name: scores.tolist()})
        if truncated is not None:
            result["truncated_texts"] = truncated
        if return_images:
            result["generated_images"] = generated
        return result
