"""BLIP2Score (as used by EnsembEval): BLIP-2 ITC head, max over the 32 query outputs of the raw cosine.

Preprocessing follows LAVIS (the official BLIP-2 code used by EnsembEval): image → RGB → Resize((224, 224),
bicubic) → ToTensor → Normalize(OpenAI mean/std); caption → LAVIS ``blip_caption`` cleaning (lower case,
``.!"()*#:;~`` → space, collapsed spaces, 50 words) → BERT tokens, truncated to 32 (counted, warned).
"""

from __future__ import annotations

import re
from typing import List, Optional, Sequence, Tuple

import torch

from capeval.backbones.text_encoder import TokenizerTextEncoder
from capeval.blip2.lavis_precision import lavis_image_embeds
from capeval.blip2.registration import BLIP2_FILES
from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import DEFAULT_CACHE_BYTES, EmbeddingCache, encode_cached, image_keys
from capeval.core.constants import OPENAI_MEAN, OPENAI_STD
from capeval.core.device import resolve_device, resolve_dtype
from capeval.core.errors import InputError
from capeval.core.hub import resolve
from capeval.core.inputs import ValidInputs
from capeval.core.keys import ScoreKey
from capeval.core.option_types import BatchSize, Bytes, Device, Dtype, PathLike, Precision
from capeval.core.scoring import Scorer, check_precision, summarize
from capeval.core.shapes import shapes_tag
from capeval.core.truncation import warn_truncated
from capeval.functional.blip2 import blip2_itc_score

MAX_TEXT_TOKENS = 32  # LAVIS Blip2ITM max_txt_len
MAX_CAPTION_WORDS = 50  # LAVIS blip_caption max_words


def lavis_clean_caption(caption: str, max_words: int = MAX_CAPTION_WORDS) -> str:
    """LAVIS ``BlipCaptionProcessor.pre_caption`` (the "eval" text processor of BLIP-2)."""
    caption = re.sub(r"([.!\"()*#:;~])", " ", caption.lower())
    caption = re.sub(r"\s{2,}", " ", caption)
    caption = caption.rstrip("\n").strip(" ")
    words = caption.split(" ")
    return " ".join(words[:max_words]) if len(words) > max_words else caption


