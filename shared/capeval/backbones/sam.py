"""Segment-everything regions with ``segment-anything``: model building, safe loading, cached mask generation.

The mask cache is a bounded LRU (:class:`LruCache`, also used by the HICE-S phrase parser): at most
``max_cached_images`` images and ``max_cached_masks_bytes`` bytes of masks stay in memory; an evicted image is
segmented again when asked for (the same masks, SAM being deterministic), so only time, never a score, changes.

Weights use our layout: ``sam_config.json`` (encoder/decoder sizes) + ``sam_model.safetensors``; the official
``sam_vit_*.pth`` and MobileSAM ``mobile_sam.pt`` files are converted with ``capeval convert sam``
(``torch.load(weights_only=True)``), because ``segment_anything``'s own builder unpickles its checkpoint.
MobileSAM ("mobile_sam", MobileSAM's "vit_t") is SAM's prompt encoder and mask decoder with the TinyViT image
encoder of :mod:`capeval.backbones.tiny_vit`; a config with a ``tiny_vit`` entry builds that encoder.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
from PIL import Image

from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import LruCache, image_key
from capeval.core.constants import SAM_CONFIG_FILE, SAM_FILES, SAM_WEIGHTS_FILE
from capeval.core.device import resolve_device
from capeval.core.hub import load_safetensors, resolve

_DECODER = {"prompt_embed_dim": 256, "decoder_depth": 2, "decoder_mlp_dim": 2048, "decoder_num_heads": 8,
            "iou_head_depth": 3, "iou_head_hidden_dim": 256, "mask_in_chans": 16}
# segment-anything's registry models (build_sam.py): encoder sizes, the decoder is shared
SAM_ARCHITECTURES: Dict[str, Dict] = {
    "vit_b": {"encoder_embed_dim": 768, "encoder_depth": 12, "encoder_num_heads": 12,
              "encoder_global_attn_indexes": [2, 5, 8, 11], **_DECODER},
    "vit_l": {"encoder_embed_dim": 1024, "encoder_depth": 24, "encoder_num_heads": 16,
              "encoder_global_attn_indexes": [5, 11, 17, 23], **_DECODER},
    "vit_h": {"encoder_embed_dim": 1280, "encoder_depth": 32, "encoder_num_heads": 16,
              "encoder_global_attn_indexes": [7, 15, 23, 31], **_DECODER},
}
IMAGE_SIZE, PATCH_SIZE, WINDOW_SIZE = 1024, 16, 14
TINY_VIT_KEY = "image_encoder.patch_embed.seq.0.c.weight"  # only TinyViT (MobileSAM) checkpoints have it


def _add_mobile_sam() -> None:
    from capeval.backbones.tiny_vit import MOBILE_SAM_ENCODER

    SAM_ARCHITECTURES["mobile_sam"] = {"tiny_vit": dict(MOBILE_SAM_ENCODER), **_DECODER}


_add_mobile_sam()
# segmenter names accepted wherever SAM weights are expected (SegmentEverything, HICE-S ``sam=``)
SEGMENTER_WEIGHTS = {"vit_b": "sam-vit-b", "vit_l": "sam-vit-l", "vit_h": "sam-vit-h", "mobile_sam": "mobile-sam",
                     "vit_t": "mobile-sam"}


def build_sam(config: Dict):
    """A ``segment_anything.modeling.Sam`` of the given sizes (random weights, eval mode); its input side is
    ``config["image_size"]`` when given (a test model's; every official SAM takes :data:`IMAGE_SIZE`)."""
    from functools import partial

    import torch
    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    dim = config["prompt_embed_dim"]
    side = config.get("image_size", IMAGE_SIZE)
    grid = side // PATCH_SIZE
    if "tiny_vit" in config:
        from capeval.backbones.tiny_vit import TinyViTEncoder

        image_encoder = TinyViTEncoder(img_size=side, out_chans=dim, **config["tiny_vit"])
    else:
        image_encoder = ImageEncoderViT(
            depth=config["encoder_depth"], embed_dim=config["encoder_embed_dim"], img_size=side, mlp_ratio=4,
            norm_layer=partial(torch.nn.LayerNorm, eps=1e-6), num_heads=config["encoder_num_heads"],
            patch_size=PATCH_SIZE, qkv_bias=True, use_rel_pos=True,
            global_attn_indexes=tuple(config["encoder_global_attn_indexes"]), window_size=WINDOW_SIZE, out_chans=dim)
    sam = Sam(
        image_encoder=image_encoder,
        prompt_encoder=PromptEncoder(embed_dim=dim, image_embedding_size=(grid, grid),
                                     input_image_size=(side, side), mask_in_chans=config["mask_in_chans"]),
        mask_decoder=MaskDecoder(
            num_multimask_outputs=3,
            transformer=TwoWayTransformer(depth=config["decoder_depth"], embedding_dim=dim,
                                          mlp_dim=config["decoder_mlp_dim"], num_heads=config["decoder_num_heads"]),
            transformer_dim=dim, iou_head_depth=config["iou_head_depth"],
            iou_head_hidden_dim=config["iou_head_hidden_dim"]),
        pixel_mean=[123.675, 116.28, 103.53], pixel_std=[58.395, 57.12, 57.375],
    )
    return sam.eval()


def sam_config_from_state_dict(state_dict) -> Dict:
    """Infer the registry architecture of an official SAM state dict (global blocks have full-grid rel. pos.)
    or the TinyViT encoder sizes of a MobileSAM one."""
    if TINY_VIT_KEY in state_dict:
        return mobile_sam_config_from_state_dict(state_dict)
    prefix = "image_encoder.blocks."
    depth = len({k[len(prefix):].split(".")[0] for k in state_dict if k.startswith(prefix)})
    width = int(state_dict["image_encoder.patch_embed.proj.weight"].shape[0])
    grid = int(state_dict["image_encoder.pos_embed"].shape[1])  # 64 for every official SAM (1024 px)
    side = {} if grid * PATCH_SIZE == IMAGE_SIZE else {"image_size": grid * PATCH_SIZE}
    global_blocks = [i for i in range(depth) if state_dict[f"{prefix}{i}.attn.rel_pos_h"].shape[0] == 2 * grid - 1]
    for name, arch in SAM_ARCHITECTURES.items():
        if (arch.get("encoder_embed_dim"), arch.get("encoder_depth")) == (width, depth):
            return {**arch, "encoder_global_attn_indexes": global_blocks, **side}
    raise ValueError(f"not a segment-anything registry model: encoder width {width}, depth {depth}")


def mobile_sam_config_from_state_dict(state_dict) -> Dict:
    """The config of an official MobileSAM (TinyViT encoder + SAM's decoder) state dict."""
    from capeval.backbones.tiny_vit import tiny_vit_config_from_state_dict

    encoder = tiny_vit_config_from_state_dict(state_dict)
    neck = int(state_dict["image_encoder.neck.0.weight"].shape[0])
    if neck != _DECODER["prompt_embed_dim"]:
        raise ValueError(f"TinyViT neck gives {neck} channels; SAM's decoder takes {_DECODER['prompt_embed_dim']}")
    strides = 4 * int(np.prod(encoder["merge_strides"]))
    if strides != PATCH_SIZE:
        raise ValueError(f"TinyViT output stride {strides} is not SAM's {PATCH_SIZE}")
    return {"tiny_vit": encoder, **_DECODER}


def architecture_name(config: Dict) -> Optional[str]:
    """The registry name of a SAM config ("vit_b", ..., "mobile_sam"), or None."""
    for name, arch in SAM_ARCHITECTURES.items():
        if "tiny_vit" in arch or "tiny_vit" in config:
            if arch == config:
                return name
        elif all(arch[k] == config.get(k) for k in ("encoder_embed_dim", "encoder_depth", "encoder_num_heads")):
            return name
    return None


def complete_state_dict(state_dict, config: Dict) -> Dict:
    """``state_dict`` checked against the model of ``config`` (same keys and shapes); BatchNorm counters that an
    official file may omit (``num_batches_tracked``) are added as 0."""
    import torch

    with torch.device("meta"):
        reference = build_sam(config).state_dict()
    missing = [k for k in reference if k not in state_dict and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in state_dict if k not in reference]
    if missing or unexpected:
        raise ValueError(f"state dict does not match the SAM architecture: missing {missing[:5]}"
                         f"{'...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}"
                         f"{'...' if len(unexpected) > 5 else ''}")
    wrong = [k for k, v in state_dict.items() if tuple(v.shape) != tuple(reference[k].shape)]
    if wrong:
        raise ValueError(f"state dict shapes differ from the SAM architecture at {wrong[:5]}")
    return {k: state_dict[k] if k in state_dict else torch.zeros((), dtype=torch.long) for k in reference}


def save_sam(out_dir: Path, state_dict, config: Dict) -> None:
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / SAM_CONFIG_FILE).write_text(json.dumps(config, indent=2))
    save_file({k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in state_dict.items()},
              str(out_dir / SAM_WEIGHTS_FILE))


