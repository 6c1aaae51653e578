"""Record columns: records → ``(captions, images, references)`` for one scorer, the single record → column
mapping of every entry point (:class:`RecordColumns`): which record field holds each role, how a field is read, and
the hints when a field is absent or another field looks like it."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from capeval.core.errors import InputError
from capeval.core.record_sources import list_cell

DEFAULT_FIELDS = {"caption": "caption", "image": "image", "references": "references"}
CLI_OPTIONS = {"caption": "--caption-field", "image": "--image-field", "references": "--references-field"}
PLURALS = {"caption": "captions", "image": "images", "references": "references"}
# record fields that usually hold a role's values, for hints when the mapped field is absent
LOOK_ALIKES = {
    "caption": ("caption", "candidate", "candidates", "prediction", "predictions", "hypothesis", "hyp", "generated",
                "generated_caption", "text"),
    "image": ("image", "images", "img", "image_path", "image_file", "file_name", "filename", "file", "path"),
    "references": ("references", "reference", "refs", "ref", "gts", "gt", "ground_truth", "ground_truths",
                   "captions", "targets", "target"),
}


class UnmappedFieldWarning(UserWarning):
    """A record holds a field that looks like the captions, images or references of a sample, but another field is
    mapped to them: its values are not scored."""


class RecordColumns:
    """Records → ``(captions, images, references)`` for one scorer, chunk after chunk of one run: the single
    record → column mapping of ``capeval score``, ``ray-score``, the Trainer hook and the evaluate command.

    ``scorer``: anything with ``name``, ``images`` and ``references`` ("required", "optional" or "unused": the
    scorer's input policy; EnsembEval's depends on its weights). ``fields`` maps the roles caption/image/references
    to the records' own field names (:data:`DEFAULT_FIELDS` otherwise); ``images_dir``: the directory relative image
    paths are under; ``image_format`` builds each image path from the record's fields (e.g.
    ``"COCO_val2014_{image_id:012d}.jpg"``); ``options``: how the caller's user names each field, for messages
    (:data:`CLI_OPTIONS` by default); ``row_name``: what errors call a record (``"eval_dataset row"`` for the Trainer
    hook).

    Records carry their record number in ``"index"`` (else their position in the chunk), and errors name it. A field
    the metric uses must be in every record, not null (an optional one: in every record or in none, over the whole
    run); a field it does not use is left out. A references value that is text holding a list (a CSV cell, a list
    saved as a string) is read as that list (:func:`~capeval.core.record_sources.list_cell`). When an optional field
    is absent but a record holds a field that looks like it (``refs`` for references), one
    :class:`UnmappedFieldWarning` per run names it and the option that maps it; for a required field the error says
    so.
    """

    def __init__(self, scorer, *, fields: Optional[Mapping[str, str]] = None,
                 images_dir: Optional[Union[str, os.PathLike]] = None, image_format: Optional[str] = None,
                 options: Mapping[str, str] = CLI_OPTIONS, row_name: str = "record"):
        unknown = sorted(set(fields or {}) - set(DEFAULT_FIELDS))
        if unknown:
            raise InputError(f"unknown field role(s) {unknown}: map {sorted(DEFAULT_FIELDS)}")
        self.scorer = scorer
        self.fields = {**DEFAULT_FIELDS, **(fields or {})}
        self.images_dir = None if images_dir is None else Path(images_dir)
        self.image_format = image_format
        self.options = options
        self.row_name = row_name
        self._given: Dict[str, bool] = {}  # optional role -> whether the run's first chunk gave it
        self._warned: set = set()

    def __call__(self, records: Sequence[Dict]) -> Tuple[List, Optional[List], Optional[List]]:
        numbers = [record.get("index", position) for position, record in enumerate(records)]
        captions = self._column(records, numbers, "caption", "required")
        if self.image_format is not None and self.scorer.images != "unused":
            images = [self._formatted_image(record, number) for record, number in zip(records, numbers)]
        else:
            images = self._column(records, numbers, "image", self.scorer.images)
        if images is not None and self.images_dir is not None:
            images = [str(self.images_dir / image) if isinstance(image, str) else image for image in images]
        references = self._column(records, numbers, "references", self.scorer.references)
        if references is not None:
            field = self.fields["references"]
            references = [list_cell(refs, f"{self.row_name} {number}: {field!r}")
                          for refs, number in zip(references, numbers)]
        return captions, images, references

    def _column(self, records: Sequence[Dict], numbers: List, role: str, need: str) -> Optional[List]:
        if need == "unused":
            return None
        field = self.fields[role]
        lacking = [position for position, record in enumerate(records) if record.get(field) is None]
        if need == "optional":
            given = len(lacking) < len(records)
            given_before = self._given.setdefault(role, given)
            if given != given_before or lacking and given:
                position = (lacking or [0])[0] if given_before else next(
                    p for p, record in enumerate(records) if record.get(field) is not None)
                raise InputError(f"{self.row_name} {numbers[position]}: {self._absence(records[position], role)} "
                                 f"(give {role} in every record or in none)")
            if not given:
                self._warn_look_alike(records, numbers, role)
                return None
        elif lacking:
            position = lacking[0]
            hint = self._look_alike_hint(records[position], role)
            raise InputError(f"{self.row_name} {numbers[position]}: {self._absence(records[position], role)} "
                             f"({self.scorer.name} needs {role}){hint}")
        return [record[field] for record in records]

    def _absence(self, record: Dict, role: str) -> str:
        field = self.fields[role]
        if field not in record:
            return f"no {field!r} field"
        if record[field] is None:
            return f"{field!r} is null"
        return f"has {field!r}, but the records before it have none"

    def _look_alike(self, record: Dict, role: str) -> Optional[str]:
        return next((name for name in LOOK_ALIKES[role] if name != self.fields[role] and name in record), None)

    def _look_alike_hint(self, record: Dict, role: str) -> str:
        name = self._look_alike(record, role)
        return f"; it has {name!r}: map it with {self.options[role]} {name}" if name else ""

    def _warn_look_alike(self, records: Sequence[Dict], numbers: List, role: str) -> None:
        if role in self._warned:
            return
        for record, number in zip(records, numbers):
            name = self._look_alike(record, role)
            if name is not None:
                self._warned.add(role)
                values = PLURALS[role]
                warnings.warn(f"{self.row_name} {number} has field {name!r} but {values} are read from "
                              f"{self.fields[role]!r} ({self.options[role]}): {self.scorer.name} scores without "
                              f"{values}",
                              UnmappedFieldWarning, stacklevel=4)  # the caller of RecordColumns
                return

    def _formatted_image(self, record: Dict, number) -> str:
        try:
            return self.image_format.format(**record)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
            raise InputError(f"{self.row_name} {number}: --image-format {self.image_format!r} does not apply to "
                             f"its fields ({exc.__class__.__name__}: {exc})") from None
