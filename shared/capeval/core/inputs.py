"""The one input layer: validation and conversion of captions, references and images for every entry point.

Images are accepted as PIL images, file paths, numpy arrays (HW or HWC), torch tensors (HW or CHW), or ``datasets.Image`` dicts (``{"bytes", "path"}``). uint8 values are used
as they are, uint16 / 16-bit images are scaled to 8 bits (``v / 257``: the official pipelines' ``convert("RGB")``
would saturate them), floats (float16, bfloat16, float32, float64) must be finite and in [0, 1]. Images are
returned as PIL images in their original mode (8-bit): metrics convert to RGB where their official
preprocessing does. Every problem raises :class:`InputError` naming the field, the sample index and the problem;
nothing is dropped, cast or clipped silently.
"""

from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

import numpy as np
from PIL import Image, UnidentifiedImageError

from capeval.core.errors import InputError

NEEDS = ("required", "optional", "unused")
EIGHT_BIT_MODES = ("1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV")
SIXTEEN_BIT_MODES = ("I;16", "I;16B", "I;16L", "I;16N")
SUPPORTED_MODES = EIGHT_BIT_MODES + SIXTEEN_BIT_MODES + ("I",)  # "I": 32-bit ints holding 8- or 16-bit values
CHANNELS = (1, 3, 4)


def _where(field: str, index: Optional[int]) -> str:
    return f"{field}[{index}]" if index is not None else field.rstrip("s")


def load_image(image: Any, *, index: Optional[int] = None, field: str = "images") -> Image.Image:
    """Return ``image`` as a fully loaded 8-bit PIL image (original mode), or raise :class:`InputError`."""
    where = _where(field, index)
    if isinstance(image, Image.Image):
        pil = image
    elif isinstance(image, (str, os.PathLike)):
        pil = _open(os.fspath(image), where, source=os.fspath(image))
    elif isinstance(image, dict):
        pil = _from_dict(image, where)
    elif isinstance(image, np.ndarray):
        pil = _from_array(image, where, layout="HWC")
    elif _is_tensor(image):
        pil = _from_tensor(image, where)
    elif image is None:
        raise InputError(f"{where} is missing (None)")
    else:
        raise InputError(f"{where}: unsupported image type {type(image).__name__}")
    pil = _to_eight_bit(pil, where)
    if pil.width == 0 or pil.height == 0:
        raise InputError(f"{where}: empty image of size {pil.size}")
    return pil


def _from_dict(image: dict, where: str) -> Image.Image:
    """A ``datasets.Image`` dict: its ``bytes`` (bytes) when given, else its ``path`` (a file path)."""
    data, path = image.get("bytes"), image.get("path")
    if data:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InputError(f"{where}: image dict 'bytes' is {_a(type(data).__name__)}, expected bytes")
        return _open(io.BytesIO(data), where, source="bytes")
    if path is None or path == "":
        raise InputError(f"{where}: image dict has neither 'bytes' nor 'path'")
    if not isinstance(path, (str, os.PathLike)):
        raise InputError(f"{where}: image dict 'path' is {_a(type(path).__name__)} ({path!r:.40}), expected a file "
                         f"path")
    return _open(os.fspath(path), where, source=os.fspath(path))


def _open(fp, where: str, source: str) -> Image.Image:
    if isinstance(fp, str):
        if os.path.isdir(fp):
            raise InputError(f"{where}: {fp} is a directory, not an image file")
        if not os.path.exists(fp):
            raise InputError(f"{where}: image file not found: {fp}")
    try:
        pil = Image.open(fp)
    except Image.DecompressionBombError as exc:
        raise InputError(f"{where}: refused as a decompression bomb ({source}): {exc}") from exc
    except UnidentifiedImageError as exc:
        raise InputError(f"{where}: corrupt or unreadable image: not an image (no image format recognised) "
                         f"({source})") from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"{where}: corrupt or unreadable image ({source}): {_one_line(exc)}") from exc
    try:
        pil.load()
    except Image.DecompressionBombError as exc:
        raise InputError(f"{where}: refused as a decompression bomb ({source}): {exc}") from exc
    except (OSError, SyntaxError, ValueError) as exc:  # e.g. "image file is truncated", "broken data stream"
        raise InputError(f"{where}: corrupt or unreadable image: truncated or corrupt image data ({source}): "
                         f"{_one_line(exc)}") from exc
    return pil


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _to_eight_bit(pil: Image.Image, where: str) -> Image.Image:
    """8-bit modes pass; 16-bit grey (``I;16*``, and ``I`` holding values up to 65535) is scaled by 1/257."""
    if pil.mode in EIGHT_BIT_MODES:
        return pil
    if pil.mode in SIXTEEN_BIT_MODES or pil.mode == "I":
        values = np.asarray(pil, dtype=np.int64)
        if values.size and (values.min() < 0 or values.max() > 65535):
            raise InputError(f"{where}: 32-bit integer image with values outside [0, 65535] "
                             f"({values.min()}..{values.max()}); convert it to 8 bits first")
        if pil.mode == "I" and (values.size == 0 or values.max() <= 255):
            return Image.fromarray(values.astype(np.uint8), mode="L")  # 8-bit values stored in 32-bit ints
        return Image.fromarray(_scale_16_bit(values), mode="L")
    raise InputError(f"{where}: unsupported image mode {pil.mode!r} (use 8- or 16-bit images, or a float array "
                     f"in [0, 1])")


