"""Evaluation sets of ``capeval evaluate``: the annotated images (:class:`GroundTruth` of :class:`EvalImage`), the
captions of each system over them (:class:`SystemCaptions`), and the rules they follow together (:func:`coverage`,
:func:`evaluation_set`: the one place they are written, for every door).

They are read from COCO caption annotations, Karpathy split files and COCO results files
(:mod:`capeval.core.coco_files`) or from records with inline references (:mod:`capeval.core.inline_evaluation`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field as dataclass_field
from pathlib import Path
from typing import Dict, Hashable, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from capeval.core.errors import InputError
from capeval.core.inputs import check_caption

MAX_NAMED_IDS = 5  # ids an error names before "…"


@dataclass(frozen=True)
class EvalImage:
    """One annotated image: its id, its file relative to the image root (``None`` when the input names none) and its
    reference captions. ``data``: the image itself when an inline source embeds it (a ``{"bytes", "path"}`` dict).
    ``where`` names the entry it was read from (``"dataset_coco.json: images[3]"``, ``"a.jsonl: record 5"``) and
    ``reference_where`` each reference's (``"captions_val2014.json: annotations[17].caption"``), for errors."""

    image_id: Hashable
    file: Optional[str]
    references: Tuple[str, ...]
    data: Optional[Dict] = dataclass_field(default=None, compare=False, repr=False)
    where: Optional[str] = dataclass_field(default=None, compare=False, repr=False)
    reference_where: Tuple[str, ...] = dataclass_field(default=(), compare=False, repr=False)

    def entry(self, source: str) -> str:
        """Where the image was read (its entry of ``source`` when known)."""
        return self.where or f"{source}: image {self.image_id!r}"

    def reference_entry(self, j: int, source: str) -> str:
        """Where reference ``j`` was read."""
        if j < len(self.reference_where):
            return self.reference_where[j]
        return f"{self.entry(source)}: reference {j}"


@dataclass(frozen=True)
class GroundTruth:
    """The annotated images of an evaluation, in file order. ``split``: the Karpathy split read, else ``None``;
    ``unannotated``: ids the file lists without any reference caption (they are not part of the evaluation)."""

    images: Dict[Hashable, EvalImage]
    source: str
    split: Optional[str] = None
    unannotated: Tuple[Hashable, ...] = ()

    def image_path(self, image_id: Hashable, root: Optional[Union[str, os.PathLike]] = None) -> Optional[Path]:
        """The image's file under ``root`` (the path as given when ``root`` is ``None``); ``None`` when the
        annotations name no file for it."""
        file = self.images[image_id].file
        if file is None:
            return None
        return Path(file) if root is None else Path(root) / file

    def check_inside(self, image_ids: Iterable[Hashable], root: Union[str, os.PathLike]) -> None:
        """Refuse (:class:`InputError`, naming the entry and the file) an image of ``image_ids`` whose file, resolved
        under ``root`` (``..`` collapsed, symlinks followed), is not inside the resolved ``root``: a file name like
        ``../../secret.jpg``, an absolute path elsewhere or a link out of the folder."""
        for image_id in image_ids:
            file = self.images[image_id].file
            if file is None:
                continue
            try:
                resolved, inside = resolve_under(root, file)
            except ValueError as exc:  # an embedded NUL byte
                raise InputError(f"{self.images[image_id].entry(self.source)}: the image file {file!r} is not a "
                                 f"path ({exc})") from None
            if not inside:
                raise InputError(f"{self.images[image_id].entry(self.source)}: the image file {file!r} resolves to "
                                 f"{resolved}, outside the image root {os.path.realpath(root)} (--images): image "
                                 "files must stay inside it")


def resolve_under(root: Union[str, os.PathLike], file: Union[str, os.PathLike]) -> Tuple[Path, bool]:
    """``file`` under the folder ``root``, resolved (``..`` collapsed, symlinks followed, an absolute ``file`` taken
    as it is), and whether it stays inside the resolved ``root``."""
    base = Path(os.path.realpath(root))
    path = Path(os.path.realpath(Path(root) / file))
    return path, path == base or base in path.parents


@dataclass(frozen=True)
class SystemCaptions:
    """One system's caption per image (``image_id -> caption``, file order), read from ``source``; ``records``: the
    record number of each caption in ``source`` (numbered from 0), for errors."""

    name: str
    captions: Dict[Hashable, str]
    source: str
    records: Mapping[Hashable, int] = dataclass_field(default_factory=dict, compare=False, repr=False)

    def caption_where(self, image_id: Hashable) -> str:
        """The caption of ``image_id`` as errors name it: the file and record it was read from, the system, the
        image (``"model_a.json: record 3: model_a: the caption of image 391895"``)."""
        caption = f"{self.name}: the caption of image {image_id!r}"
        number = self.records.get(image_id)
        return caption if number is None else f"{self.source}: record {number}: {caption}"


def _named(ids: Sequence) -> str:
    shown = ", ".join(repr(i) for i in ids[:MAX_NAMED_IDS])
    return shown + (", …" if len(ids) > MAX_NAMED_IDS else "")


