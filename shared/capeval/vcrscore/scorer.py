"""VCRScore (Ruiz et al. 2024): three features per caption → the official gradient-boosted regressor.

1. word precision of the caption against a pool of the references and the names of the objects two detectors
   find in the image (DETR ``facebook/detr-resnet-50`` at 0.9; a YOLO-family detector at 0.6);
2. the raw image–text retrieval logit of ViLT ``dandelin/vilt-b32-finetuned-coco`` (text ≤ 39 tokens);
3. MCIP RefCLIP-S (OpenCLIP ViT-L-14-336 with MCIP weights, no text prefix, reference side clipped at 0).

Official image handling for ViLT and DETR: an image with a side under 333 px is first resized to 500×500 (PIL's
default filter) and converted to RGB, then given to the model's own processor. Models run in batches of images
that share the processed size (padding would change DETR/YOLOS/ViLT outputs), so results do not depend on the
batch size or the order; each distinct image is detected once and each distinct (image, caption) pair is scored
by ViLT once.

Extreme aspect ratios: the processors' aspect-preserving resizes floor each side to a multiple of a unit (ViLT 32,
YOLOS 16; DETR rounds to whole pixels), so a long thin image (e.g. 10000×400 for ViLT, 10000×20 for YOLOS-S) gets a
side of 0 pixels and the official preprocessing fails. Such a side is kept at one unit instead (the smallest size
the model takes; the other side is the processor's own), resized with the processor's filter: every image the
official preprocessing handles is processed exactly as before, and the others score instead of crashing.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from PIL import Image

from capeval.backbones.clip import ClipBackbone
from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import DEFAULT_CACHE_BYTES, ENTRY_OVERHEAD, EmbeddingCache, LruCache, image_keys, text_key
from capeval.core.device import resolve_device, resolve_dtype
from capeval.core.errors import ModelNotAvailableError
from capeval.core.hub import registered_weights, resolve
from capeval.core.inputs import ValidInputs
from capeval.core.keys import ScoreKey
from capeval.core.option_types import AtLeast, BatchSize, Between, Bytes, Device, Dtype, OneOf, PathLike
from capeval.core.scoring import Scorer, summarize
from capeval.core.truncation import TruncationCounter, warn_truncated
from capeval.functional.vcrscore import limit_references, mcip_refclip_s, word_pool, word_precision
from capeval.vcrscore.constants import COCO_TO_DARKNET, DETECTOR_FILES, VILT_FILES

SMALL_SIDE = 333
SMALL_RESIZE = (500, 500)
VILT_MAX_TEXT_TOKENS = 39
DETR_THRESHOLD = 0.9
YOLO_THRESHOLD = 0.6
LABEL_NAMES = ("darknet", "coco")
VILT_PATCH_SEED = 0
MAX_LONGER_EDGE, MAX_SHORTER_EDGE = 1333, 800  # ViLT's MinMaxResize: longer side at most 1333/800 × shorter


def official_small_image_resize(image: Image.Image) -> Image.Image:
    """ViLT/DETR input as in the official code: a side < 333 px → ``resize((500, 500))`` with PIL's default filter
    (bicubic; nearest for modes "1"/"P"); then RGB (the official code converts only resized images)."""
    if image.width < SMALL_SIDE or image.height < SMALL_SIDE:
        image = image.resize(SMALL_RESIZE)
    return image if image.mode == "RGB" else image.convert("RGB")


def vilt_resize_size(height: int, width: int, shorter: int, size_divisor: int = 32) -> Tuple[int, int]:
    """``(height, width)`` of ViLT's resize (the official ``MinMaxResize``, as transformers' ViLT processor): shorter
    side ``shorter``, longer side at most ``int(1333 / 800 * shorter)``, rounded, then floored to a multiple of
    ``size_divisor`` (0 for a side that ends up under one ``size_divisor``)."""
    longer = int(MAX_LONGER_EDGE / MAX_SHORTER_EDGE * shorter)
    scale = shorter / min(height, width)
    if height < width:
        new_height, new_width = shorter, scale * width
    else:
        new_height, new_width = scale * height, shorter
    if max(new_height, new_width) > longer:
        scale = longer / max(new_height, new_width)
        new_height, new_width = scale * new_height, scale * new_width
    new_height, new_width = int(new_height + 0.5), int(new_width + 0.5)
    return new_height // size_divisor * size_divisor, new_width // size_divisor * size_divisor


def detection_resize_size(height: int, width: int, shortest: int, longest: int,
                          mod: Optional[int] = None) -> Tuple[int, int]:
    """``(height, width)`` of the DETR-family aspect-preserving resize (shorter side ``shortest``, longer side at most
    ``longest``; transformers' DETR processors), with YOLOS's flooring of both sides to a multiple of ``mod`` (16)."""
    size, raw = shortest, None
    short_side, long_side = float(min(height, width)), float(max(height, width))
    if long_side / short_side * size > longest:
        raw = longest * short_side / long_side
        size = int(round(raw))
    scaled = size if raw is None else raw
    keep = (height <= width and height == size) or (width <= height and width == size)
    if keep and (mod is None or width >= height):  # DETR tests "unchanged" first, YOLOS after "portrait"
        out_height, out_width = height, width
    elif width < height:
        out_height, out_width = int(scaled * height / width), size
    else:
        out_height, out_width = size, int(scaled * width / height)
    if mod:
        out_height, out_width = out_height - out_height % mod, out_width - out_width % mod
    return out_height, out_width


def _size_field(processor, key: str):
    size = getattr(processor, "size", None)
    return size.get(key) if isinstance(size, dict) else getattr(size, key, None)


def process_image(processor, image: Image.Image, target: Optional[Tuple[int, int]], unit: int) -> torch.Tensor:
    """The processor's pixel values of ``image``, whose resize the processor computes as ``target`` (height, width).
    Where that has a side of 0 (an extreme aspect ratio the official preprocessing cannot take), the image is
    resized by us to that size with such a side set to ``unit`` (the processor's filter, as the processor would at
    that size) and the processor is told not to resize; otherwise the processor runs unchanged."""
    if target is None or min(target) > 0:
        return processor(images=[image], return_tensors="pt")["pixel_values"][0]
    height, width = (max(side, unit) for side in target)
    resized = image.resize((width, height), resample=processor.resample)
    return processor(images=[resized], do_resize=False, return_tensors="pt")["pixel_values"][0]


def load_pil_image_processor(directory):
    """The model's own image processor with the PIL backend (the numerics of the processors the official code
    used; transformers 5 defaults to a torchvision backend that resizes differently)."""
    import transformers
    from transformers import AutoImageProcessor

    if int(transformers.__version__.split(".")[0]) >= 5:
        return AutoImageProcessor.from_pretrained(str(directory), backend="pil")
    return AutoImageProcessor.from_pretrained(str(directory), use_fast=False)


def _weights_dir(ref: str, default_files: Sequence[str], cache_dir=None):
    """A registry name (its pinned files), a local directory, or a hub id in the repo layout of ``default_files``
    (``model.safetensors`` tried before ``pytorch_model.bin``)."""
    weights = registered_weights()
    if ref in weights:
        return resolve(ref, list(weights[ref].files), cache_dir=cache_dir)
    if Path(ref).expanduser().is_dir():
        return resolve(ref, ["config.json"], cache_dir=cache_dir)
    safetensors = ["model.safetensors" if f == "pytorch_model.bin" else f for f in default_files]
    try:
        return resolve(ref, safetensors, cache_dir=cache_dir)
    except ModelNotAvailableError:
        return resolve(ref, list(default_files), cache_dir=cache_dir)


def _groups_by_shape(keys: Sequence[str], pixels: Dict[str, torch.Tensor], batch_size: int):
    """Chunks of ``keys`` whose pixel tensors share one shape (stackable without padding), in first-seen order."""
    groups: Dict[tuple, List[str]] = defaultdict(list)
    for key in keys:
        groups[tuple(pixels[key].shape)].append(key)
    for members in groups.values():
        for start in range(0, len(members), batch_size):
            yield members[start:start + batch_size]


class ObjectDetector:
    """A transformers object detector (DETR, YOLOS, ...) returning the label names it finds above ``threshold``.

    ``label_names``: ``{model label: name}`` renames (e.g. COCO → Darknet spelling); ``small_image_resize``: apply
    the official small-image rule before the processor (the official DETR did; its YOLOv3 did not).
    """

    def __init__(self, weights: str, *, threshold: float, label_names: Optional[Dict[str, str]] = None,
                 small_image_resize: bool = True, device: str = "auto", dtype=None, batch_size: int = 8,
                 cache_dir=None, num_workers: Optional[int] = None, cache_bytes: int = DEFAULT_CACHE_BYTES):
        import inspect

        from transformers import AutoModelForObjectDetection

        self.weights, self.threshold = weights, float(threshold)
        self.label_names = dict(label_names or {})
        self.small_image_resize = small_image_resize
        self.device, self.dtype, self.batch_size = resolve_device(device), resolve_dtype(dtype), batch_size
        self.directory = _weights_dir(weights, DETECTOR_FILES, cache_dir)
        self.model = AutoModelForObjectDetection.from_pretrained(str(self.directory)).to(self.device, self.dtype).eval()
        self.processor = load_pil_image_processor(self.directory)
        self.id2label = {int(k): v for k, v in self.model.config.id2label.items()}
        self._takes_mask = "pixel_mask" in inspect.signature(self.model.forward).parameters
        self._mod = 16 if getattr(self.model.config, "model_type", None) == "yolos" else None
        self._pool = ThreadPoolExecutor(max_workers=num_workers or 4)
        self.namespace = cache_namespace("detections", self.directory, dtype=self.dtype, threshold=self.threshold,
                                         label_names=self.label_names, small_image_resize=small_image_resize)
        # (namespace, image key) -> detected names
        self.cache: LruCache[List[str]] = LruCache(200_000, max_bytes=cache_bytes, sizeof=_names_nbytes)

    def resize_target(self, image: Image.Image) -> Optional[Tuple[int, int]]:
        """``(height, width)`` the processor resizes ``image`` to, where it is a DETR-family shortest/longest-edge
        resize (YOLOS floors to multiples of 16); ``None`` for other processors (fixed sizes take any image)."""
        shortest, longest = _size_field(self.processor, "shortest_edge"), _size_field(self.processor, "longest_edge")
        if not shortest or not longest:
            return None
        return detection_resize_size(image.height, image.width, shortest, longest, mod=self._mod)

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        image = official_small_image_resize(image) if self.small_image_resize else image.convert("RGB")
        return process_image(self.processor, image, self.resize_target(image), self._mod or 1)

    @torch.inference_mode()
    def _detect_batch(self, pixels: torch.Tensor) -> List[List[str]]:
        inputs = {"pixel_values": pixels.to(self.device, self.dtype)}
        if self._takes_mask:
            inputs["pixel_mask"] = torch.ones((pixels.shape[0], *pixels.shape[-2:]), dtype=torch.long,
                                              device=self.device)
        outputs = self.model(**inputs)
        outputs.logits = outputs.logits.float()
        results = self.processor.post_process_object_detection(outputs, threshold=self.threshold)
        names = []
        for result in results:
            labels = [self.id2label[int(i)] for i in result["labels"].tolist()]
            names.append([self.label_names.get(label, label) for label in labels])
        return names

    def detect(self, images: Sequence[Image.Image], keys: Optional[Sequence[str]] = None) -> List[List[str]]:
        """Names of the objects found in each image (each distinct image is run once, then cached)."""
        keys = list(keys) if keys is not None else image_keys(images)
        found: Dict[str, List[str]] = {}
        first = {}
        for key, image in zip(keys, images):
            if key in found or key in first:
                continue
            cached = self.cache.get((self.namespace, key))
            if cached is not None:
                found[key] = cached
            else:
                first[key] = image
        if first:
            todo = list(first)
            pixels = dict(zip(todo, self._pool.map(self.preprocess, [first[k] for k in todo])))
            for chunk in _groups_by_shape(todo, pixels, self.batch_size):
                for key, names in zip(chunk, self._detect_batch(torch.stack([pixels[k] for k in chunk]))):
                    found[key] = names
                    self.cache.put((self.namespace, key), names)
        return [list(found[key]) for key in keys]


def _names_nbytes(names: List[str]) -> int:
    """Memory of a cached list of detected names, its entry included."""
    return ENTRY_OVERHEAD + sys.getsizeof(names) + sum(sys.getsizeof(name) for name in names)


def _seeded(function, seed: int, *args, **kwargs):
    """``function(*args, **kwargs)`` with the global CPU generator at ``seed``; the caller's RNG state is restored."""
    with torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        return function(*args, **kwargs)


