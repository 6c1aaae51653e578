"""The one record reader of capeval: ``{caption, image?, references?, ...}`` records streamed in bounded memory from
JSONL, CSV, parquet, a ``datasets`` Dataset/IterableDataset, a ``save_to_disk`` folder, or a folder of data files /
a hub dataset id (opened with ``datasets.load_dataset(..., streaming=True)``).

``capeval score --input``, ``capeval merge`` and ``capeval score vcrscore --from-features`` read through
:func:`iter_records`; :class:`RecordFingerprint` identifies an input by its records while they stream past. Images
stay as they are stored: path strings, or ``datasets.Image`` dicts ``{"bytes", "path"}`` (an ``Image`` column is read
undecoded; :func:`capeval.core.inputs.load_image` decodes both). :class:`RecordColumns` turns records into what a
scorer takes (captions, images, references), for every entry point.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from capeval.core.errors import InputError

DEFAULT_CHUNK_ROWS = 1024  # rows decoded at a time from parquet / datasets sources when no chunk size is given
SAVE_TO_DISK_MARKERS = ("state.json", "dataset_dict.json")
FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def iter_records(source: Union[str, os.PathLike, Any], *, chunk_size: int = DEFAULT_CHUNK_ROWS,
                 split: Optional[str] = None, name: Optional[str] = None) -> Iterator[Dict]:
    """Yield one dict per record, in input order, decoding at most ``chunk_size`` rows of a columnar source at a time.

    ``source``: a ``.jsonl``/``.json`` (one object per line, or a ``.json`` array of objects), ``.csv`` (a
    ``references`` or ``refs`` cell may hold a JSON or Python-literal list: :func:`list_cell`; :class:`RecordColumns`
    reads list cells of any field mapped to references) or ``.parquet`` file; a ``datasets``
    ``Dataset``/``IterableDataset``; a ``save_to_disk`` folder; or a folder of data files / a hub dataset id
    ``org/name``, streamed with ``datasets.load_dataset(source, name, split=split, streaming=True)``. ``split`` may
    be left out when the source holds a single split; ``split`` and ``name`` (the dataset config) do not apply to
    single files.
    """
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise InputError(f"chunk_size must be a positive number of records, got {chunk_size!r}")
    if not isinstance(source, (str, os.PathLike)):
        yield from _dataset_records(source, chunk_size, split, where=type(source).__name__)
        return
    path = Path(source)
    if path.is_file():
        if split is not None or name is not None:
            raise InputError(f"{source} is a single file: --split/--config apply to datasets folders and hub ids only")
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            yield from _parquet_records(path, chunk_size)
        elif suffix == ".csv":
            yield from _csv_records(path)
        elif suffix == ".json" and _starts_with(path, "["):
            yield from _json_array_records(path)
        else:
            yield from _jsonl_records(path)
    elif path.is_dir():
        yield from _folder_records(path, chunk_size, split, name)
    elif _looks_like_hub_id(str(source)):
        yield from _hub_records(str(source), chunk_size, split, name)
    else:
        raise InputError(f"input file not found: {source} (neither a file, a folder nor a hub dataset id 'org/name')")


def _looks_like_hub_id(text: str) -> bool:
    parts = text.split("/")
    return len(parts) <= 2 and all(parts) and not text.startswith(".") and not text.lower().endswith(FILE_SUFFIXES)


def _jsonl_records(path: Path) -> Iterator[Dict]:
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{line_no}: invalid JSON ({exc}); expected one object per line") from exc
                if not isinstance(record, dict):
                    raise InputError(f"{path}:{line_no}: expected a JSON object per line, got {type(record).__name__}")
                yield record


def _starts_with(path: Path, character: str) -> bool:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                return line.lstrip().startswith(character)
    return False


def _json_array_records(path: Path) -> Iterator[Dict]:
    """A ``.json`` file holding one array of objects (read whole: use JSONL for large inputs)."""
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON ({exc})") from exc
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise InputError(f"{path}: item {i} is a {type(record).__name__}, expected an object")
        yield record


LIST_COLUMNS = ("references", "refs")  # CSV columns read as reference lists (Polaris names it "refs")


def list_cell(value: Any, where: str) -> Any:
    """A references cell as a list when it is text holding one: text that starts with ``[`` must be a JSON list
    (``["a", "b"]``) or a Python literal list (``['a', 'b']``, as pandas writes it); other values are returned
    unchanged (other text is one reference). CSV cells are always text, and so are lists saved as strings."""
    if not isinstance(value, str) or not value.lstrip().startswith("["):
        return value
    try:
        return json.loads(value)  # text starting with '[' parses as a list or not at all
    except json.JSONDecodeError:
        import ast

        try:
            return ast.literal_eval(value)  # literals only: no code runs
        except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
            raise InputError(f"{where} is not a JSON list (nor a Python literal list: "
                             f"{_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _csv_records(path: Path) -> Iterator[Dict]:
    with path.open(newline="", encoding="utf-8") as f:
        for line_no, row in enumerate(csv.DictReader(f), 2):
            for column in LIST_COLUMNS:
                refs = row.get(column)
                if refs:
                    refs = list_cell(refs, f"{path}:{line_no}: {column!r}")
                    row[column] = refs if isinstance(refs, list) else [refs]
            yield row


def _parquet_records(path: Path, chunk_size: int) -> Iterator[Dict]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(str(path))
    except pa.ArrowException as exc:
        raise InputError(f"{path}: not a readable parquet file ({exc})") from exc
    for batch in parquet.iter_batches(batch_size=chunk_size):
        yield from batch.to_pylist()


def _undecoded_images(dataset):
    """``Image`` columns read as ``{"bytes", "path"}`` dicts instead of decoded PIL images."""
    import datasets

    for column, feature in (dataset.features or {}).items():
        if isinstance(feature, datasets.Image) and feature.decode:
            dataset = dataset.cast_column(column, datasets.Image(decode=False))
    return dataset


def _one_split(dataset, split: Optional[str], where: str):
    """A split of a (Iterable)DatasetDict: ``split``, or the only one."""
    splits = list(dataset)
    if split is None:
        if len(splits) != 1:
            raise InputError(f"{where} holds the splits {splits}; choose one (--split)")
        return dataset[splits[0]]
    if split not in dataset:
        raise InputError(f"{where} holds the splits {splits}, not {split!r}")
    return dataset[split]


def _dataset_records(dataset, chunk_size: int, split: Optional[str], where: str) -> Iterator[Dict]:
    import datasets

    if isinstance(dataset, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        dataset = _one_split(dataset, split, where)
    elif split is not None:
        raise InputError(f"{where} holds a single split: --split {split} does not apply")
    if not isinstance(dataset, (datasets.Dataset, datasets.IterableDataset)):
        raise InputError(f"cannot read records from {type(dataset).__name__}: pass a file path, a datasets "
                         "Dataset/IterableDataset, a save_to_disk folder or a hub dataset id")
    dataset = _undecoded_images(dataset)
    batches = dataset.iter(batch_size=chunk_size)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (ValueError, OSError) as exc:  # lazily read data files: parse errors (ArrowInvalid), unreadable files
            raise InputError(f"cannot read {where}: {exc}") from exc
        columns = list(batch)
        yield from (dict(zip(columns, values)) for values in zip(*(batch[c] for c in columns)))


def _folder_records(path: Path, chunk_size: int, split: Optional[str], name: Optional[str]) -> Iterator[Dict]:
    import datasets

    if any((path / marker).exists() for marker in SAVE_TO_DISK_MARKERS):
        if name is not None:
            raise InputError(f"{path} is a save_to_disk folder: --config does not apply")
        dataset = datasets.load_from_disk(str(path))  # memory-mapped arrow files
        yield from _dataset_records(dataset, chunk_size, split, where=str(path))
    else:
        yield from _hub_records(str(path), chunk_size, split, name)


def _hub_records(source: str, chunk_size: int, split: Optional[str], name: Optional[str]) -> Iterator[Dict]:
    import datasets

    try:
        dataset = datasets.load_dataset(source, name, split=split, streaming=True)
    except (FileNotFoundError, ValueError, ConnectionError) as exc:
        raise InputError(f"cannot open {source!r} as a datasets folder or hub dataset"
                         f"{f' (split {split!r})' if split else ''}: {exc}") from exc
    yield from _dataset_records(dataset, chunk_size, None, where=repr(source))  # the split is chosen already


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
    saved as a string) is read as that list (:func:`list_cell`). When an optional field is absent but a record holds
    a field that looks like it (``refs`` for references), one :class:`UnmappedFieldWarning` per run names it and the
    option that maps it; for a required field the error says so.
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


def record_columns(records: Sequence[Dict], images_dir: Optional[Union[str, os.PathLike]], scorer, *,
                   fields: Optional[Mapping[str, str]] = None, image_format: Optional[str] = None):
    """One chunk of records → ``(captions, images, references)``: :class:`RecordColumns` for a single chunk (a run of
    several chunks should keep one :class:`RecordColumns`, which checks them together and warns once)."""
    return RecordColumns(scorer, fields=fields, images_dir=images_dir, image_format=image_format)(records)


def parse_shard(text: Optional[str]):
    """``"i/n"`` → (i, n) with 0 ≤ i < n; records with ``index % n == i`` belong to shard i."""
    if not text:
        return 0, 1
    try:
        i, n = (int(part) for part in text.split("/"))
    except ValueError:
        raise InputError(f"--shard must look like i/n (e.g. 0/4), got {text!r}") from None
    if not 0 <= i < n:
        raise InputError(f"--shard {text}: need 0 <= i < n")
    return i, n


def _canonical_value(value):
    """JSON stand-ins for record values JSON does not know: bytes (embedded images) by their sha256, numpy values
    and arrays as lists, dates in ISO format, anything else by its type and text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"sha256": hashlib.sha256(value).hexdigest()}
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return f"{type(value).__name__}:{value}"


class RecordFingerprint:
    """A short sha256 over records in order, each as its canonical JSON (sorted keys, one line), fed as they are
    read: the same records in the same order give the same digest whatever the source format or chunking;
    an edited, added, removed or reordered record changes it. It covers the records as read (captions, references,
    image paths or embedded image bytes), not image files on disk that the records name."""

    DIGEST_CHARS = 16

    def __init__(self):
        self._sha = hashlib.sha256()
        self.records = 0

    def update(self, record: Dict) -> None:
        line = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_canonical_value)
        self._sha.update(line.encode("utf-8") + b"\n")  # JSON escapes newlines in strings: one line per record
        self.records += 1

    def watch(self, records: Iterable[Dict]) -> Iterator[Dict]:
        """Yield ``records`` unchanged, fingerprinting each (the digest is complete once they are exhausted)."""
        for record in records:
            self.update(record)
            yield record

    def hexdigest(self) -> str:
        return self._sha.hexdigest()[: self.DIGEST_CHARS]
