"""Judge caches: every judge call's inputs → outputs, one JSON record per line, appended.

A record is ``{"key", "inputs", "outputs", "origin"}``; ``key`` is the sha256 of the canonical JSON of ``inputs``
(model id@commit, prompt sha256, image identity, caption, references, generation settings; an image of known
content by its sha256 alone, not its file name). The file is the
truth; the in-memory index holds at most ``max_bytes`` of records (least recently used dropped first; a lookup
that misses the index reads the file again).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from PIL import Image

from capeval.core.errors import InputError
from capeval.core.hashing import file_sha256

DEFAULT_INDEX_BYTES = 64 << 20


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def inputs_key(inputs: Mapping) -> str:
    """The record key of a judge call: sha256 of the canonical JSON of its inputs, the image by its content when
    known (the file's name, kept in the record, does not change what the judge sees)."""
    image = inputs.get("image")
    if isinstance(image, Mapping) and image.get("sha256") is not None:
        inputs = {**inputs, "image": {"sha256": image["sha256"]}}
    return hashlib.sha256(canonical_json(inputs).encode("utf-8")).hexdigest()


def image_identity(image: Image.Image, file: Optional[str] = None) -> Dict[str, Optional[str]]:
    """``{"sha256", "file"}`` of an image: sha256 over its decoded RGB pixels and size (any encoding of the same
    pixels is the same image), and the file's base name when known."""
    rgb = image.convert("RGB")
    digest = hashlib.sha256(f"{rgb.width}x{rgb.height}:".encode())
    digest.update(rgb.tobytes())
    return {"sha256": digest.hexdigest(), "file": os.path.basename(file) if file else None}


class JudgeCache:
    """An append-only JSONL judge cache at ``path`` with a byte-bounded in-memory index.

    ``get(inputs)`` → outputs or None; ``put(inputs, outputs, origin, **extra)`` appends a record (one equal to
    the indexed record of its key is not written twice); ``lookup(calls)`` finds many calls in one pass; ``find(judge, image_file, caption)`` joins by judge, image file
    base name and exact caption (for records whose image content is unknown, e.g. published outputs);
    ``records()`` iterates over the file.
    """

    def __init__(self, path: os.PathLike, *, max_bytes: int = DEFAULT_INDEX_BYTES):
        self.path = Path(path)
        self.max_bytes = int(max_bytes)
        self._index: "OrderedDict[str, dict]" = OrderedDict()
        self._sizes: Dict[str, int] = {}
        self._bytes = 0

    def records(self) -> Iterator[dict]:
        """Every record of the file, in order; a line that is not a record is an :class:`InputError` naming it."""
        if not self.path.is_file():
            return
        with open(self.path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise InputError(f"judge cache {self.path} line {number}: not JSON ({exc})") from None
                if not isinstance(record, dict) or not {"key", "inputs", "outputs"} <= set(record):
                    raise InputError(f"judge cache {self.path} line {number}: not a judge record "
                                     "(needs key, inputs, outputs)")
                yield record

    def _remember(self, record: dict, size: int) -> None:
        key = record["key"]
        if key in self._index:
            self._bytes -= self._sizes.pop(key)
            del self._index[key]
        if size > self.max_bytes:
            return
        self._index[key] = record
        self._sizes[key] = size
        self._bytes += size
        while self._bytes > self.max_bytes:
            old, _ = self._index.popitem(last=False)
            self._bytes -= self._sizes.pop(old)

    def _lookup(self, key: str) -> Optional[dict]:
        record = self._index.get(key)
        if record is not None:
            self._index.move_to_end(key)
            return record
        found = None
        for candidate in self.records():  # the last record of a key wins
            if candidate["key"] == key:
                found = candidate
        if found is not None:
            self._remember(found, len(canonical_json(found)))
        return found

    def get(self, inputs: Mapping) -> Optional[dict]:
        record = self._lookup(inputs_key(inputs))
        return None if record is None else record["outputs"]

    def put(self, inputs: Mapping, outputs: Mapping, origin: str = "generated", **extra) -> dict:
        """Append the record of a call (``extra``: more top-level fields, e.g. ``published``); a record equal to
        the one the index holds for its key is not written again."""
        record = {"key": inputs_key(inputs), "inputs": dict(inputs), "outputs": dict(outputs), "origin": origin,
                  **extra}
        line = canonical_json(record)
        known = self._index.get(record["key"])
        if known is not None and canonical_json(known) == line:
            return known
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        self._remember(json.loads(line), len(line))
        return record

    def lookup(self, calls: Sequence[Mapping]) -> List[Tuple[Optional[dict], Optional[dict]]]:
        """For each call, in one pass over the file: the last record of its key, and the last record joined to it
        by judge, image file base name and caption (as :meth:`find`)."""
        keys = [inputs_key(call) for call in calls]
        wanted = set(keys)
        joins = {self._join_of(call["judge"], (call.get("image") or {}).get("file"), call["caption"])
                 for call in calls}
        by_key: Dict[str, dict] = {}
        by_join: Dict[tuple, dict] = {}
        for record in self.records():
            if record["key"] in wanted:
                by_key[record["key"]] = record
            inputs = record["inputs"]
            join = self._join_of(inputs.get("judge"), (inputs.get("image") or {}).get("file"), inputs.get("caption"))
            if join in joins:
                by_join[join] = record
        return [(by_key.get(key), by_join.get(self._join_of(call["judge"], (call.get("image") or {}).get("file"),
                                                             call["caption"])))
                for key, call in zip(keys, calls)]

    @staticmethod
    def _join_of(judge, image_file, caption) -> tuple:
        return judge, os.path.basename(image_file) if image_file else None, caption

    def find(self, judge: str, image_file: Optional[str], caption: str) -> Optional[dict]:
        """The last record of ``judge`` for the image file (base name) and the exact caption, or None."""
        wanted, found = self._join_of(judge, image_file, caption), None
        for record in self.records():
            inputs = record["inputs"]
            if self._join_of(inputs.get("judge"), (inputs.get("image") or {}).get("file"),
                             inputs.get("caption")) == wanted:
                found = record
        return found

    def sha256(self) -> Optional[str]:
        """sha256 of the cache file's bytes (None while it does not exist)."""
        return file_sha256(self.path) if self.path.is_file() else None
