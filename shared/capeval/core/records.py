"""The one record reader of capeval: ``{caption, image?, references?, ...}`` records streamed in bounded memory from
JSONL, CSV, parquet, a ``datasets`` Dataset/IterableDataset, a ``save_to_disk`` folder, or a folder of data files /
a hub dataset id (opened with ``datasets.load_dataset(..., streaming=True)``).

``capeval score --input``, ``capeval merge`` and ``capeval score vcrscore --from-features`` read through
:func:`iter_records`; :class:`RecordFingerprint` identifies an input by its records while they stream past. Images
stay as they are stored: path strings, or ``datasets.Image`` dicts ``{"bytes", "path"}`` (an ``Image`` column is read
undecoded; :func:`capeval.core.inputs.load_image` decodes both). :class:`RecordColumns` turns records into what a
scorer takes (captions, images, references), for every entry point.

An evaluation of caption systems (``capeval evaluate``) reads its annotated images with :func:`read_ground_truth`
(COCO caption annotations or Karpathy split files) or :func:`read_inline` (references inline in any of the sources
above), each system's captions with :func:`read_results` (COCO results files) or :func:`read_inline`, and states
what they cover with :func:`coverage`.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import warnings
from dataclasses import dataclass, field as dataclass_field
from pathlib import Path
from typing import Any, Dict, Hashable, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from capeval.core.errors import InputError
from capeval.core.inputs import check_caption

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


# --- evaluation sets: annotated images, and the captions of systems over them (`capeval evaluate`) ---------------

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


def _load_json(path: Union[str, os.PathLike], what: str) -> Any:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{what} file not found: {path}")
    try:
        with path.open(encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc}); expected {what}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc}); expected {what}") from None


def _image_id(value: Any, where: str) -> Hashable:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError(f"{where} is {type(value).__name__} {value!r:.40}, expected an integer or text id")
    return value


def _json_source(source: Any, what: str, given: str) -> Tuple[Any, str]:
    """(the JSON content, its name in messages) of ``source``: a file path, the content itself (a dict or list,
    named ``given``), or a pycocotools ``COCO`` object (its ``dataset``: the adapter that lets pycocotools users pass
    ``COCO(...)`` / ``coco.loadRes(...)`` objects)."""
    if isinstance(source, (str, os.PathLike)):
        return _load_json(source, what), str(source)
    if hasattr(source, "dataset") and hasattr(source, "getImgIds"):
        return source.dataset, f"the pycocotools {type(source).__name__} object"
    if isinstance(source, (dict, list)):
        return source, given
    raise InputError(f"{given}: {type(source).__name__} is neither a JSON file path, its content, nor a pycocotools "
                     f"COCO object; expected {what}")


def read_ground_truth(path: Union[str, os.PathLike, Any], *, split: Optional[str] = None) -> GroundTruth:
    """The annotated images of a COCO caption annotations file or a Karpathy split file, detected from its content
    (``path``: the file, its content as a dict, or a pycocotools ``COCO`` object).

    - COCO caption annotations (``captions_val2014.json``): ``images[]`` with ``id`` and ``file_name``,
      ``annotations[]`` with ``image_id`` and ``caption``. The image id is ``id``; the file is ``file_name`` (relative
      to the image root, e.g. ``val2014/``). ``split`` does not apply.
    - Karpathy split files (``dataset_coco.json``, ``dataset_flickr30k.json``): ``images[]`` with ``sentences[].raw``,
      ``split`` and ``filename`` (and ``filepath`` for COCO). ``split`` is required and selects the images of that
      split (``"restval"`` is a split like the others). The image id is ``cocoid`` when the entry has one, else the
      ``filename`` stem (an int when it is all digits, as Flickr30k's): the ids COCO results files use. The file is
      ``filepath/filename`` (relative to the COCO root holding ``val2014/``) or ``filename``.

    Images listed without any reference caption are not part of the evaluation (:attr:`GroundTruth.unannotated`):
    ``total`` in :func:`coverage` counts annotated images only, and a result for one is refused by
    :func:`read_results`. Malformed files (duplicate image ids, a caption that is not text, an annotation for an
    image not in ``images[]``) are refused naming the entry; empty captions are kept (the suite counts them, scores
    them as pycocoevalcap does or refuses them: :func:`capeval.suite.texts.check_empty_texts`).
    """
    data, path = _json_source(path, "COCO caption annotations or a Karpathy split file", "the annotations")
    if isinstance(data, dict) and "annotations" in data:
        if split is not None:
            raise InputError(f"{path} is a COCO annotations file (one split already): --split {split} applies to "
                             "Karpathy split files (dataset_coco.json) only")
        return _coco_ground_truth(data, str(path))
    images = data.get("images") if isinstance(data, dict) else None
    if isinstance(images, list) and images and isinstance(images[0], dict) and "sentences" in images[0]:
        return _karpathy_ground_truth(images, str(path), split)
    if isinstance(data, list) and data and isinstance(data[0], dict) and {"image_id", "caption"} <= data[0].keys():
        raise InputError(f'{path} is a results list [{{"image_id", "caption"}}] (one system\'s captions), not '
                         f"reference annotations: {SWAPPED}")
    raise InputError(f"{path} is neither COCO caption annotations (an object with 'images' and 'annotations') nor a "
                     "Karpathy split file (an object with 'images' holding 'sentences')")


def _entries(data: Dict, key: str, source: str) -> List[Dict]:
    entries = data.get(key)
    if not isinstance(entries, list):
        raise InputError(f"{source}: {key!r} is {type(entries).__name__}, expected a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InputError(f"{source}: {key}[{i}] is {type(entry).__name__}, expected an object")
    return entries


def _field(entry: Dict, name: str, where: str) -> Any:
    if name not in entry:
        raise InputError(f"{where} has no {name!r} field")
    return entry[name]


def _coco_ground_truth(data: Dict, source: str) -> GroundTruth:
    files: Dict[Hashable, Optional[str]] = {}
    entries: Dict[Hashable, str] = {}
    for i, entry in enumerate(_entries(data, "images", source)):
        where = f"{source}: images[{i}]"
        image_id = _image_id(_field(entry, "id", where), f"{where}.id")
        if image_id in files:
            raise InputError(f"{where}: image id {image_id!r} again (a duplicate image)")
        file = entry.get("file_name")
        if file is not None and not isinstance(file, str):
            raise InputError(f"{where}.file_name is {type(file).__name__}, expected text")
        files[image_id] = file
        entries[image_id] = where
    references: Dict[Hashable, List[str]] = {}
    reference_where: Dict[Hashable, List[str]] = {}
    for i, entry in enumerate(_entries(data, "annotations", source)):
        where = f"{source}: annotations[{i}]"
        image_id = _image_id(_field(entry, "image_id", where), f"{where}.image_id")
        if "caption" not in entry:
            raise InputError(f"{where} has no 'caption' field: not a caption annotations file "
                             "(captions_*.json, not instances_*.json)")
        if image_id not in files:
            raise InputError(f"{where}.image_id {image_id!r} is not an id of images[]")
        references.setdefault(image_id, []).append(check_caption(entry["caption"], f"{where}.caption", empty=True))
        reference_where.setdefault(image_id, []).append(f"{where}.caption")
    if not references:
        raise InputError(f"{source}: no caption annotations (an image information file without captions?)")
    images = {i: EvalImage(i, file, tuple(references[i]), where=entries[i], reference_where=tuple(reference_where[i]))
              for i, file in files.items() if i in references}
    return GroundTruth(images, source, None, tuple(i for i in files if i not in references))


def _karpathy_id(entry: Dict, where: str) -> Hashable:
    if "cocoid" in entry:
        value = entry["cocoid"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}.cocoid is {type(value).__name__} {value!r:.40}, expected an integer")
        return value
    stem = Path(_karpathy_filename(entry, where)).stem
    return int(stem) if stem.isdigit() else stem


def _karpathy_filename(entry: Dict, where: str) -> str:
    filename = _field(entry, "filename", where)
    if not isinstance(filename, str) or not filename:
        raise InputError(f"{where}.filename is {filename!r:.40}, expected a file name")
    return filename


def _karpathy_ground_truth(entries: List, source: str, split: Optional[str]) -> GroundTruth:
    counts: Dict[str, int] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InputError(f"{source}: images[{i}] is {type(entry).__name__}, expected an object")
        value = _field(entry, "split", f"{source}: images[{i}]")
        counts[str(value)] = counts.get(str(value), 0) + 1
    present = ", ".join(f"{name} ({n} image{'s' if n != 1 else ''})" for name, n in counts.items())
    if split is None:
        raise InputError(f"{source} is a Karpathy split file: choose a split with --split (it holds {present})")
    if split not in counts:
        raise InputError(f"{source} has no split {split!r} (it holds {present})")
    images: Dict[Hashable, EvalImage] = {}
    unannotated: List[Hashable] = []
    for i, entry in enumerate(entries):
        if entry["split"] != split:
            continue
        where = f"{source}: images[{i}]"
        image_id = _karpathy_id(entry, where)
        if image_id in images or image_id in unannotated:
            raise InputError(f"{where}: image id {image_id!r} again (a duplicate image)")
        filepath = entry.get("filepath")
        if filepath is not None and not isinstance(filepath, str):
            raise InputError(f"{where}.filepath is {type(filepath).__name__}, expected text")
        filename = _karpathy_filename(entry, where)
        sentences = _field(entry, "sentences", where)
        if not isinstance(sentences, list):
            raise InputError(f"{where}.sentences is {type(sentences).__name__}, expected a list")
        references = []
        for j, sentence in enumerate(sentences):
            if not isinstance(sentence, dict):
                raise InputError(f"{where}.sentences[{j}] is {type(sentence).__name__}, expected an object")
            references.append(check_caption(_field(sentence, "raw", f"{where}.sentences[{j}]"),
                                         f"{where}.sentences[{j}].raw", empty=True))
        if not references:
            unannotated.append(image_id)
            continue
        file = f"{filepath}/{filename}" if filepath else filename
        images[image_id] = EvalImage(image_id, file, tuple(references), where=where, reference_where=tuple(
            f"{where}.sentences[{j}].raw" for j in range(len(references))))
    return GroundTruth(images, source, split, tuple(unannotated))


def read_results(path: Union[str, os.PathLike, Any], ground_truth: GroundTruth, *,
                 name: Optional[str] = None, keep_unannotated: bool = False) -> SystemCaptions:
    """One system's captions from a COCO results file ``[{"image_id": ..., "caption": "..."}, ...]`` (other keys
    are ignored), checked against ``ground_truth``; ``name`` defaults to the file's stem. ``path`` may also be the
    results list itself, or a pycocotools results object (``coco.loadRes(...)``; its ``annotations``).

    Refused, naming the file, the record (its position in the list, counted from 0 as ``capeval score`` counts
    records) and the problem: a file that is not JSON or not a list, a record without ``image_id`` or ``caption``, a
    caption that is not text, an image id given twice, ids that are not annotated images of ``ground_truth`` (the
    first few named). Ids are compared as they are: ``"391895"`` (text) does not match the annotations' 391895 (a
    number); the error says so. Empty captions are kept here (the suite scores or refuses them, naming this file and
    record: :meth:`SystemCaptions.caption_where`). Reference captions given in place of results (COCO caption
    annotations, a Karpathy split file, a pycocotools object holding several captions of an image) are refused,
    named as such. ``keep_unannotated``: keep results for images the annotations list without any reference caption
    (pycocotools' ``loadRes`` accepts them; :class:`capeval.cocoevalcap.COCOEvalCap` refuses them only where
    ``params['image_id']`` selects them).
    """
    records, source = _json_source(path, 'a COCO results list [{"image_id", "caption"}]', "the results")
    from_object = isinstance(records, dict) and hasattr(path, "dataset")
    if from_object and isinstance(records.get("annotations"), list):  # a loadRes object's dataset
        records = records["annotations"]
    elif isinstance(records, dict) and _references_kind(records) is not None:
        raise InputError(f"{source} is {_references_kind(records)} (reference captions), not results: {SWAPPED}")
    if not isinstance(records, list):
        raise InputError(f'{source}: the top level is {type(records).__name__}, expected a list of '
                         '{"image_id", "caption"} records (a COCO results file)')
    if not records:
        raise InputError(f"{source}: no results (an empty list)")
    captions: Dict[Hashable, str] = {}
    first_record: Dict[Hashable, int] = {}
    for number, record in enumerate(records):
        where = f"{source}: record {number}"
        if not isinstance(record, dict):
            raise InputError(f'{where} is {type(record).__name__}, expected an object {{"image_id", "caption"}}')
        image_id = _image_id(_field(record, "image_id", where), f"{where}: 'image_id'")
        caption = _field(record, "caption", where)
        if not isinstance(caption, str):
            raise InputError(f"{where}: 'caption' is {type(caption).__name__} {caption!r:.40}, expected text")
        if image_id in captions and from_object:
            raise InputError(f"{where}: image_id {image_id!r} again (first at record {first_record[image_id]}): "
                             "several captions of one image, as reference annotations hold them; results hold one "
                             f"caption per image. If this is the annotations' COCO object: {SWAPPED}")
        if image_id in captions:
            raise InputError(f"{where}: image_id {image_id!r} again (first at record {first_record[image_id]}): "
                             "one caption per image")
        captions[image_id] = caption
        first_record[image_id] = number
    listed = ground_truth.images.keys() | set(ground_truth.unannotated) if keep_unannotated else ground_truth.images
    unknown = [i for i in captions if i not in listed]
    if unknown:
        raise InputError(f"{source}: record {first_record[unknown[0]]}: {_unknown_ids(unknown, ground_truth)}")
    default = Path(source).stem if isinstance(path, (str, os.PathLike)) else "results"
    return SystemCaptions(name or default, captions, source, first_record)


SWAPPED = ("give the reference captions as the annotations (--annotations; COCOEvalCap's first argument) and one "
           "system's captions as the results (--results; COCOEvalCap's second)")


def _references_kind(data: Dict) -> Optional[str]:
    """What reference file ``data`` is ("COCO caption annotations", "a Karpathy split file"), else ``None``."""
    if isinstance(data.get("annotations"), list):
        return "COCO caption annotations"
    images = data.get("images")
    if isinstance(images, list) and images and isinstance(images[0], dict) and "sentences" in images[0]:
        return "a Karpathy split file"
    return None


def _unknown_ids(unknown: List[Hashable], ground_truth: GroundTruth) -> str:
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


class _InlineNeeds:
    """What :class:`RecordColumns` reads for an inline evaluation set: captions and references in every record,
    images in every record or in none."""

    name = "an evaluation with inline references"
    images = "optional"
    references = "required"


def read_inline(source: Union[str, os.PathLike, Any], *, fields: Optional[Mapping[str, str]] = None,
                images: Optional[Union[str, os.PathLike]] = None, name: Optional[str] = None,
                image_format: Optional[str] = None, split: Optional[str] = None,
                config: Optional[str] = None) -> Tuple[GroundTruth, SystemCaptions]:
    """One system's captions and their references from any record source ``capeval score`` reads
    (:func:`iter_records`; ``split``/``config`` as there), mapped by ``fields`` / ``image_format`` as
    :class:`RecordColumns` maps them.

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


