"""The images of a suite: where each comes from, and each distinct one decoded once per chunk for every metric and
every system."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

from PIL import Image

from capeval.core import inputs
from capeval.core.errors import InputError

MAX_NAMED = 5


def image_sources(ground_truth, image_ids: Sequence[Hashable], *, images: Optional[Mapping[Hashable, Any]] = None,
                  images_root=None) -> List[Any]:
    """What each image is read from: ``images[id]`` when given (anything :func:`capeval.core.inputs.load_image`
    takes), else the image the ground truth embeds, else its file under ``images_root``. Images with none of them,
    or whose file does not exist, are an :class:`InputError` naming the first few, and so is a file that resolves
    outside ``images_root`` (naming its entry: :meth:`GroundTruth.check_inside`), before any model loads."""
    sources, missing, absent = [], [], []
    for image_id in image_ids:
        if images is not None and image_id in images:
            source = images[image_id]
        elif getattr(ground_truth.images[image_id], "data", None) is not None:
            source = ground_truth.images[image_id].data
        else:
            if images_root is not None:
                ground_truth.check_inside([image_id], images_root)
            source = ground_truth.image_path(image_id, images_root)
        if source is None:
            missing.append(image_id)
        elif isinstance(source, (str, os.PathLike)) and not os.path.isfile(source):
            absent.append(f"image {image_id!r}: {os.fspath(source)}")
        sources.append(source)
    if missing:
        raise InputError(f"{len(missing)} scored image(s) have no image file or data: {_first(map(repr, missing))}")
    if absent:
        raise InputError(f"{len(absent)} image file(s) not found (image root {images_root}): {_first(absent)}")
    return sources


def _first(items) -> str:
    items = list(items)
    return ", ".join(items[:MAX_NAMED]) + (", …" if len(items) > MAX_NAMED else "")


def source_identity(source: Any) -> Hashable:
    """Sources that are the same image: the same file path, else the same object."""
    return ("file", os.fspath(source)) if isinstance(source, (str, os.PathLike)) else ("object", id(source))


def decode_images(sources: Sequence[Any], image_ids: Sequence[Hashable], threads: int = inputs.DECODE_THREADS
                  ) -> Tuple[List[Image.Image], int]:
    """Each distinct source loaded once (:func:`capeval.core.inputs.load_image`, distinct ones in threads; images
    sharing a file share the decoded image), and how many were decoded (files and bytes, not in-memory images).
    Errors name the image id."""
    first: Dict[Hashable, int] = {}
    owner = [first.setdefault(source_identity(source), i) for i, source in enumerate(sources)]
    todo = sorted(set(owner))

    def load(i: int) -> Image.Image:
        return inputs.load_image(sources[i], field=f"image {image_ids[i]!r}")

    with ThreadPoolExecutor(max(1, min(threads, len(todo), os.cpu_count() or 1))) as pool:
        loaded = dict(zip(todo, pool.map(load, todo)))  # the first error in input order
    decoded = sum(not isinstance(sources[i], Image.Image) for i in todo)
    return [loaded[o] for o in owner], decoded
