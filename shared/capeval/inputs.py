"""Validation and conversion of user inputs: images, captions and references.

Images are accepted as PIL images, file paths, numpy arrays (HW, HWC; uint8, or float in [0, 1]),
torch tensors (CHW or HW; uint8, or float in [0, 1]) or ``datasets.Image`` dicts (``{"bytes", "path"}``).
They are returned as PIL images in their *original* mode: metrics convert to RGB where their official
preprocessing does (CLIP converts after resizing and cropping).
"""

from __future__ import annotations

import io
import os
from typing import Any, List, Optional, Sequence, Union

import numpy as np
from PIL import Image, UnidentifiedImageError

from capeval.errors import InputError

SUPPORTED_MODES = ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV", "I", "I;16", "F")


def load_image(image: Any, *, index: Optional[int] = None) -> Image.Image:
    """Return ``image`` as a fully loaded PIL image (original mode), or raise :class:`InputError`."""
    where = f"images[{index}]" if index is not None else "image"
    if isinstance(image, Image.Image):
        pil = image
    elif isinstance(image, (str, os.PathLike)):
        pil = _open(image, where, source=str(image))
    elif isinstance(image, dict):
        if image.get("bytes"):
            pil = _open(io.BytesIO(image["bytes"]), where, source="bytes")
        elif image.get("path"):
            pil = _open(image["path"], where, source=image["path"])
        else:
            raise InputError(f"{where}: image dict has neither 'bytes' nor 'path'")
    elif isinstance(image, np.ndarray):
        pil = _from_array(image, where)
    elif _is_tensor(image):
        pil = _from_tensor(image, where)
    elif image is None:
        raise InputError(f"{where} is missing (None)")
    else:
        raise InputError(f"{where}: unsupported image type {type(image).__name__}")
    if pil.mode not in SUPPORTED_MODES:
        raise InputError(f"{where}: unsupported image mode {pil.mode!r}")
    if pil.width == 0 or pil.height == 0:
        raise InputError(f"{where}: empty image of size {pil.size}")
    return pil


def _open(fp, where: str, source: str) -> Image.Image:
    if isinstance(fp, str) and not os.path.exists(fp):
        raise InputError(f"{where}: image file not found: {fp}")
    try:
        pil = Image.open(fp)
        pil.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"{where}: corrupt or unreadable image ({source}): {exc}") from exc
    return pil


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _from_tensor(tensor, where: str) -> Image.Image:
    array = tensor.detach().cpu().numpy()
    if array.ndim == 3:
        array = np.moveaxis(array, 0, -1)  # CHW -> HWC (torchvision convention)
    return _from_array(array, where)


def _from_array(array: np.ndarray, where: str) -> Image.Image:
    if array.ndim == 3 and array.shape[-1] == 1:
        array = array[..., 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] not in (3, 4)):
        raise InputError(f"{where}: array of shape {array.shape} is not an HW, HWC (C=1,3,4) or CHW image")
    if array.dtype == np.uint8:
        data = array
    elif np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all() or array.min() < 0 or array.max() > 1:
            raise InputError(f"{where}: float image values must be finite and in [0, 1]")
        data = np.round(array * 255).astype(np.uint8)
    else:
        raise InputError(f"{where}: unsupported array dtype {array.dtype} (use uint8 or float in [0, 1])")
    return Image.fromarray(np.ascontiguousarray(data))


def load_images(images: Sequence[Any]) -> List[Image.Image]:
    return [load_image(image, index=i) for i, image in enumerate(images)]


def check_captions(captions: Sequence[Any], name: str = "predictions") -> List[str]:
    """Return captions as a list of strings; reject non-strings and empty/blank captions."""
    if isinstance(captions, str):
        raise InputError(f"{name} must be a list of strings, not a single string")
    out = []
    for i, caption in enumerate(captions):
        if not isinstance(caption, str):
            raise InputError(f"{name}[{i}] is a {type(caption).__name__}, expected a string")
        if not caption.strip():
            raise InputError(f"{name}[{i}] is an empty caption")
        out.append(caption)
    if not out:
        raise InputError(f"{name} is empty")
    return out


def check_references(references: Sequence[Union[str, Sequence[str]]], n: int) -> List[List[str]]:
    """Normalise references to one list of non-empty strings per sample (a bare string = one reference)."""
    if isinstance(references, str):
        raise InputError("references must have one entry per prediction, not a single string")
    if len(references) != n:
        raise InputError(f"got {n} predictions but {len(references)} reference entries")
    out = []
    for i, refs in enumerate(references):
        refs = [refs] if isinstance(refs, str) else list(refs)
        if not refs:
            raise InputError(f"references[{i}] is an empty reference list")
        out.append(check_captions(refs, name=f"references[{i}]"))
    return out


def check_lengths(**named: Optional[Sequence]) -> int:
    """All given sequences must have the same length; return it."""
    lengths = {name: len(seq) for name, seq in named.items() if seq is not None}
    if len(set(lengths.values())) > 1:
        raise InputError("mismatched lengths: " + ", ".join(f"{k}={v}" for k, v in lengths.items()))
    return next(iter(lengths.values()), 0)
