"""CLIP backbone on open_clip: loading, the official CLIPScore preprocessing and tokenisation, cached encoding.

Weights are stored as an ``open_clip_config.json`` (``{"model_cfg": ..., "preprocess_cfg": ...}``) plus
``open_clip_model.safetensors`` holding an OpenAI-format state dict (open_clip's CLIP uses the same keys).
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from PIL import Image

from capeval.core.constants import CLIP_CONFIG_FILE as CONFIG_FILE
from capeval.core.constants import CLIP_WEIGHTS_FILE as WEIGHTS_FILE
from capeval.core.constants import OPENAI_MEAN, OPENAI_STD
from capeval.core.errors import InputError
from capeval.core.hub import load_safetensors, registered_weights, resolve
from capeval.core.runtime import (
    EmbeddingCache,
    TruncationCounter,
    encode_cached,
    image_key,
    resolve_device,
    resolve_dtype,
    text_key,
)


def build_clip(model_cfg: Dict) -> torch.nn.Module:
    """An open_clip ``CLIP`` from a config dict (``embed_dim``, ``vision_cfg``, ``text_cfg``, ``quick_gelu``)."""
    from open_clip.model import CLIP

    return CLIP(**model_cfg)


def openai_config_from_state_dict(state_dict: Dict[str, torch.Tensor]) -> Dict:
    """Infer the model config of an OpenAI-format ViT CLIP state dict (OpenAI's own rules: 64-wide heads)."""
    if "visual.proj" not in state_dict:
        raise ValueError("only ViT CLIP checkpoints are supported (no 'visual.proj' key)")
    width = state_dict["visual.conv1.weight"].shape[0]
    patch = state_dict["visual.conv1.weight"].shape[-1]
    grid = round((state_dict["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    text_width = state_dict["ln_final.weight"].shape[0]
    return {
        "embed_dim": int(state_dict["text_projection"].shape[1]),
        "quick_gelu": True,
        "vision_cfg": {
            "layers": _count_blocks(state_dict, "visual.transformer.resblocks."),
            "width": int(width),
            "patch_size": int(patch),
            "image_size": int(patch * grid),
        },
        "text_cfg": {
            "context_length": int(state_dict["positional_embedding"].shape[0]),
            "vocab_size": int(state_dict["token_embedding.weight"].shape[0]),
            "width": int(text_width),
            "heads": int(text_width // 64),
            "layers": _count_blocks(state_dict, "transformer.resblocks."),
        },
    }


def _count_blocks(state_dict, prefix: str) -> int:
    return len({k[len(prefix):].split(".")[0] for k in state_dict if k.startswith(prefix)})


def clean_openai_state_dict(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Drop OpenAI's non-parameter entries and cast to float32 (OpenAI files are partly fp16)."""
    dropped = {"input_resolution", "context_length", "vocab_size"}
    return {k: v.float().contiguous() for k, v in state_dict.items() if k not in dropped}


def save_open_clip(out_dir: Path, state_dict: Dict[str, torch.Tensor], model_cfg: Dict, preprocess_cfg: Dict) -> None:
    """Write our CLIP layout: config JSON + safetensors (loadable by :class:`ClipBackbone`)."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / CONFIG_FILE).write_text(json.dumps({"model_cfg": model_cfg, "preprocess_cfg": preprocess_cfg}, indent=2))
    save_file(clean_openai_state_dict(state_dict), str(out_dir / WEIGHTS_FILE))


def load_open_clip(ref: str, *, cache_dir=None, builder=build_clip) -> Tuple[torch.nn.Module, Dict, Path]:
    """Load weights ``ref`` (registry name, hub id or directory) into the model ``builder(model_cfg)`` makes.

    Returns (model, preprocess_cfg, directory the files were read from).
    """
    directory = resolve(ref, [CONFIG_FILE, WEIGHTS_FILE], cache_dir=cache_dir)
    config = json.loads((directory / CONFIG_FILE).read_text())
    model_cfg = dict(config["model_cfg"])
    if ref in registered_weights():  # e.g. OpenAI weights need QuickGELU, which hub configs do not record
        model_cfg.update(registered_weights()[ref].options.get("model_cfg", {}))
    model = builder(model_cfg)
    state_dict = load_safetensors(directory / WEIGHTS_FILE)
    state_dict = {k: v for k, v in state_dict.items() if k != "attn_mask"}
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    missing = [k for k in missing if not k.endswith("attn_mask")]
    if missing or unexpected:
        raise ValueError(f"weights {ref!r} do not match their config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model.eval(), config.get("preprocess_cfg", {}), directory


# OpenAI's ``clip.tokenize`` (CLIPScore, PAC-S) pre-splits the cleaned text with this pattern: its own special
# tokens first, then the word pattern open_clip shares. open_clip's ``SimpleTokenizer.encode`` puts its own spellings
# ``<start_of_text>`` / ``<end_of_text>`` first instead, so it reads the official literals ``<|startoftext|>`` /
# ``<|endoftext|>`` in a caption as ordinary text and ``<end_of_text>`` as EOT. :func:`clip_text_ids` follows the
# official tokenizer: the official literals are SOT/EOT (found by the same left-to-right scan, so e.g. in
# ``".<|endoftext|>"`` the punctuation run takes ``<|`` and nothing is special, as officially) and open_clip's
# spellings are ordinary text (``_`` splits them, so open_clip's BPE-cache entries for them are never hit).
# Both vocabularies give SOT/EOT the same ids (49406/49407).
OFFICIAL_SOT, OFFICIAL_EOT = "<|startoftext|>", "<|endoftext|>"
_OFFICIAL_PATTERN = r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""


@lru_cache(maxsize=None)
def _official_pattern():
    import regex

    return regex.compile(_OFFICIAL_PATTERN, regex.IGNORECASE)


def clip_text_ids(tokenizer, text: str) -> List[int]:
    """The ids OpenAI's ``clip.tokenize`` gives ``text`` before truncation: SOT, BPE ids, EOT.

    ``tokenizer`` is an open_clip ``SimpleTokenizer`` (its byte-level BPE, merges and vocabulary are OpenAI's);
    cleaning is the official ``whitespace_clean(basic_clean(text)).lower()``, which is also open_clip's default, so
    texts with none of ``<|startoftext|>``, ``<|endoftext|>``, ``<start_of_text>``, ``<end_of_text>`` (any case) get
    exactly the ids of ``[SOT, *tokenizer.encode(text), EOT]``.
    """
    from open_clip.tokenizer import basic_clean, whitespace_clean

    specials = {OFFICIAL_SOT: tokenizer.sot_token_id, OFFICIAL_EOT: tokenizer.eot_token_id}
    ids = [tokenizer.sot_token_id]
    for piece in _official_pattern().findall(whitespace_clean(basic_clean(text)).lower()):
        if piece in specials:  # exact match, as the official BPE cache lookup (a case-folded match stays text)
            ids.append(specials[piece])
            continue
        piece = "".join(tokenizer.byte_encoder[b] for b in piece.encode("utf-8"))
        ids.extend(tokenizer.encoder[bpe_token] for bpe_token in tokenizer.bpe(piece).split(" "))
    ids.append(tokenizer.eot_token_id)
    return ids


class ClipBackbone:
    """A CLIP model with the official CLIPScore preprocessing, 77-token tokenisation and cached encoders.

    Preprocessing follows the official code order: Resize(shorter side, bicubic) → CenterCrop →
    convert to RGB → ToTensor → Normalize. Features are returned *unnormalised* (Polos needs them raw).
    """

    def __init__(self, weights: str, *, device: str = "auto", dtype=None, batch_size: int = 64,
                 cache_dir=None, persist_dir=None, num_workers: Optional[int] = None, loader=load_open_clip):
        from open_clip.tokenizer import SimpleTokenizer

        self.weights = weights
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype)
        self.batch_size = batch_size
        # PIL resizing and hashing release the GIL: threads keep a GPU fed without changing any result
        self._pool = ThreadPoolExecutor(max_workers=num_workers or min(8, os.cpu_count() or 1))
        model, preprocess_cfg, directory = loader(weights, cache_dir=cache_dir)
        self.model = model.to(self.device, self.dtype)
        vision = self.model.visual
        size = vision.image_size
        self.image_size = size[0] if isinstance(size, (tuple, list)) else int(size)
        self.mean = tuple(preprocess_cfg.get("mean", OPENAI_MEAN))
        self.std = tuple(preprocess_cfg.get("std", OPENAI_STD))
        self.context_length = int(self.model.context_length)
        self.tokenizer = SimpleTokenizer()
        self._transform = self._build_transform()
        self.directory = directory.resolve()
        self._namespace = f"{self.directory}|{self.dtype}"  # the snapshot path pins the revision
        self._persist_dir = persist_dir
        self.reset_caches()
        # the same ids tokenize() feeds the model (SOT and EOT included), so counted lengths agree with what is encoded
        self.truncation = TruncationCounter(lambda text: len(self.text_ids(text)), self.context_length, "CLIP")

    def reset_caches(self) -> None:
        """Start from empty in-memory embedding caches (persisted entries stay on disk)."""
        self.image_cache = EmbeddingCache(f"clip-image|{self._namespace}", self._persist_dir)
        self.text_cache = EmbeddingCache(f"clip-text|{self._namespace}", self._persist_dir)

    def _build_transform(self):
        from torchvision import transforms as T

        return T.Compose([
            T.Resize(self.image_size, interpolation=T.InterpolationMode.BICUBIC),
            T.CenterCrop(self.image_size),
            lambda image: image.convert("RGB"),
            T.ToTensor(),
            T.Normalize(self.mean, self.std),
        ])

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        return self._transform(image)

    def text_ids(self, text: str) -> List[int]:
        """A text's official CLIP ids before truncation (SOT and EOT included): see :func:`clip_text_ids`."""
        return clip_text_ids(self.tokenizer, text)

    def tokenize(self, texts: Sequence[str]) -> torch.Tensor:
        """Official CLIP tokenisation (``<|startoftext|>`` / ``<|endoftext|>`` in a text are SOT / EOT, as in OpenAI's
        ``clip.tokenize``); texts over the context length are truncated (EOT kept). Scorers count them per call with
        :attr:`truncation` and warn once."""
        tokens = torch.zeros(len(texts), self.context_length, dtype=torch.long)
        for i, text in enumerate(texts):
            ids = self.text_ids(text)
            if len(ids) > self.context_length:
                ids = ids[: self.context_length]
                ids[-1] = self.tokenizer.eot_token_id
            tokens[i, : len(ids)] = torch.tensor(ids)
        return tokens

    @torch.inference_mode()
    def _encode_image_batch(self, images: List[Image.Image]) -> torch.Tensor:
        pixels = torch.stack(list(self._pool.map(self.preprocess, images))).to(self.device, self.dtype)
        return self.model.encode_image(pixels).float()

    @torch.inference_mode()
    def _encode_text_batch(self, texts: List[str]) -> torch.Tensor:
        return self.model.encode_text(self.tokenize(texts).to(self.device)).float()

    def encode_images(self, images: Sequence[Image.Image], *, show_progress: Optional[bool] = None) -> torch.Tensor:
        """Raw image features (float32, CPU), one row per input; each distinct image is encoded once."""
        keys = list(self._pool.map(image_key, images))
        return encode_cached(images, keys, self._encode_image_batch, self.image_cache,
                             batch_size=self.batch_size, desc="CLIP images", show_progress=show_progress)

    def encode_texts(self, texts: Sequence[str], *, show_progress: Optional[bool] = None) -> torch.Tensor:
        """Raw text features (float32, CPU), one row per input; each distinct text is encoded once."""
        keys = [text_key(text) for text in texts]
        return encode_cached(texts, keys, self._encode_text_batch, self.text_cache,
                             batch_size=self.batch_size, desc="CLIP texts", show_progress=show_progress)


def check_shared_backbone(backbone: "ClipBackbone", weights: str, *, cache_dir=None) -> "ClipBackbone":
    """A borrowed backbone must hold the weights its borrower would load: refuse it otherwise (never score silently
    with other weights)."""
    wanted = resolve(weights, [CONFIG_FILE, WEIGHTS_FILE], cache_dir=cache_dir).resolve()
    if wanted != backbone.directory:
        raise InputError(f"clip_backbone holds {backbone.weights!r} ({backbone.directory}) but these scores need "
                         f"{weights!r} ({wanted})")
    return backbone
