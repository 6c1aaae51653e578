"""Evaluation sets from records that carry their references inline (any record source of ``capeval score``): one
system's captions and their references per source (:func:`read_inline`), several systems' references as one
(:func:`common_ground_truth`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Dict, Hashable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from capeval.core.errors import InputError
from capeval.core.evaluation_sets import EvalImage, GroundTruth, SystemCaptions
from capeval.core.inputs import check_caption
from capeval.core.record_columns import RecordColumns
from capeval.core.record_sources import DEFAULT_CHUNK_ROWS, iter_records


class _InlineNeeds:
    """What :class:`~capeval.core.record_columns.RecordColumns` reads for an inline evaluation set: captions and
    references in every record, images in every record or in none."""

    name = "an evaluation with inline references"
    images = "optional"
    references = "required"


def read_inline(source: Union[str, os.PathLike, Any], *, fields: Optional[Mapping[str, str]] = None,
                images: Optional[Union[str, os.PathLike]] = None, name: Optional[str] = None,
                image_format: Optional[str] = None, split: Optional[str] = None,
                config: Optional[str] = None) -> Tuple[GroundTruth, SystemCaptions]:
    """One system's captions and their references from any record source ``capeval score`` reads
    (:func:`~capeval.core.record_sources.iter_records`; ``split``/``config`` as there), mapped by ``fields`` /
    ``image_format`` as :class:`~capeval.core.record_columns.RecordColumns` maps them.

    Each record is one image: its id is its image path relative to ``images``, the image root (an absolute path
    under the root is made relative to it, ``./`` parts are dropped, other paths stay as written; the ``path`` of an
    embedded ``{"bytes", "path"}`` image, or ``sha256:<digest>`` of its bytes when it has none), so several systems'
    files over the same images pair up (:func:`common_ground_truth` checks that their references agree). Records
    without images (in every record or in none) are identified by their record number. An image given twice is
    refused (one caption per image and system); ``name`` defaults to the source's stem.
    """
    columns = RecordColumns(_InlineNeeds(), fields=fields, image_format=image_format)
    images_by_id: Dict[Hashable, EvalImage] = {}
    captions: Dict[Hashable, str] = {}
    first_record: Dict[Hashable, int] = {}
    label = os.fspath(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__
    records = ({**record, "index": number}
               for number, record in enumerate(iter_records(source, split=split, name=config)))
    for chunk in _chunks(records, DEFAULT_CHUNK_ROWS):
        chunk_captions, chunk_images, chunk_references = columns(chunk)
        for i, record in enumerate(chunk):
            number = record["index"]
            where = f"{label}: record {number}"
            image = None if chunk_images is None else chunk_images[i]
            image_id, file, data = (number, None, None) if image is None else _inline_image(image, images, where)
            if image_id in captions:
                raise InputError(f"{where}: image {image_id!r} again (first at record {first_record[image_id]}): "
                                 "one caption per image and system")
            caption = chunk_captions[i]
            if not isinstance(caption, str):
                raise InputError(f"{where}: the caption is {type(caption).__name__} {caption!r:.40}, expected text")
            references = _inline_references(chunk_references[i], where)
            images_by_id[image_id] = EvalImage(image_id, file, references, data, where=where, reference_where=tuple(
                f"{where}: reference {j}" for j in range(len(references))))
            captions[image_id] = caption
            first_record[image_id] = number
    if not captions:
        raise InputError(f"{label}: no records")
    system = SystemCaptions(name or (Path(label).stem if isinstance(source, (str, os.PathLike)) else label),
                            captions, label, first_record)
    return GroundTruth(images_by_id, label, None), system


def _chunks(records: Iterator[Dict], size: int) -> Iterator[List[Dict]]:
    chunk: List[Dict] = []
    for record in records:
        chunk.append(record)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _inline_image(image: Any, root: Optional[Union[str, os.PathLike]],
                  where: str) -> Tuple[Hashable, Optional[str], Optional[Dict]]:
    if isinstance(image, (str, os.PathLike)):
        if not os.fspath(image).strip():
            raise InputError(f"{where}: the image path is empty")
        path = _relative_to_root(Path(image), root).as_posix()
        return path, path, None
    if isinstance(image, dict) and ("bytes" in image or "path" in image):
        path, data = image.get("path"), image.get("bytes")
        if data is None:
            if not isinstance(path, str):
                raise InputError(f"{where}: the image has neither bytes nor a path")
            return path, path, None
        image_id = path if isinstance(path, str) and path else f"sha256:{hashlib.sha256(data).hexdigest()[:16]}"
        return image_id, None, image
    raise InputError(f"{where}: the image is {type(image).__name__}, expected a path or a {{'bytes', 'path'}} image")


def _relative_to_root(path: Path, root: Optional[Union[str, os.PathLike]]) -> Path:
    """An absolute ``path`` under ``root`` relative to it; others as they are (``Path`` drops ``./`` parts)."""
    if root is not None and path.is_absolute():
        try:
            return path.relative_to(Path(root).absolute())
        except ValueError:
            return path
    return path


def _inline_references(value: Any, where: str) -> Tuple[str, ...]:
    references = [value] if isinstance(value, str) else value
    if not isinstance(references, (list, tuple)):
        raise InputError(f"{where}: the references are {type(value).__name__}, expected a list of captions")
    if not references:
        raise InputError(f"{where}: an empty reference list")
    return tuple(check_caption(ref, f"{where}: reference {j}", empty=True) for j, ref in enumerate(references))


def common_ground_truth(truths: Sequence[GroundTruth]) -> GroundTruth:
    """The ground truths of several inline systems as one: the union of their images (first appearance order); an
    image two of them hold must have the same references (and the same embedded image) in both."""
    if not truths:
        raise InputError("no ground truth given")
    images: Dict[Hashable, EvalImage] = {}
    owner: Dict[Hashable, str] = {}
    for truth in truths:
        for image_id, image in truth.images.items():
            seen = images.setdefault(image_id, image)
            owner.setdefault(image_id, truth.source)
            if seen != image or _embedded_bytes(seen) != _embedded_bytes(image):
                raise InputError(f"{truth.source}: image {image_id!r} has other references (or image bytes) than in "
                                 f"{owner[image_id]}: systems must be scored against the same references")
    if len(truths) == 1:
        return truths[0]
    return GroundTruth(images, " + ".join(t.source for t in truths), None)


def _embedded_bytes(image: EvalImage) -> Optional[bytes]:
    return None if image.data is None else image.data.get("bytes")