def seed_vilt_patch_selection(model, seed: int = VILT_PATCH_SEED) -> None:
    """Make ViLT's patch selection deterministic, per image, without touching the caller's RNG state.

    transformers' ``ViltEmbeddings.visual_embed`` picks the image patches with ``torch.multinomial`` on the global
    CPU generator: with ``max_image_length`` -1 (the retrieval checkpoints) it keeps every patch in a random order,
    which changes nothing but float rounding; with a positive ``max_image_length`` under the number of patches it
    keeps a random subset (ViLT's training-time sampling, which the official evaluation ran unseeded). Here each
    image's selection is the one ``visual_embed`` draws for that image alone right after ``torch.manual_seed(seed)``
    (CPU generator only, inside ``torch.random.fork_rng``, so the caller's global state is untouched afterwards):
    bitwise reproducible across loads and processes, and the same image gets the same patches whatever its batch.
    (While a forward runs, the global CPU generator is seeded: another thread drawing from it at that moment would
    see that state.) Batches whose pixel masks pad some images are selected as one call under the seed.
    """
    embeddings = getattr(getattr(model, "vilt", None), "embeddings", None)
    original = getattr(embeddings, "visual_embed", None)
    if original is None:
        return

    def visual_embed(pixel_values, pixel_mask, *args, **kwargs):
        if pixel_values.shape[0] == 1 or not bool(pixel_mask.all()):
            return _seeded(original, seed, pixel_values, pixel_mask, *args, **kwargs)
        parts = [_seeded(original, seed, pixel_values[i:i + 1], pixel_mask[i:i + 1], *args, **kwargs)
                 for i in range(pixel_values.shape[0])]
        return (torch.cat([x for x, _, _ in parts]), torch.cat([mask for _, mask, _ in parts]),
                (torch.cat([index for _, _, (index, _) in parts]), parts[0][2][1]))

    embeddings.visual_embed = visual_embed