def load_sam(ref: str, *, cache_dir=None):
    """A SAM model from weights ``ref`` (registry name, segmenter name of ``SEGMENTER_WEIGHTS``, hub id or
    directory) in our safetensors layout."""
    if not Path(ref).expanduser().is_dir():
        ref = SEGMENTER_WEIGHTS.get(ref, ref)
    directory = resolve(ref, list(SAM_FILES), cache_dir=cache_dir)
    sam = build_sam(json.loads((directory / SAM_CONFIG_FILE).read_text()))
    sam.load_state_dict(load_safetensors(directory / SAM_WEIGHTS_FILE), strict=True)
    return sam.eval(), directory


@dataclass(frozen=True)
class RegionSettings:
    """Segment-everything options: SAM's automatic-mask-generator thresholds plus capeval's region filter.

    ``min_area`` is a fraction of the image area; ``max_regions`` keeps the largest regions (ties: SAM's
    predicted IoU, then position); ``None`` keeps all.
    """

    points_per_side: int = 32
    points_per_batch: int = 64
    pred_iou_thresh: float = 0.88
    stability_score_thresh: float = 0.95
    box_nms_thresh: float = 0.7
    min_area: float = 0.0
    max_regions: Optional[int] = None




MAX_CACHED_IMAGES = 1024
MAX_CACHED_MASKS_BYTES = 256 * 2 ** 20  # a byte per pixel and region: ~8 images of 640×480 × 100 regions


