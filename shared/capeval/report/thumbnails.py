"""Thumbnails for the self-contained HTML report: a JPEG of at most 256 px a side as a ``data:`` URI, made from the
image file under the images root the report is given; a file that resolves outside that root (``..``, an absolute
path elsewhere, a link out of it) is never read."""

from __future__ import annotations

import base64
import io
import warnings
from pathlib import Path
from typing import Optional, Tuple

from PIL import Image, ImageOps, UnidentifiedImageError

from capeval.core.evaluation_sets import resolve_under

THUMBNAIL_SIDE = 256


def thumbnail_uri(path: Path, side: int = THUMBNAIL_SIDE) -> str:
    with Image.open(path) as image:
        small = ImageOps.exif_transpose(image).convert("RGB")
        small.thumbnail((side, side))
    buffer = io.BytesIO()
    small.save(buffer, "JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def image_thumbnail(images_root: Optional[Path], file: Optional[str]) -> Tuple[Optional[str], str]:
    """``(data URI, "")``, or ``(None, why)`` when there is no image to show; an unreadable or missing file, or one
    outside ``images_root``, is also warned about (the page says it in the image's place)."""
    if images_root is None:
        return None, "no images folder given"
    if not file:
        return None, "no image file recorded"
    try:
        path, inside = resolve_under(images_root, file)
    except ValueError:  # an embedded NUL byte: no file of the folder
        path, inside = None, False
    if not inside:
        why = f"image not shown: {file!r} is outside the images folder {images_root}"
        warnings.warn(why, stacklevel=3)
        return None, why
    try:
        return thumbnail_uri(path), ""
    except (OSError, UnidentifiedImageError) as error:
        why = f"image not shown: {path}: {type(error).__name__}"
        warnings.warn(why, stacklevel=3)
        return None, why