def _scale_16_bit(values: np.ndarray) -> np.ndarray:
    return np.round(values.astype(np.float64) / 257.0).astype(np.uint8)


def _is_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _from_tensor(tensor, where: str) -> Image.Image:
    tensor = tensor.detach().cpu()
    if str(tensor.dtype) in ("torch.bfloat16", "torch.float16"):
        tensor = tensor.float()  # exact: every bfloat16/float16 value is a float32 value
    return _from_array(tensor.numpy(), where, layout="CHW")


def _hwc(array: np.ndarray, where: str, layout: str) -> np.ndarray:
    """HW, or 3-D in ``layout`` (numpy: HWC, torch: CHW) with 1, 3 or 4 channels, as an HW / HWC array. The layout is
    never guessed: an array in the other layout is refused with a hint."""
    if array.ndim == 2:
        return array
    axis = 0 if layout == "CHW" else -1
    if array.ndim != 3 or array.shape[axis] not in CHANNELS:
        other = "HWC" if layout == "CHW" else "CHW"
        hint = (f"; a {other} array? {'permute' if layout == 'CHW' else 'transpose'} it to {layout}"
                if array.ndim == 3 and array.shape[-1 - axis] in CHANNELS else "")
        raise InputError(f"{where}: array of shape {tuple(array.shape)} is not an HW or {layout} image with 1, 3 or 4 "
                         f"channels{hint}")
    if layout == "CHW":
        array = np.moveaxis(array, 0, -1)
    return array[..., 0] if array.shape[-1] == 1 else array


def _from_array(array: np.ndarray, where: str, *, layout: str) -> Image.Image:
    array = _hwc(array, where, layout)
    if array.dtype == np.uint8:
        data = array
    elif array.dtype == np.uint16:
        data = _scale_16_bit(array)
    elif np.issubdtype(array.dtype, np.floating):
        if not np.isfinite(array).all():
            raise InputError(f"{where}: float image holds NaN or infinite values")
        low, high = float(array.min()), float(array.max())
        if low < 0 or high > 1:
            raise InputError(f"{where}: float image values must be in [0, 1], got [{low:g}, {high:g}] "
                             f"(values in [0, 255]? pass a uint8 array or divide by 255)")
        data = np.round(array * 255).astype(np.uint8)
    else:
        raise InputError(f"{where}: unsupported array dtype {array.dtype} (use uint8, uint16 or float in [0, 1])")
    return Image.fromarray(np.ascontiguousarray(data))


def _index(indices: Optional[Sequence[int]], i: int) -> int:
    """The sample index of position ``i``: its index in the whole input (``indices``) or ``i``."""
    return int(indices[i]) if indices is not None else i


DECODE_THREADS = 8  # at most; PIL decodes with the GIL released


def load_images(images: Sequence[Any], *, indices: Optional[Sequence[int]] = None,
                field: str = "images") -> List[Image.Image]:
    """Each image loaded as :func:`load_image` does; a file path given several times is decoded once (its samples
    share the image), distinct files are decoded in threads. ``indices``: the samples' indices in the whole input
    (for error messages of chunked or sharded input); an error names the first bad sample in input order."""
    paths = [os.fspath(image) if isinstance(image, (str, os.PathLike)) else None for image in images]
    first: dict = {}  # path -> position of its first occurrence
    owner = [i if path is None else first.setdefault(path, i) for i, path in enumerate(paths)]
    todo = [i for i, o in enumerate(owner) if o == i]

    def load(i: int) -> Image.Image:
        return load_image(images[i], index=_index(indices, i), field=field)

    files = sum(paths[i] is not None for i in todo)
    if files < 2:
        loaded = dict(zip(todo, map(load, todo)))
    else:
        with ThreadPoolExecutor(min(DECODE_THREADS, files, os.cpu_count() or 1)) as pool:
            loaded = dict(zip(todo, pool.map(load, todo)))  # results (and the first error) in input order
    return [loaded[o] for o in owner]


def as_list(value: Any, field: str) -> list:
    """A sequence of per-sample values as a list; strings, mappings and sets are refused (no order, or not a list)."""
    if isinstance(value, (str, bytes)):
        raise InputError(f"{field} must be a list (of strings, one entry per sample), not a single "
                         f"{'string' if isinstance(value, str) else 'bytes object'}")
    if isinstance(value, (dict, set, frozenset)) or hasattr(value, "keys"):
        raise InputError(f"{field} must be a list with one entry per sample, not {_a(type(value).__name__)}")
    if isinstance(value, np.ndarray):
        return list(value) if value.ndim > 1 else value.tolist()  # a batch of image arrays stays arrays
    if type(value).__module__.startswith("pandas"):
        return list(value.tolist())
    if isinstance(value, (list, tuple)) or (hasattr(value, "__len__") and hasattr(value, "__getitem__")):
        return list(value)
    raise InputError(f"{field} must be a list with one entry per sample, not {_a(type(value).__name__)}")