class ViltRetrieval:
    """ViLT image–text retrieval: the raw logit of ``ViltForImageAndTextRetrieval`` for (image, text) pairs.

    Text: BERT tokens truncated to 39 (as the official code; :attr:`truncation` counts the longer texts, each
    distinct text measured once, for the scorer's per-call count and warning). Images: the official small-image
    rule, then the PIL ViLT processor (shorter side 384, multiple of 32, mean = std = 0.5; a side the official
    resize floors to 0 is kept at 32). Patch selection: see :func:`seed_vilt_patch_selection`.
    """

    def __init__(self, weights: str = "vilt-b32-finetuned-coco", *, device: str = "auto", dtype=None,
                 batch_size: int = 32, cache_dir=None, persist_dir=None, num_workers: Optional[int] = None,
                 cache_bytes: int = DEFAULT_CACHE_BYTES):
        from transformers import AutoTokenizer, ViltForImageAndTextRetrieval

        self.device, self.dtype, self.batch_size = resolve_device(device), resolve_dtype(dtype), batch_size
        self.directory = _weights_dir(weights, VILT_FILES, cache_dir)
        self.model = ViltForImageAndTextRetrieval.from_pretrained(str(self.directory)).to(self.device, self.dtype)
        self.model.eval()
        seed_vilt_patch_selection(self.model)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.directory))
        self.processor = load_pil_image_processor(self.directory)
        self._pool = ThreadPoolExecutor(max_workers=num_workers or 4)
        self.cache = EmbeddingCache(cache_namespace("vilt-itr", self.directory, dtype=self.dtype,
                                                    max_tokens=VILT_MAX_TEXT_TOKENS, patch_seed=VILT_PATCH_SEED),
                                    persist_dir, max_bytes=cache_bytes)
        self.truncation = TruncationCounter(lambda text: len(self.tokenizer(text, verbose=False)["input_ids"]),
                                            VILT_MAX_TEXT_TOKENS, "ViLT")  # [CLS] and [SEP] included

    def preprocess(self, image: Image.Image) -> torch.Tensor:
        image = official_small_image_resize(image)
        divisor = getattr(self.processor, "size_divisor", None) or 32
        shorter = _size_field(self.processor, "shortest_edge")
        target = vilt_resize_size(image.height, image.width, shorter, divisor) if shorter else None
        return process_image(self.processor, image, target, divisor)

    def tokenize(self, texts: Sequence[str]) -> List[List[int]]:
        """Token ids, truncated to 39 ([SEP] kept), as officially. Scorers count the texts over the limit per call
        with :attr:`truncation` and warn once."""
        return self.tokenizer(list(texts), max_length=VILT_MAX_TEXT_TOKENS, truncation=True)["input_ids"]

    @torch.inference_mode()
    def _score_batch(self, pixels: torch.Tensor, token_ids: List[List[int]]) -> torch.Tensor:
        length = max(len(ids) for ids in token_ids)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.tensor([ids + [pad] * (length - len(ids)) for ids in token_ids], device=self.device)
        attention = torch.tensor([[1] * len(ids) + [0] * (length - len(ids)) for ids in token_ids], device=self.device)
        mask = torch.ones((pixels.shape[0], *pixels.shape[-2:]), dtype=torch.long, device=self.device)
        out = self.model(input_ids=input_ids, attention_mask=attention, token_type_ids=torch.zeros_like(input_ids),
                         pixel_values=pixels.to(self.device, self.dtype), pixel_mask=mask)
        return out.logits[:, 0].float().cpu()

    def logits(self, images: Sequence[Image.Image], texts: Sequence[str],
               keys: Optional[Sequence[str]] = None) -> torch.Tensor:
        """Raw retrieval logit of each (images[i], texts[i]); each distinct pair is run once (cached). The values of
        the call are kept for the call (the bounded cache may evict some of them before the end of a large call)."""
        keys = list(keys) if keys is not None else image_keys(images)
        pair_keys = [f"{ik}|{text_key(t)}" for ik, t in zip(keys, texts)]
        found: Dict[str, torch.Tensor] = {}
        todo: Dict[str, tuple] = {}
        for pk, ik, image, text in zip(pair_keys, keys, images, texts):
            if pk in found or pk in todo:
                continue
            cached = self.cache.get(pk)
            if cached is None:
                todo[pk] = (ik, image, text)
            else:
                found[pk] = cached
        if todo:
            distinct_texts = list(dict.fromkeys(text for _, _, text in todo.values()))
            token_ids = dict(zip(distinct_texts, self.tokenize(distinct_texts)))
            need = {ik: image for ik, image, _ in todo.values()}
            pixels = dict(zip(need, self._pool.map(self.preprocess, list(need.values()))))
            pair_pixels = {pk: pixels[ik] for pk, (ik, _, _) in todo.items()}
            for chunk in _groups_by_shape(list(todo), pair_pixels, self.batch_size):
                scores = self._score_batch(torch.stack([pair_pixels[pk] for pk in chunk]),
                                           [token_ids[todo[pk][2]] for pk in chunk])
                for pk, value in zip(chunk, scores):
                    found[pk] = value.reshape(1)
                    self.cache.put(pk, found[pk])
        return torch.cat([found[pk] for pk in pair_keys])


