"""Record sources: ``{caption, image?, references?, ...}`` records streamed in bounded memory from JSONL, CSV,
parquet, a ``datasets`` Dataset/IterableDataset, a ``save_to_disk`` folder, or a folder of data files / a hub dataset
id (opened with ``datasets.load_dataset(..., streaming=True)``), and the shards of a record stream.

``capeval score --input``, ``capeval merge`` and ``capeval score vcrscore --from-features`` read through
:func:`iter_records`. Images stay as they are stored: path strings, or ``datasets.Image`` dicts ``{"bytes", "path"}``
(an ``Image`` column is read undecoded; :func:`capeval.core.inputs.load_image` decodes both).
:class:`capeval.core.record_columns.RecordColumns` turns records into what a scorer takes.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Union

from capeval.core.errors import InputError

DEFAULT_CHUNK_ROWS = 1024  # rows decoded at a time from parquet / datasets sources when no chunk size is given
SAVE_TO_DISK_MARKERS = ("state.json", "dataset_dict.json")
FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def iter_records(source: Union[str, os.PathLike, Any], *, chunk_size: int = DEFAULT_CHUNK_ROWS,
                 split: Optional[str] = None, name: Optional[str] = None) -> Iterator[Dict]:
    """Yield one dict per record, in input order, decoding at most ``chunk_size`` rows of a columnar source at a time.

    ``source``: a ``.jsonl``/``.json`` (one object per line, or a ``.json`` array of objects), ``.csv`` (a
    ``references`` or ``refs`` cell may hold a JSON or Python-literal list: :func:`list_cell`;
    :class:`~capeval.core.record_columns.RecordColumns` reads list cells of any field mapped to references) or
    ``.parquet`` file; a ``datasets`` ``Dataset``/``IterableDataset``; a ``save_to_disk`` folder; or a folder of data
    files / a hub dataset id ``org/name``, streamed with ``datasets.load_dataset(source, name, split=split,
    streaming=True)``. ``split`` may be left out when the source holds a single split; ``split`` and ``name`` (the
    dataset config) do not apply to single files.
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