def masks_nbytes(masks: Sequence[np.ndarray]) -> int:
    return sum(int(m.nbytes) for m in masks)


class SegmentEverything:
    """Region masks of images (boolean [H, W] arrays, largest first), each distinct image segmented once while it
    stays in the cache.

    ``weights``: SAM weights (registry name such as ``"sam-vit-b"`` or ``"mobile-sam"``, hub id or directory)
    or a segmenter name of :data:`SEGMENTER_WEIGHTS` (``"vit_b"``, ``"vit_l"``, ``"vit_h"``, ``"mobile_sam"``).
    The masks of at most ``max_cached_images`` images and ``max_cached_masks_bytes`` bytes are kept (least recently
    used leave first; an image whose masks alone exceed the byte budget is not kept); an evicted image is segmented
    again on demand, giving the same masks.
    """

    def __init__(self, weights: str = "sam-vit-b", *, settings: Optional[RegionSettings] = None,
                 device: str = "auto", cache_dir=None, max_cached_images: int = MAX_CACHED_IMAGES,
                 max_cached_masks_bytes: int = MAX_CACHED_MASKS_BYTES):
        from segment_anything import SamAutomaticMaskGenerator

        self.settings = settings or RegionSettings()
        self.device = resolve_device(device)
        sam, directory = load_sam(weights, cache_dir=cache_dir)
        options = {k: v for k, v in asdict(self.settings).items() if k not in ("min_area", "max_regions")}
        self.generator = SamAutomaticMaskGenerator(sam.to(self.device), output_mode="binary_mask", **options)
        self._namespace = cache_namespace("sam-masks", directory, settings=asdict(self.settings))
        self.cache: LruCache[List[np.ndarray]] = LruCache(max_cached_images, max_bytes=max_cached_masks_bytes,
                                                          sizeof=masks_nbytes)

    def masks(self, image: Image.Image) -> List[np.ndarray]:
        return self.masks_of([image])[0]

    def masks_of(self, images: Sequence[Image.Image]) -> List[List[np.ndarray]]:
        """The masks of each image; an image repeated in ``images`` is segmented at most once, whatever the
        cache bounds."""
        found: Dict[str, List[np.ndarray]] = {}
        out = []
        for image in images:
            key = f"{self._namespace}|{image_key(image)}"
            if key not in found:
                masks = self.cache.get(key)
                if masks is None:
                    masks = self._segment(image)
                    self.cache.put(key, masks)
                found[key] = masks
            out.append(found[key])
        return out

    def _segment(self, image: Image.Image) -> List[np.ndarray]:
        import torch

        with torch.inference_mode():
            found = self.generator.generate(np.asarray(image.convert("RGB")))
        return select_regions(found, image.width * image.height, self.settings)


def select_regions(found: List[Dict], image_area: int, settings: RegionSettings) -> List[np.ndarray]:
    """Apply the area filter and the region cap to SAM's records; largest first, deterministic order."""
    kept = [r for r in found if r["area"] >= settings.min_area * image_area and r["area"] > 0]
    kept.sort(key=lambda r: (-r["area"], -r["predicted_iou"], tuple(r["bbox"])))
    if settings.max_regions is not None:
        kept = kept[: settings.max_regions]
    return [np.asarray(r["segmentation"], dtype=bool) for r in kept]