def coverage(ground_truth: GroundTruth, systems: Sequence[SystemCaptions], *, require_all: bool = False) -> Dict:
    """How much of ``ground_truth`` the systems cover: ``{"scored": N, "total": M, "split": ..., "text": "scored N of
    M images of split test"}`` (``"... annotated images"`` without a split). Every system must caption the same
    images (refused otherwise, naming the system and the first differing ids), all of them annotated, and system
    names must be unique; ``require_all=True`` refuses N < M."""
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
            raise InputError(f"{system.name} ({system.source}): {_unknown_ids(unknown, ground_truth)}")
        extra = [i for i in system.captions if i not in first.captions]
        lacking = [i for i in first.captions if i not in system.captions]
        if extra or lacking:
            parts = [f"captions {len(extra)} image(s) that {first.name} does not ({_named(extra)})"] if extra else []
            if lacking:
                parts.append(f"lacks {len(lacking)} image(s) that {first.name} captions ({_named(lacking)})")
            raise InputError(f"{system.name} ({system.source}) {' and '.join(parts)}: systems are compared on the "
                             "same images")
    scored, total = len(first.captions), len(ground_truth.images)
    of = f"images of split {ground_truth.split}" if ground_truth.split else "annotated images"
    text = f"scored {scored} of {total} {of}"
    if require_all and scored < total:
        missing = [i for i in ground_truth.images if i not in first.captions]
        raise InputError(f"{text}: {len(missing)} image(s) have no result ({_named(missing)}); --require-all "
                         "asks for every one")
    return {"scored": scored, "total": total, "split": ground_truth.split, "text": text}
