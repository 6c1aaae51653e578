"""CLIP backbone on open_clip: loading, the official CLIPScore preprocessing and tokenisation, cached encoding.

Weights are stored as an ``open_clip_config.json`` (``{"model_cfg": ..., "preprocess_cfg": ...}``) plus
``open_clip_model.safetensors`` holding an OpenAI-format state dict (open_clip's CLIP uses the same keys).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import warnings
from collections import deque
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from PIL import Image

from capeval.backbones.clip_pooled import (
    POOLED,
    ForwardFallbackWarning,
    encode_image_pooled,
    encode_text_pooled,
    forward_paths,
    forwards_tag,
    project_text,
    prompt_states,
    text_prunable,
)
from capeval.backbones.text_encoder import TextEncoder
from capeval.core import shapes
from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import DEFAULT_CACHE_BYTES, CacheNamespace, EmbeddingCache, encode_cached, image_keys
from capeval.core.constants import CLIP_CONFIG_FILE as CONFIG_FILE
from capeval.core.constants import CLIP_WEIGHTS_FILE as WEIGHTS_FILE
from capeval.core.constants import CLIPSCORE_PREFIX, OPENAI_MEAN, OPENAI_STD
from capeval.core.device import resolve_device, resolve_dtype
from capeval.core.errors import InputError, ModelNotAvailableError
from capeval.core.hub import hub_snapshot_of, load_safetensors, registered_spec_of, resolve
from capeval.core.scoring import check_precision
from capeval.core.shapes import image_rows, in_fixed_rows, in_text_shapes, text_width


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


@lru_cache(maxsize=1)
def _open_clip_hub_activations() -> Dict[str, bool]:
    """``repo id → quick_gelu`` of every hub repository open_clip's pretrained table names (its own record of which
    weights were trained with QuickGELU)."""
    import open_clip

    activations = {}
    for model_name, tag in open_clip.list_pretrained():
        pretrained = open_clip.get_pretrained_cfg(model_name, tag)
        repo_id = pretrained.get("hf_hub", "").strip("/")
        if repo_id.count("/") == 1:
            model_cfg = open_clip.get_model_config(model_name) or {}
            activations[repo_id] = bool(pretrained.get("quick_gelu") or model_cfg.get("quick_gelu"))
    return activations


def _known_architecture(ref: str, directory: Path) -> Tuple[Dict, str]:
    """(model_cfg settings known for the weights ``ref`` whatever its spelling, where they are known from): the
    registry's for a registered weight, open_clip's pretrained table for a hub repository it names."""
    spec = registered_spec_of(ref, directory)
    if spec is not None and spec.options.get("model_cfg"):
        return dict(spec.options["model_cfg"]), f"registered weight {spec.name!r}"
    snapshot = hub_snapshot_of(directory)
    repo_id = snapshot[0] if snapshot is not None else (None if Path(ref).expanduser().is_dir() else ref.split("@")[0])
    activation = _open_clip_hub_activations().get(repo_id)
    if activation is not None:
        return {"quick_gelu": activation}, f"open_clip's pretrained table ({repo_id})"
    return {}, ""


def settled_model_cfg(ref: str, directory: Path, model_cfg: Dict) -> Dict:
    """``model_cfg`` (read from the weights' ``open_clip_config.json``) with the activation settled the same way for
    every spelling of the same weights (registry name, hub id with or without revision, cache or local folder).

    Hub configs of OpenAI weights do not record ``quick_gelu`` (open_clip's default, GELU, is wrong for them): the
    registry or open_clip's pretrained table says it. A config that contradicts them, or weights whose activation
    nothing records, are refused rather than guessed."""
    known, source = _known_architecture(ref, directory)
    conflicts = {key: (model_cfg[key], value) for key, value in known.items()
                 if key in model_cfg and model_cfg[key] != value}
    if conflicts:
        raise ModelNotAvailableError(
            f"weights {ref!r}: {directory / CONFIG_FILE} says "
            f"{ {key: ours for key, (ours, _) in conflicts.items()} } but {source} says "
            f"{ {key: theirs for key, (_, theirs) in conflicts.items()} }: refusing to guess which model they are")
    settled = {**model_cfg, **known}
    if "quick_gelu" not in settled:
        raise ModelNotAvailableError(
            f"weights {ref!r}: cannot tell whether they use QuickGELU or GELU: model_cfg in {directory / CONFIG_FILE} "
            f"has no \"quick_gelu\" and they are neither a registered weight (`capeval weights`) nor a hub repository "
            f"in open_clip's pretrained table. Add \"quick_gelu\": true (OpenAI-trained CLIP) or false to model_cfg")
    return settled


def load_open_clip(ref: str, *, cache_dir=None, builder=build_clip) -> Tuple[torch.nn.Module, Dict, Path]:
    """Load weights ``ref`` (registry name, hub id or directory) into the model ``builder(model_cfg)`` makes.

    Returns (model, preprocess_cfg, directory the files were read from).
    """
    directory = resolve(ref, [CONFIG_FILE, WEIGHTS_FILE], cache_dir=cache_dir)
    config = json.loads((directory / CONFIG_FILE).read_text())
    model = builder(settled_model_cfg(ref, directory, config["model_cfg"]))
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


def encode_text_trimmed(model: torch.nn.Module, tokens: torch.Tensor,
                        prompt: Optional[Sequence[torch.Tensor]] = None) -> torch.Tensor:
    """open_clip ``CLIP.encode_text`` on ``tokens`` of any width up to the context length.

    Under CLIP's causal mask a position sees only the positions before it, and the feature is read at the end-of-text
    token, so the padding after the longest text's EOT cannot change any feature: the positional embedding and the
    mask are cut to the width of ``tokens`` (equal to the full 77-token forward up to float rounding), and the work the
    feature cannot see is skipped (:mod:`capeval.backbones.clip_pooled`; ``prompt``: the
    :func:`~capeval.backbones.clip_pooled.prompt_states` of the ids every row begins with). Models without a causal
    mask or pooled at a fixed position get the full width.
    """
    width = tokens.shape[1]
    if model.attn_mask is None or model.text_pool_type not in ("argmax", "eos"):
        if width < model.context_length:
            tokens = torch.nn.functional.pad(tokens, (0, model.context_length - width))
        return model.encode_text(tokens)
    if text_prunable(model):
        return encode_text_pooled(model, tokens, prompt)
    if prompt is not None:
        raise ValueError("prompt states need a text tower of plain batch-first blocks")
    from open_clip.transformer import text_global_pool

    cast_dtype = model.transformer.get_cast_dtype()
    x = model.token_embedding(tokens).to(cast_dtype) + model.positional_embedding[:width].to(cast_dtype)
    x = model.ln_final(model.transformer(x, attn_mask=model.attn_mask[:width, :width]))
    return project_text(model, text_global_pool(x, tokens, model.text_pool_type,
                                                eos_token_id=getattr(model, "text_eos_id", None)))


OPENAI_FP16 = "openai-fp16"
PRECISIONS = ("uniform", OPENAI_FP16)


def to_openai_fp16(model: torch.nn.Module) -> torch.nn.Module:
    """Give an open_clip ViT CLIP (in place) the numerics of OpenAI's ``clip.load`` on CUDA: conv, linear and attention
    weights and the two projections in fp16 (``convert_weights``), every LayerNorm computed in fp32 and cast back
    (OpenAI's ``LayerNorm``), activations fp16, and attention in OpenAI's sequence-first layout (so
    ``nn.MultiheadAttention`` takes the same ``multi_head_attention_forward`` path, not the batch-first fast path).
    Embeddings and LayerNorm weights stay fp32, as OpenAI's."""
    from open_clip.model import convert_weights_to_lp
    from open_clip.transformer import LayerNorm, LayerNormFp32, Transformer

    reason = openai_fp16_reason(model)
    if reason is not None:
        raise ValueError(f"precision={OPENAI_FP16!r} cannot emulate OpenAI's fp16 numerics: {reason}")
    convert_weights_to_lp(model, torch.float16)
    for module in model.modules():
        if type(module) is LayerNorm:  # same parameters; forward casts the input to fp32 and the output back
            module.__class__ = LayerNormFp32
        elif isinstance(module, (Transformer, torch.nn.MultiheadAttention)):
            module.batch_first = False
    return model


def openai_fp16_reason(model: torch.nn.Module) -> Optional[str]:
    """Why :func:`to_openai_fp16` cannot give ``model`` OpenAI's numerics (None when it can): it needs open_clip's
    ``Transformer`` stacks with a ``batch_first`` switch and every attention an ``nn.MultiheadAttention``."""
    from open_clip.transformer import Transformer

    stacks = [module for module in model.modules() if isinstance(module, Transformer)]
    if not stacks or not all(hasattr(stack, "batch_first") for stack in stacks):
        return "open_clip's Transformer has no batch_first switch"
    for stack in stacks:
        for index, block in enumerate(stack.resblocks):
            if not isinstance(getattr(block, "attn", None), torch.nn.MultiheadAttention):
                return f"block {index}'s attention is not torch.nn.MultiheadAttention"
    return None


def to_rgb(image: Image.Image) -> Image.Image:
    """The official ``convert("RGB")`` step (a module function, so the transform pickles into worker processes)."""
    return image.convert("RGB")


_worker_transform: Optional[Callable] = None


def _start_worker(transform: Callable) -> None:
    global _worker_transform
    _worker_transform = transform
    torch.set_num_threads(1)  # one core per worker process


def _preprocess_in_worker(images: List[Image.Image]) -> torch.Tensor:
    """Resize, crop and RGB conversion of each image: uint8 (N, H, W, 3), a quarter of the float pixels to ship back
    (:meth:`ClipBackbone.normalise` finishes the official transform in the consumer)."""
    return torch.stack([torch.from_numpy(np.array(_worker_transform(image))) for image in images])


class ClipBackbone(TextEncoder):
    """A CLIP model with the official CLIPScore preprocessing, 77-token tokenisation and cached encoders (texts: a
    :class:`~capeval.backbones.text_encoder.TextEncoder`).

    Preprocessing follows the official code order: Resize(shorter side, bicubic) → CenterCrop →
    convert to RGB → ToTensor → Normalize. Features are returned *unnormalised* (Polos needs them raw).

    ``precision``: ``"uniform"`` (the whole model in ``dtype``, float32 by default) or ``"openai-fp16"`` (OpenAI's CUDA
    model, :func:`to_openai_fp16`, texts always 77 tokens wide; features are fp16 values returned as float32).

    ``num_workers``: threads for preprocessing and hashing in this process (default). ``preprocess_workers`` > 0:
    the same official preprocessing runs in that many worker processes (not capped by the GIL), a few batches ahead
    of the model; on CUDA each batch is pinned and copied on a side stream while the previous batch is encoded.
    """

    encoder_name, keep_padding = "CLIP", False  # texts are trimmed after their end-of-text token

    def __init__(self, weights: str, *, device: str = "auto", dtype=None, precision: str = "uniform",
                 batch_size: int = 64, cache_dir=None, persist_dir=None, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 num_workers: Optional[int] = None, preprocess_workers: int = 0, loader=load_open_clip):
        from open_clip.tokenizer import SimpleTokenizer

        check_precision(precision, dtype, metric="ClipBackbone", choices=PRECISIONS)
        self.weights = weights
        self.precision = precision
        self.device = resolve_device(device)
        self.dtype = torch.float16 if precision == OPENAI_FP16 else resolve_dtype(dtype)
        self.batch_size = batch_size
        # PIL resizing and hashing release the GIL: threads keep a GPU fed without changing any result
        self._pool = ThreadPoolExecutor(max_workers=num_workers or min(8, os.cpu_count() or 1))
        if preprocess_workers < 0:
            raise ValueError(f"preprocess_workers must be ≥ 0, not {preprocess_workers}")
        self.preprocess_workers = preprocess_workers
        self._processes: Optional[ProcessPoolExecutor] = None  # started on first use
        model, preprocess_cfg, directory = loader(weights, cache_dir=cache_dir)
        # precision="openai-fp16": OpenAI's mixed fp16 model (see to_openai_fp16), on any device
        model = model.to(self.device)
        self.model = to_openai_fp16(model) if precision == OPENAI_FP16 else model.to(self.dtype)
        vision = self.model.visual
        size = vision.image_size
        self.image_size = size[0] if isinstance(size, (tuple, list)) else int(size)
        grid = getattr(vision, "grid_size", None)  # ViTs: patches + the class token per image
        self.image_rows = image_rows(self.device, None if grid is None else int(np.prod(grid)) + 1)
        self.mean = tuple(preprocess_cfg.get("mean", OPENAI_MEAN))
        self.std = tuple(preprocess_cfg.get("std", OPENAI_STD))
        self.context_length = self.token_limit = int(self.model.context_length)
        self.tokenizer = SimpleTokenizer()
        self._transform = self._build_transform()
        self.directory = directory.resolve()
        self.forward_paths = forward_paths(self.model)  # the forward each tower runs (in the provenance)
        if precision == "uniform":  # (OpenAI's fp16 mode runs open_clip's sequence-first forward by design)
            self._warn_fallbacks()
        # features are keyed by the weights' content and all that changes them (capeval.core.cache_keys), the code
        # of the forwards included (clip_pooled.forwards_tag)
        self._numerics = {"dtype": self.dtype, "precision": precision, "forwards": forwards_tag(self._forward_code()),
                          "image_size": self.image_size, "mean": self.mean, "std": self.std,
                          "context_length": self.context_length}
        self._namespaces: Dict[Tuple[str, str], CacheNamespace] = {}
        self._persist_dir, self._cache_bytes = persist_dir, cache_bytes
        self.reset_caches()
        # texts that begin with the CLIP-S prompt run after its states, computed once (clip_pooled.prompt_states)
        pooled_at_eot = (self.model.text_pool_type == "argmax"
                         or getattr(self.model, "text_eos_id", None) == self.tokenizer.eot_token_id)
        self._prompt_ids = (tuple(self.text_ids(CLIPSCORE_PREFIX)[:-1])  # SOT and the prompt's words
                            if precision == "uniform" and text_prunable(self.model) and pooled_at_eot else None)
        self._prompt_states: Optional[List[torch.Tensor]] = None

    def reset_caches(self) -> None:
        """Start from empty in-memory embedding caches (persisted entries stay on disk)."""
        self.image_cache = self.feature_cache("clip-image")
        self.text_cache = self.feature_cache("clip-text")

    def _warn_fallbacks(self) -> None:
        """One :class:`ForwardFallbackWarning` per tower that cannot run the pooled forward, naming why."""
        import open_clip

        for tower, path in self.forward_paths.items():
            if path != POOLED:
                warnings.warn(f"CLIP weights {self.weights!r}: the {tower} features come from open_clip's own forward, "
                              f"not capeval's pooled one ({path.split(': ', 1)[1]}): the same features up to "
                              f"rounding, computed more slowly (the pooled forwards are tested with open_clip_torch "
                              f"3.1-3.3; installed: {open_clip.__version__})", ForwardFallbackWarning, stacklevel=3)

    def _forward_code(self) -> tuple:
        """The code besides :mod:`~capeval.backbones.clip_pooled`'s that determines this backbone's features (for
        :func:`~capeval.backbones.clip_pooled.forwards_tag`), looked up now: a replaced function counts."""
        module = sys.modules[__name__]
        return (*(getattr(module, name) for name in FORWARD_FUNCTIONS),
                *(getattr(shapes, name) for name in shapes.FIXED_SHAPE_CODE),
                *(getattr(type(self), name) for name in FORWARD_METHODS))

    def provenance_extras(self) -> Dict[str, Dict[str, str]]:
        """The forward each tower ran (``pooled`` or open_clip's, with the reason) and the forwards' code tag."""
        return {"clip_forwards": {**self.forward_paths, "tag": self._numerics["forwards"]}}

    def feature_cache(self, kind: str, **numerics) -> EmbeddingCache:
        """An empty in-memory cache of this backbone's ``kind`` features under ``numerics`` besides the backbone's
        own, keyed by the weights' content as they were loaded (persisted entries are found again)."""
        key = (kind, repr(sorted(numerics.items())))
        if key not in self._namespaces:
            self._namespaces[key] = cache_namespace(kind, self.directory, **self._numerics, **numerics)
        return EmbeddingCache(self._namespaces[key], self._persist_dir, max_bytes=self._cache_bytes)

    def _build_transform(self):
        from torchvision import transforms as T

        return T.Compose([*self._geometry().transforms, T.ToTensor(), T.Normalize(self.mean, self.std)])

    def _geometry(self):
        """The official transform's PIL steps (the part worker processes run)."""
        from torchvision import transforms as T

        return T.Compose([T.Resize(self.image_size, interpolation=T.InterpolationMode.BICUBIC),
                          T.CenterCrop(self.image_size), to_rgb])

    def normalise(self, pixels: torch.Tensor) -> torch.Tensor:
        """``ToTensor`` then ``Normalize`` on a uint8 (N, H, W, 3) batch: the same element-wise operations in the same
        layout, so the result is bit-identical to the official transform image by image. The divisor is a tensor on
        the pixels' device: CUDA turns division by a CPU scalar into multiplication by its reciprocal."""
        def constant(values):
            return torch.as_tensor(values, dtype=torch.float32, device=pixels.device)

        pixels = pixels.permute(0, 3, 1, 2).contiguous().to(torch.float32).div(constant(255.0))
        return pixels.sub_(constant(self.mean)[None, :, None, None]).div_(constant(self.std)[None, :, None, None])

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        return self._transform(image)

    def text_ids(self, text: str) -> List[int]:
        """A text's official CLIP ids before truncation (SOT and EOT included): see :func:`clip_text_ids`. The same ids
        :meth:`tokenize` feeds the model, so counted lengths agree with what is encoded."""
        return clip_text_ids(self.tokenizer, text)

    def token_ids(self, texts: Sequence[str]) -> List[List[int]]:
        return [self._token_ids(text) for text in texts]

    def tokenize(self, texts: Sequence[str]) -> torch.Tensor:
        """Official CLIP tokenisation (``<|startoftext|>`` / ``<|endoftext|>`` in a text are SOT / EOT, as in OpenAI's
        ``clip.tokenize``), 77 tokens wide; texts over the context length are truncated (EOT kept). Scorers count them
        per call with :attr:`truncation` and warn once."""
        return self._token_tensor(self.token_ids(texts), self.context_length)

    def _token_ids(self, text: str) -> List[int]:
        """The ids the text encoder runs on for ``text``: :meth:`text_ids`, truncated to the context length."""
        ids = self.text_ids(text)
        if len(ids) > self.context_length:
            del ids[self.context_length:]
            ids[-1] = self.tokenizer.eot_token_id
        return ids

    @staticmethod
    def _token_tensor(ids: Sequence[List[int]], width: int) -> torch.Tensor:
        """``ids`` as a ``len(ids)`` × ``width`` tensor, zero-padded."""
        tokens = torch.zeros(len(ids), width, dtype=torch.long)
        for i, row in enumerate(ids):
            tokens[i, : len(row)] = torch.tensor(row)
        return tokens

    def prompted(self, ids: Sequence[int]) -> bool:
        """Whether token ``ids`` begin with the shared prompt's (and go on): such a text runs after the prompt's states.
        """
        prompt = self._prompt_ids
        return prompt is not None and len(ids) > len(prompt) and tuple(ids[:len(prompt)]) == prompt

    def _text_order(self, text: str) -> Tuple[bool, int]:
        """The batching key: prompted texts apart, then by length."""
        ids = self._token_ids(text)
        return self.prompted(ids), len(ids)

    def _text_group(self, order: Tuple[bool, int]) -> Tuple[bool, int]:
        """Texts that may share a forward: prompted or not, and the width."""
        prompted, length = order
        return prompted, self.forward_width(length)

    def forward_width(self, length: int) -> int:
        """The width a text of ``length`` tokens is encoded at: trimmed (:func:`~capeval.core.shapes.text_width`, at
        most the context length), or the context length in OpenAI's fp16 mode, whose model always runs 77 wide."""
        return text_width(length, self.context_length) if self.precision == "uniform" else self.context_length

    @torch.inference_mode()
    def _encode_image_batch(self, images: List[Image.Image]) -> torch.Tensor:
        return self._encode_pixels(torch.stack(list(self._pool.map(self.preprocess, images))))

    @torch.inference_mode()
    def _encode_pixels(self, pixels: torch.Tensor) -> torch.Tensor:
        """Image features in forwards of a fixed number of images (:func:`in_fixed_rows`): bitwise batch-independent."""
        return in_fixed_rows(lambda chunk: encode_image_pooled(self.model, chunk.to(self.device, self.dtype)).float(),
                             pixels, rows=self.image_rows)

    def _preprocessed_batches(self, batches: Iterator[List[Image.Image]]) -> Iterator[torch.Tensor]:
        """Pixel batches preprocessed in the worker processes (each batch split across them), up to two batches per
        worker ahead of the consumer; on CUDA pinned and copied on a side stream one batch ahead."""
        if self._processes is None:
            self._processes = ProcessPoolExecutor(self.preprocess_workers, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=_start_worker, initargs=(self._geometry(),))
        workers, submitted = self.preprocess_workers, deque()

        def submit() -> None:
            batch = next(batches, None)
            if batch is not None:
                step = -(-len(batch) // workers)
                submitted.append([self._processes.submit(_preprocess_in_worker, batch[i:i + step])
                                  for i in range(0, len(batch), step)])

        for _ in range(2 * workers):
            submit()
        copy_stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        staged = None
        while submitted:
            pixels = torch.cat([future.result() for future in submitted.popleft()])  # uint8
            submit()
            if copy_stream is None:
                yield self.normalise(pixels)
                continue
            with torch.cuda.stream(copy_stream):  # uint8 crosses the bus; normalised on the device
                on_device = pixels.pin_memory().to(self.device, non_blocking=True)
            current = (on_device, copy_stream.record_event())
            if staged is not None:
                yield self.normalise(self._after_copy(*staged))
            staged = current
        if staged is not None:
            yield self.normalise(self._after_copy(*staged))

    def _after_copy(self, pixels: torch.Tensor, copied) -> torch.Tensor:
        stream = torch.cuda.current_stream(self.device)
        stream.wait_event(copied)
        pixels.record_stream(stream)
        return pixels

    @torch.inference_mode()
    def _encode_text_batch(self, texts: List[str]) -> torch.Tensor:
        """:meth:`TextEncoder._encode_text_batch <capeval.backbones.text_encoder.TextEncoder._encode_text_batch>`,
        with the texts that begin with the prompt run after its states, in forwards of their own."""
        ids = self.token_ids(texts)
        prompted = [self.prompted(row) for row in ids]
        features = None
        for kind in (False, True):
            members = [i for i, flag in enumerate(prompted) if flag is kind]
            if not members:
                continue
            prompt = self._prompt() if kind else None
            encoded = in_text_shapes(lambda tokens, mask: self._encode_tokens(tokens, mask, prompt),
                                     [ids[i] for i in members], width_of=self.forward_width, device=self.device)
            if features is None:
                features = encoded.new_empty(len(ids), encoded.shape[1])
            features[members] = encoded
        return features

    def _prompt(self) -> List[torch.Tensor]:
        if self._prompt_states is None:
            self._prompt_states = prompt_states(self.model, self._prompt_ids)
        return self._prompt_states

    def _encode_tokens(self, tokens: torch.Tensor, attention_mask: torch.Tensor,
                       prompt: Optional[List[torch.Tensor]] = None) -> torch.Tensor:
        """Features of zero-padded ``tokens`` (the mask is implied: padding follows the end-of-text token, which the
        causal mask keeps from every feature), after the ``prompt``'s states when given."""
        if self.device.type == "cuda":
            tokens = tokens.pin_memory()
        return encode_text_trimmed(self.model, tokens.to(self.device, non_blocking=True), prompt).float()

    def encode_images(self, images: Sequence[Image.Image], *, show_progress: Optional[bool] = None) -> torch.Tensor:
        """Raw image features (float32, CPU), one row per input; each distinct image is encoded once."""
        workers = self.preprocess_workers > 0  # preprocessed ahead in worker processes, or in threads per batch
        return encode_cached(images, image_keys(images, self._pool.map),
                             self._encode_pixels if workers else self._encode_image_batch, self.image_cache,
                             batch_size=self.batch_size, desc="CLIP images", show_progress=show_progress,
                             prepare=self._preprocessed_batches if workers else None)


# clip.py's functions and ClipBackbone's methods whose code determines a feature (tokens, widths, rows, precision)
FORWARD_FUNCTIONS = ("clip_text_ids", "encode_text_trimmed", "to_openai_fp16", "_OFFICIAL_PATTERN")
FORWARD_METHODS = ("text_ids", "token_ids", "_token_ids", "prompted", "forward_width", "normalise", "_encode_pixels",
                   "_encode_image_batch", "_encode_text_batch", "_encode_tokens")


def check_shared_backbone(backbone: "ClipBackbone", weights: Optional[str], *, cache_dir=None,
                          precision: Optional[str] = None, preprocess_workers: int = 0) -> "ClipBackbone":
    """A borrowed backbone must hold the weights (unless ``weights`` is None) and the ``precision`` (when given) its
    borrower would load, and run the ``preprocess_workers`` asked for (when not 0): refuse it otherwise (never score
    silently with other weights or numerics, never ignore an option)."""
    if preprocess_workers and preprocess_workers != backbone.preprocess_workers:
        raise InputError(f"preprocess_workers={preprocess_workers} but clip_backbone runs "
                         f"preprocess_workers={backbone.preprocess_workers}: set it on the backbone")
    wanted = None if weights is None else resolve(weights, [CONFIG_FILE, WEIGHTS_FILE], cache_dir=cache_dir).resolve()
    if wanted is not None and wanted != backbone.directory:
        raise InputError(f"clip_backbone holds {backbone.weights!r} ({backbone.directory}) but these scores need "
                         f"{weights!r} ({wanted})")
    if precision is not None and precision != backbone.precision:
        raise InputError(f"clip_backbone runs with precision={backbone.precision!r} but these scores need "
                         f"precision={precision!r}")
    return backbone
