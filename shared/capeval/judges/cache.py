"""Judge caches: every judge call's inputs → outputs, one JSON record per line, appended.

A record is ``{"key", "inputs", "outputs", "origin"}``; ``key`` is the sha256 of the canonical JSON of ``inputs``
(model id, the backend's name and version, prompt sha256, image identity, caption, references, generation settings;
an image of known content by its sha256 alone, not its file name). The file is the
truth; the in-memory index holds at most ``max_bytes`` of records (least recently used dropped first; a lookup
that misses the index reads the file again).

Every record read is checked (:func:`entry_problem`): its key must be the key of its own inputs (so an answer
cannot be moved to another sample by editing or swapping keys), and its outputs must be a judge's (a finite
``score`` in FLEUR's and EXPERT's range [0, 1] or null, the same for ``raw_score``, text or null). A line that is
not UTF-8, not JSON or not such a record is an :class:`InputError` naming the file and the line.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from PIL import Image

from capeval.core.caches import LruCache
from capeval.core.errors import InputError
from capeval.core.hashing import file_sha256

DEFAULT_INDEX_BYTES = 64 << 20
SCORE_RANGE = (0.0, 1.0)  # FLEUR's and EXPERT's scale: the smoothed score and the number the judge wrote


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


def _number_problem(outputs: Mapping, name: str) -> Optional[str]:
    value = outputs.get(name)
    if value is None:
        return None
    low, high = SCORE_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        return f"outputs.{name} is {value!r}, not a finite number in [{low:g}, {high:g}] (or null)"
    return None


def _probabilities_problem(probabilities) -> Optional[str]:
    if probabilities is None:
        return None
    if not isinstance(probabilities, Mapping) or "first" not in probabilities:
        return "outputs.digit_probabilities must be null or hold 'first' (and 'second')"
    for place in ("first", "second"):
        digits = probabilities.get(place)
        if digits is None and place == "second":
            continue
        if not isinstance(digits, Mapping) or set(digits) != {str(d) for d in range(10)} or any(
                isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0 for p in digits.values()):
            return f"outputs.digit_probabilities.{place} must map the digits 0-9 to probabilities in [0, 1]"
    return None


def entry_problem(record) -> Optional[str]:
    """What makes ``record`` (parsed from one line of a judge cache) no judge record, in words; None when nothing."""
    if not isinstance(record, dict):
        return f"not a judge record (a JSON {type(record).__name__}, not an object)"
    missing = [name for name in ("key", "inputs", "outputs") if name not in record]
    if missing:
        return f"not a judge record: no {', '.join(missing)} (needs key, inputs, outputs)"
    inputs, outputs = record["inputs"], record["outputs"]
    if not isinstance(inputs, dict) or not isinstance(outputs, dict):
        return "not a judge record: inputs and outputs must be JSON objects"
    for name in ("judge", "caption"):
        if not isinstance(inputs.get(name), str):
            return f"inputs.{name} is missing or not a string"
    references = inputs.get("references")
    if references is not None and not (isinstance(references, list) and all(isinstance(r, str) for r in references)):
        return "inputs.references must be null or a list of strings"
    if inputs.get("image") is not None and not isinstance(inputs["image"], dict):
        return "inputs.image must be null or an object"
    if record["key"] != inputs_key(inputs):
        return (f"its key {str(record['key'])[:16]}… is not the key of its inputs ({inputs_key(inputs)[:16]}…: "
                f"judge, model, backend, prompt, image, caption, references, generation): the entry was edited or its "
                f"key moved from another entry, so it may answer another sample")
    if "score" not in outputs:
        return "outputs.score is missing"
    for name in ("score", "raw_score"):
        problem = _number_problem(outputs, name)
        if problem:
            return problem
    for name in ("text", "explanation"):
        if outputs.get(name) is not None and not isinstance(outputs[name], str):
            return f"outputs.{name} must be a string or null, not {outputs[name]!r:.40}"
    return _probabilities_problem(outputs.get("digit_probabilities"))


class JudgeCache:
    """An append-only JSONL judge cache at ``path`` with a byte-bounded in-memory index.

    ``get(inputs)`` → outputs or None; ``put(inputs, outputs, origin, **extra)`` appends a record (one equal to
    the indexed record of its key is not written twice); ``lookup(calls)`` finds many calls in one pass;
    ``find(judge, image_file, caption)`` joins by judge, image file base name and exact caption (for records whose
    image content is unknown, e.g. published outputs); ``records()`` / ``entries()`` iterate over the file, every
    record checked.
    """

    def __init__(self, path: os.PathLike, *, max_bytes: int = DEFAULT_INDEX_BYTES):
        self.path = Path(path)
        self.max_bytes = int(max_bytes)
        self._index: LruCache[dict] = LruCache(None, max_bytes=self.max_bytes,
                                               sizeof=lambda record: len(canonical_json(record)))

    def records(self) -> Iterator[dict]:
        """Every record of the file, in order; a line that is not a valid record is an :class:`InputError` naming it
        (:func:`entry_problem`)."""
        for _, record in self.entries():
            yield record

    def entries(self) -> Iterator[Tuple[int, dict]]:
        """``(line number, record)`` of every record of the file, checked as :meth:`records` says."""
        if not self.path.is_file():
            return
        with open(self.path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise self.refusal(number, f"not UTF-8 text (byte {exc.start}: a binary or corrupt file?)") \
                        from None
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    cut = "" if raw.endswith(b"\n") else "; the file ends inside this record (truncated?)"
                    raise self.refusal(number, f"not JSON ({exc}){cut}") from None
                problem = entry_problem(record)
                if problem:
                    raise self.refusal(number, problem)
                yield number, record

    def check(self) -> int:
        """Read the whole file once (the number of records): a bad line is refused before anything loads."""
        return sum(1 for _ in self.entries())

    def refusal(self, line: int, problem: str) -> InputError:
        """The one-line error of a bad entry: the file, the line, the problem."""
        return InputError(f"judge cache {self.path} line {line}: {problem}")

    def line_of(self, record: Mapping) -> Optional[int]:
        """The line of the file that holds ``record`` (its last copy), None when none does (an error path: reads the
        file again)."""
        found = None
        for number, candidate in self.entries():
            if candidate == record:
                found = number
        return found

    def _lookup(self, key: str) -> Optional[dict]:
        record = self._index.get(key)
        if record is not None:
            return record
        found = None
        for candidate in self.records():  # the last record of a key wins
            if candidate["key"] == key:
                found = candidate
        if found is not None:
            self._index.put(key, found)
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
        self._index.put(record["key"], json.loads(line))
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