def unknown_ids_problem(unknown: List[Hashable], ground_truth: GroundTruth) -> str:
    """Why ``unknown`` (ids some system captions, the first one first) are not images of ``ground_truth``, for
    errors: the first few named, with a hint when an id is written as text where the annotations write a number
    (or the other way round) or names an image listed without references."""
    split = f" (split {ground_truth.split})" if ground_truth.split else ""
    message = (f"image_id {unknown[0]!r} is not an annotated image of {ground_truth.source}{split}; "
               f"{len(unknown)} result(s) name such ids: {_named(unknown)}")
    first = unknown[0]
    twin = str(first) if isinstance(first, int) else (int(first) if first.isdigit() else None)
    if twin is not None and twin in ground_truth.images:
        kind = "a number" if isinstance(twin, int) else "text"
        message += f" (the annotations' id {twin!r} is {kind}: write the ids as the annotations do)"
    elif first in ground_truth.unannotated:
        message += " (the annotations list that image without any reference caption)"
    return message


def coverage(ground_truth: GroundTruth, systems: Sequence[SystemCaptions], *, require_all: bool = False) -> Dict:
    """How much of ``ground_truth`` the systems cover: ``{"scored": N, "total": M, "split": ..., "text": "scored N of
    M images of split test"}`` (``"... annotated images"`` without a split). Every system must caption the same
    images (refused otherwise, naming the system and the first differing ids), all of them annotated, and system
    names must be unique, and they must caption some image; ``require_all=True`` refuses N < M."""
    if not systems:
        raise InputError("no system results given")
    names = [system.name for system in systems]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InputError(f"two systems are named {repeated[0]!r} (name them apart, e.g. by their file names)")
    first = systems[0]
    for system in systems:
        unknown = [i for i in system.captions if i not in ground_truth.images]
        if unknown:
            raise InputError(f"{system.name} ({system.source}): {unknown_ids_problem(unknown, ground_truth)}")
        extra = [i for i in system.captions if i not in first.captions]
        lacking = [i for i in first.captions if i not in system.captions]
        if extra or lacking:
            parts = [f"captions {len(extra)} image(s) that {first.name} does not ({_named(extra)})"] if extra else []
            if lacking:
                parts.append(f"lacks {len(lacking)} image(s) that {first.name} captions ({_named(lacking)})")
            raise InputError(f"{system.name} ({system.source}) {' and '.join(parts)}: systems are compared on the "
                             "same images")
    scored, total = len(first.captions), len(ground_truth.images)
    if not scored:
        raise InputError(f"{first.name} ({first.source}) captions none of the annotated images: nothing to score")
    of = f"images of split {ground_truth.split}" if ground_truth.split else "annotated images"
    text = f"scored {scored} of {total} {of}"
    if require_all and scored < total:
        missing = [i for i in ground_truth.images if i not in first.captions]
        raise InputError(f"{text}: {len(missing)} image(s) have no result ({_named(missing)}); --require-all "
                         "asks for every one")
    return {"scored": scored, "total": total, "split": ground_truth.split, "text": text}


@dataclass(frozen=True)
class EvaluationSet:
    """An evaluation set checked (:func:`evaluation_set`): the ``ground_truth``, the ``systems``, the scored
    ``image_ids`` (ground-truth order), each system's ``captions`` in that order, the ``references`` (``None`` when no
    scored image has any) and the ``coverage``."""

    ground_truth: GroundTruth
    systems: Tuple[SystemCaptions, ...]
    image_ids: Tuple[Hashable, ...]
    captions: Dict[str, List[str]]
    references: Optional[List[List[str]]]
    coverage: Dict


def evaluation_set(ground_truth: GroundTruth, systems: Sequence[SystemCaptions], *,
                   require_all: bool = False) -> EvaluationSet:
    """``systems`` over ``ground_truth`` checked by the rules of :func:`coverage` (``require_all`` as there), every
    caption and reference checked as text (empty ones are the scorers' to score or refuse), and the scored images'
    references all given or all absent; each refusal an :class:`InputError` naming the file and record."""
    covered = coverage(ground_truth, systems, require_all=require_all)
    image_ids = tuple(i for i in ground_truth.images if i in systems[0].captions)
    captions = {system.name: [check_caption(system.captions[i], system.caption_where(i), empty=True)
                              for i in image_ids] for system in systems}
    references = []
    for image_id in image_ids:
        image = ground_truth.images[image_id]
        references.append([check_caption(reference, image.reference_entry(j, ground_truth.source), empty=True)
                           for j, reference in enumerate(image.references)])
    without = [i for i, refs in zip(image_ids, references) if not refs]
    if without and len(without) < len(image_ids):
        raise InputError(f"{ground_truth.images[without[0]].entry(ground_truth.source)} has no reference caption "
                         f"while other images have ({len(without)} such image(s): {_named(without)}): give every "
                         "scored image its references, or none")
    return EvaluationSet(ground_truth, tuple(systems), image_ids, captions,
                         None if without else references, covered)
