"""The fingerprint of a record stream: what every ``capeval score --shard`` output is stamped with, and what
``capeval merge`` checks its shards against."""

from __future__ import annotations

import hashlib
import json
from typing import Dict, Iterable, Iterator


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