@dataclass
class VcrFeatures:
    """The three features per sample (official order) and what produced feature (1)."""

    word_precision: List[float]
    vilt_logit: List[float]
    mcip_refclip_s: List[float]
    detr_objects: List[List[str]] = field(default_factory=list)
    yolo_objects: List[List[str]] = field(default_factory=list)
    truncated_texts: int = 0
    clip_truncated_texts: int = 0

    def matrix(self) -> np.ndarray:
        """``(n, 3)`` float64 rows in ``FEATURE_NAMES`` order, as the regressor takes them."""
        return np.column_stack([self.word_precision, self.vilt_logit, self.mcip_refclip_s]).astype(np.float64)


class VcrScorer(Scorer):
    """VCRScore: features (word precision, ViLT logit, MCIP RefCLIP-S) → gradient-boosted regressor (JSON trees).

    ``weights``: the regressor (registry name, hub id or directory of a converted/retrained ``vcrscore_gbr.json``).
    ``detr`` / ``yolo``: detector weights (``None`` leaves that detector out of the pool); ``yolo`` defaults to YOLOS-S,
    capeval's stand-in for the official (unpublished) Keras YOLOv3, with ``yolo_threshold`` 0.6 and its COCO names
    spelled as Darknet's (``yolo_label_names="darknet"``; ``"coco"`` keeps the model's own names).
    ``max_references``: use only the first k references for the pool and MCIP (``3`` = official; default all).

    Long texts are truncated as officially: captions to 39 ViLT tokens, captions and references to MCIP's 77 CLIP
    tokens. A result counts them for the call, whatever the caches hold: ``truncated_texts`` the captions (one per
    sample) over 39 ViLT tokens, ``clip_truncated_texts`` the texts MCIP reads (each sample's caption and the
    references it uses) over 77 CLIP tokens; so counts of chunks or shards add up. One warning per call names both.
    """

    name, images, references = "vcrscore", "required", "required"
    key_metadata = {"vcrscore": ScoreKey("VCRScore"), "word_precision": ScoreKey("Word precision"),
                    "vilt_logit": ScoreKey("ViLT logit"), "mcip_refclip_s": ScoreKey("MCIP RefCLIP-S")}

    def __init__(self, weights: str = "vcrscore-gbr", *, vilt: str = "vilt-b32-finetuned-coco",
                 detr: Optional[str] = "detr-resnet-50", yolo: Optional[str] = "yolos-small",
                 mcip: str = "mcip-vit-l-14-336", detr_threshold: Annotated[float, Between(0, 1)] = DETR_THRESHOLD,
                 yolo_threshold: Annotated[float, Between(0, 1)] = YOLO_THRESHOLD,
                 yolo_label_names: Annotated[str, OneOf(LABEL_NAMES)] = "darknet",
                 max_references: Optional[Annotated[int, AtLeast(1)]] = None, device: Device = "auto",
                 dtype: Optional[Dtype] = None, batch_size: BatchSize = 32, cache_dir: Optional[PathLike] = None,
                 persist_dir: Optional[PathLike] = None, cache_bytes: Bytes = DEFAULT_CACHE_BYTES,
                 regressor: Optional[dict] = None):
        from capeval.vcrscore.regressor import load_regressor

        if yolo_label_names not in LABEL_NAMES:
            raise ValueError(f"yolo_label_names must be one of {LABEL_NAMES}, not {yolo_label_names!r}")
        if max_references is not None and max_references < 1:
            raise ValueError(f"max_references must be None (all) or at least 1, not {max_references!r}")
        self.max_references = max_references
        self.regressor = regressor if regressor is not None else load_regressor(weights)
        options = {"device": device, "dtype": dtype, "cache_dir": cache_dir, "cache_bytes": cache_bytes}
        self.detr = ObjectDetector(detr, threshold=detr_threshold, small_image_resize=True, batch_size=batch_size,
                                   **options) if detr else None
        self.yolo = ObjectDetector(yolo, threshold=yolo_threshold, small_image_resize=False, batch_size=batch_size,
                                   label_names=COCO_TO_DARKNET if yolo_label_names == "darknet" else None,
                                   **options) if yolo else None
        self.vilt = ViltRetrieval(vilt, batch_size=batch_size, persist_dir=persist_dir, **options)
        self.clip = ClipBackbone(mcip, batch_size=batch_size, persist_dir=persist_dir, **options)

    def provenance_parts(self) -> Tuple[object, ...]:
        return (self, self.clip)

    def detect(self, images: Sequence[Image.Image], keys: Optional[Sequence[str]] = None):
        """``(detr names, yolo names)`` per image (empty lists for a detector that is switched off)."""
        keys = list(keys) if keys is not None else image_keys(images)
        detr = self.detr.detect(images, keys) if self.detr else [[] for _ in images]
        yolo = self.yolo.detect(images, keys) if self.yolo else [[] for _ in images]
        return detr, yolo

    def features(self, predictions: Sequence[str], images: Sequence, references: Sequence) -> VcrFeatures:
        """The three features of validated input (the shared validation step runs first)."""
        return self._features(self.validate(predictions, images, references))

    def _features(self, inputs: ValidInputs) -> VcrFeatures:
        predictions, pil = inputs.predictions, inputs.images
        refs = [limit_references(r, self.max_references) for r in inputs.references]
        keys = image_keys(pil)
        detr, yolo = self.detect(pil, keys)
        precision = [word_precision(c, word_pool(r, d, y)) for c, r, d, y in zip(predictions, refs, detr, yolo)]
        vilt = self.vilt.logits(pil, predictions, keys)
        flat = [r for sample in refs for r in sample]
        owner = [i for i, sample in enumerate(refs) for _ in sample]
        texts = self.clip.encode_texts([*predictions, *flat])  # one call: one length bucketing
        candidates, references = texts[:len(predictions)], texts[len(predictions):]
        mcip = mcip_refclip_s(self.clip.encode_images(pil), candidates, references, owner)
        vilt_cut, clip_cut = self._count_truncated(predictions, flat)
        return VcrFeatures(precision, vilt.tolist(), mcip.tolist(), detr, yolo, vilt_cut, clip_cut)

    def _count_truncated(self, predictions: Sequence[str], references: Sequence[str]) -> Tuple[int, int]:
        """``(captions over 39 ViLT tokens, MCIP texts over the CLIP context)``, counted per occurrence, warned once."""
        clip_texts = [*predictions, *references]
        vilt_cut = self.vilt.truncation.count(predictions)
        clip_cut = self.clip.truncation.count(clip_texts)
        warn_truncated([self.vilt.truncation.describe(vilt_cut, len(predictions), "captions") if vilt_cut else "",
                        self.clip.truncation.describe(clip_cut, len(clip_texts), "MCIP texts (captions and references)")
                        if clip_cut else ""])
        return vilt_cut, clip_cut

    def predict(self, features) -> np.ndarray:
        """The regressor on ``(n, 3)`` feature rows (numpy, sklearn's float32 tree arithmetic)."""
        from capeval.vcrscore.gradient_boosting import predict

        return np.asarray(predict(self.regressor, np.asarray(features, dtype=np.float64)), dtype=np.float64)

    def score_keys(self, inputs: ValidInputs) -> Tuple[str, ...]:
        return ("vcrscore", "word_precision", "vilt_logit", "mcip_refclip_s")

    def _score(self, inputs: ValidInputs, *, return_features: bool = False) -> dict:
        """``return_features`` (a per-call option of :meth:`score`) adds the feature rows and the detected objects."""
        feats = self._features(inputs)
        matrix = feats.matrix()
        result = summarize({"vcrscore": self.predict(matrix).tolist(), "word_precision": feats.word_precision,
                            "vilt_logit": feats.vilt_logit, "mcip_refclip_s": feats.mcip_refclip_s})
        result["truncated_texts"] = feats.truncated_texts
        result["clip_truncated_texts"] = feats.clip_truncated_texts
        if return_features:
            result["features"] = matrix.tolist()
            result["detected_objects"] = [{"detr": d, "yolo": y} for d, y in zip(feats.detr_objects,
                                                                                 feats.yolo_objects)]
        return result

    def feature_rows(self, predictions: Sequence[str], images: Sequence, references: Sequence,
                     scores: Optional[Sequence[float]] = None) -> List[dict]:
        """``{"features": [f1, f2, f3]}`` rows (with ``"score"`` when human ``scores`` are given) for
        ``capeval train vcrscore`` / ``capeval score vcrscore --from-features``."""
        from capeval.vcrscore.regressor import feature_rows

        return feature_rows(self.features(predictions, images, references).matrix().tolist(), scores)