def check_caption(caption: Any, where: str, *, empty: bool = False, refusal: str = "") -> str:
    """A caption (or reference) as a string; an empty or whitespace-only one is refused unless ``empty`` (the
    metrics that score it as their official implementation does). ``refusal``: what the error adds (the option that
    scores it, and why this metric does not)."""
    if not isinstance(caption, str):
        raise InputError(f"{where} is {_a(type(caption).__name__)} ({caption!r:.40}), expected a string")
    if not empty and is_empty_caption(caption):
        raise InputError(f"{where} is an empty caption{refusal}")
    return caption


def is_empty_caption(caption: Any) -> bool:
    """Whether ``caption`` is a string that is empty or whitespace only."""
    return isinstance(caption, str) and not caption.strip()


def check_captions(captions: Any, name: str = "predictions", *, indices: Optional[Sequence[int]] = None,
                   empty: bool = False, refusal: str = "") -> List[str]:
    """Captions as a list of strings (non-empty unless ``empty``: :func:`check_caption`)."""
    if isinstance(captions, str):
        raise InputError(f"{name} must be a list of strings, not a single string")
    out = [check_caption(c, f"{name}[{_index(indices, i)}]", empty=empty, refusal=refusal)
           for i, c in enumerate(as_list(captions, name))]
    if not out:
        raise InputError(f"{name} is empty")
    return out


def parse_references(entry: Any, index: int, *, allow_empty: bool = False, empty: bool = False,
                     refusal: str = "") -> List[str]:
    """One sample's references: a string (one reference) or a list of strings (non-empty strings unless ``empty``,
    the error adding ``refusal``; an empty list is refused unless ``allow_empty``)."""
    where = f"references[{index}]"
    if isinstance(entry, str):
        entry = [entry]
    elif entry is None:
        raise InputError(f"{where} is missing (None)")
    else:
        entry = as_list(entry, where)
    refs = [check_caption(r, f"{where}[{j}]", empty=empty, refusal=refusal) for j, r in enumerate(entry)]
    if not refs and not allow_empty:
        raise InputError(f"{where} is an empty reference list")
    return refs


def check_references(references: Any, n: int, *, indices: Optional[Sequence[int]] = None,
                     empty: bool = False, refusal: str = "") -> List[List[str]]:
    """References normalised to one non-empty list of strings per sample (a bare string = one reference; empty
    strings only when ``empty``, else refused adding ``refusal``)."""
    references = as_list(references, "references")
    if len(references) != n:
        raise InputError(f"got {n} predictions but {len(references)} reference entries")
    return [parse_references(entry, _index(indices, i), empty=empty, refusal=refusal)
            for i, entry in enumerate(references)]


def check_lengths(**named: Optional[Sequence]) -> int:
    """All given sequences must have the same length; return it."""
    lengths = {name: len(as_list(seq, name)) for name, seq in named.items() if seq is not None}
    if len(set(lengths.values())) > 1:
        raise InputError("mismatched lengths: " + ", ".join(f"{k}={v}" for k, v in lengths.items()))
    return next(iter(lengths.values()), 0)


@dataclass(frozen=True)
class ValidInputs:
    """Validated input of one scoring call."""

    predictions: List[str]
    images: Optional[List[Image.Image]]
    references: Optional[List[List[str]]]

    def __len__(self) -> int:
        return len(self.predictions)


def validate_inputs(predictions: Any, images: Any = None, references: Any = None, *, images_needed: str = "required",
                    references_needed: str = "optional", metric: str = "this metric",
                    indices: Optional[Sequence[int]] = None, empty: bool = False, refusal: str = "",
                    reference_refusal: str = "") -> ValidInputs:
    """The shared validation step of every scorer: lengths, captions, references and decoded images.

    ``images_needed`` / ``references_needed``: "required", "optional" or "unused" (given anyway: an error).
    ``indices``: the samples' indices in the whole input (record numbers of a chunk or shard), for error messages.
    ``empty``: empty and whitespace-only captions and references pass (else refused, the error adding ``refusal``,
    ``reference_refusal`` for a reference).
    """
    if predictions is None:
        raise InputError("predictions is missing (None)")
    preds = check_captions(predictions, indices=indices, empty=empty, refusal=refusal)
    n = len(preds)
    missing = {"images": "one image per caption (images=None)",
               "references": "references (at least one per caption; references=None)"}
    for field, value, need in (("images", images, images_needed), ("references", references, references_needed)):
        if value is None and need == "required":
            raise InputError(f"{metric} needs {missing[field]}")
        if value is not None and need == "unused":
            raise InputError(f"{metric} takes no {field}")
    images = as_list(images, "images") if images is not None else None
    if images is not None and len(images) != n:
        raise InputError(f"mismatched lengths: predictions={n}, images={len(images)}")
    refs = check_references(references, n, indices=indices, empty=empty,
                            refusal=reference_refusal) if references is not None else None
    pil = load_images(images, indices=indices) if images is not None else None
    return ValidInputs(preds, pil, refs)