class Blip2Backbone(TokenizerTextEncoder):
    """BLIP-2 ITC encoders with LAVIS preprocessing; each distinct image/text is encoded once (cached; texts: a
    :class:`~capeval.backbones.text_encoder.TextEncoder` reading :func:`lavis_clean_caption` ed captions).

    ``encode_images`` returns ``vision_proj`` of the 32 Q-Former query outputs ``(n, 32, d)``;
    ``encode_texts`` returns ``text_proj`` of the [CLS] output ``(n, d)`` (both unnormalised, float32, CPU).
    """

    encoder_name, token_limit = "BLIP-2", MAX_TEXT_TOKENS

    def __init__(self, weights: str = "blip2-itm-vit-g", *, device: str = "auto", dtype=None,
                 precision: Optional[str] = None, batch_size: int = 32, cache_dir=None, persist_dir=None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES):
        from transformers import AutoTokenizer, Blip2ForImageTextRetrieval

        check_precision(precision, dtype, metric="blip2_score")
        self.precision = precision  # "official": LAVIS's fp16-autocast EVA ViT (lavis_image_embeds), fp32 Q-Former
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self.batch_size = batch_size
        directory = resolve(weights, list(BLIP2_FILES), cache_dir=cache_dir)
        self.model = Blip2ForImageTextRetrieval.from_pretrained(str(directory), dtype=self.dtype).to(self.device).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(str(directory))
        self.pad_id = self.tokenizer.pad_token_id
        size = self.model.config.vision_config.image_size
        self.image_size = (size, size) if isinstance(size, int) else tuple(size)
        self._transform = self._build_transform()
        numerics = {"dtype": self.dtype, "precision": precision, "image_size": self.image_size,
                    "max_tokens": MAX_TEXT_TOKENS, "shapes": shapes_tag(self.device.type)}
        self.image_cache = EmbeddingCache(cache_namespace("blip2-itc-image", directory, **numerics), persist_dir,
                                          max_bytes=cache_bytes)
        self.text_cache = EmbeddingCache(cache_namespace("blip2-itc-text", directory, **numerics), persist_dir,
                                         max_bytes=cache_bytes)

    def _build_transform(self):
        from torchvision import transforms as T

        return T.Compose([
            lambda image: image.convert("RGB"),
            T.Resize(self.image_size, interpolation=T.InterpolationMode.BICUBIC),
            T.ToTensor(),
            T.Normalize(OPENAI_MEAN, OPENAI_STD)  # LAVIS's BLIP processor uses OpenAI's,
        ])

    def clean(self, text: str) -> str:
        return lavis_clean_caption(text)

    @torch.inference_mode()
    def _encode_image_batch(self, images: List) -> torch.Tensor:
        model = self.model
        pixels = torch.stack([self._transform(image) for image in images]).to(self.device, model.vision_model.dtype)
        if self.precision == "official":
            image_embeds = lavis_image_embeds(model.vision_model, pixels)
        else:
            image_embeds = model.vision_model(pixel_values=pixels)[0].to(model.query_tokens.dtype)
        attention = torch.ones(image_embeds.shape[:-1], dtype=torch.long, device=self.device)
        queries = model.qformer(query_embeds=model.query_tokens.expand(image_embeds.shape[0], -1, -1),
                                encoder_hidden_states=image_embeds, encoder_attention_mask=attention)[0]
        return model.vision_projection(queries.to(model.vision_projection.weight.dtype)).float()

    def _encode_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``text_proj`` of the Q-Former's [CLS] output."""
        model = self.model
        embeddings = model.embeddings(input_ids=input_ids.to(self.device))
        hidden = model.qformer(query_embeds=embeddings, query_length=0,
                               attention_mask=attention_mask.to(self.device))[0]
        return model.text_projection(hidden[:, 0, :].to(model.text_projection.weight.dtype)).float().cpu()

    def encode_images(self, images: Sequence, *, show_progress: Optional[bool] = None) -> torch.Tensor:
        return encode_cached(images, image_keys(images), self._encode_image_batch,
                             self.image_cache, batch_size=self.batch_size, desc="BLIP-2 images",
                             show_progress=show_progress)


class Blip2Scorer(Scorer):
    """``max_q cos(vision_proj(query_q(image)), text_proj(CLS(caption)))`` (reference-free: references are refused)."""

    name, images, references = "blip2_score", "required", "unused"
    key_metadata = {"blip2_score": ScoreKey("BLIP2Score")}

    def __init__(self, weights: str = "blip2-itm-vit-g", *, device: Device = "auto", dtype: Optional[Dtype] = None,
                 precision: Precision = None, batch_size: BatchSize = 32, cache_dir: Optional[PathLike] = None,
                 persist_dir: Optional[PathLike] = None, cache_bytes: Bytes = DEFAULT_CACHE_BYTES,
                 backbone: Optional[Blip2Backbone] = None):
        if backbone is not None and backbone.precision != precision:
            raise InputError(f"backbone runs with precision={backbone.precision!r} but these scores need "
                             f"precision={precision!r}")
        self.backbone = backbone or Blip2Backbone(weights, device=device, dtype=dtype, precision=precision,
                                                  batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir,
                                                  cache_bytes=cache_bytes)

    def provenance_parts(self) -> Tuple[object, ...]:
        return (self, self.backbone)

    def _score(self, inputs: ValidInputs) -> dict:
        predictions, pil_images = inputs.predictions, inputs.images
        scores = blip2_itc_score(self.backbone.encode_images(pil_images), self.backbone.encode_texts(predictions))
        result = summarize({"blip2_score": scores.tolist()})
        result["truncated_texts"] = truncated = self.backbone.truncation.count(predictions)
        distinct = self.backbone.truncation.count(list(dict.fromkeys(predictions)))
        warn_truncated([f"{distinct} distinct caption(s) exceed {MAX_TEXT_TOKENS} BLIP-2 tokens ({truncated} of "
                        f"{len(predictions)} captions)" if truncated else ""])
        return result
