"""A folder of cache files by key, bounded in bytes, least recently used removed first, shared safely by processes.

Each entry is one file ``<key><suffix>``. It is written to a temporary name and renamed, so a reader sees a whole
file or none, and stamped with the time of its latest write or read (its mtime, set by the writer or reader): the
recency order. ``max_bytes`` bounds the entries' files, each counted as the :data:`FILE_BLOCK`-byte blocks its bytes
fill (what a small file takes on common file systems); the lock, the running total and ``namespace.json`` (the
``description`` of what the entries are a function of) are not counted.

Writers hold an inter-process lock (``.lock``) and keep the entries' total in ``.bytes``, written before each rename
(a writer killed at any point leaves the total high, never low). A write that would pass the bound first recounts the
folder and removes the least recently used entries until at most :data:`LOW_WATER` of the bound is left, so one
recount serves a quarter of the bound's writes; the recount also removes temporary files killed writers left (every
write happens under the lock, so no live writer has one). Readers take no lock: an entry removed under a reader is a
miss, one replaced under it is read whole, old or new.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Tuple

FILE_BLOCK = 4096
LOW_WATER = 0.75  # a write that would pass the bound leaves at most this fraction of it
DESCRIPTION_FILE = "namespace.json"
_TOTAL_FILE, _LOCK_FILE, _TEMPORARY = ".bytes", ".lock", ".tmp"


def write_atomically(path: Path, write: Callable[[Path], Any]) -> None:
    """``write(tmp)`` to a name unique per writer (processes and threads), then renamed to ``path``."""
    tmp = path.with_suffix(f".{uuid.uuid4().hex}{_TEMPORARY}")
    write(tmp)
    os.replace(tmp, path)


def footprint(nbytes: int) -> int:
    """Bytes a file of ``nbytes`` bytes is counted as: whole :data:`FILE_BLOCK` blocks."""
    return -(-nbytes // FILE_BLOCK) * FILE_BLOCK


class DiskCache:
    """Files by key under ``folder``, at most ``max_bytes`` (see the module docstring). ``evictions`` counts the
    entries this object removed."""

    def __init__(self, folder: os.PathLike, *, max_bytes: int, suffix: str, description: Optional[str] = None):
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"max_bytes must be an int ≥ 0, not {max_bytes!r}")
        if not suffix.startswith(".") or suffix == _TEMPORARY:
            raise ValueError(f"suffix must start with '.' and not be {_TEMPORARY!r}, not {suffix!r}")
        self.folder, self.max_bytes, self.suffix, self.description = Path(folder), max_bytes, suffix, description
        self.evictions = 0
        self._last_stamp = 0
        self._thread_lock = threading.Lock()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}{self.suffix}"

    def read(self, key: str) -> Optional[bytes]:
        """The entry's bytes (and it becomes the most recently used), or None when there is none."""
        path = self.path(key)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:  # unreadable: a miss, computed again
            warnings.warn(f"ignoring an unreadable cache entry {path}: {exc!r}")
            return None
        self._stamp(path)
        return data

    def write_many(self, items: Iterable[Tuple[str, bytes]]) -> None:
        """Store each ``(key, bytes)`` in order, the last the most recently used; an entry larger than the bound on
        its own is not stored."""
        from filelock import FileLock

        items = list(items)
        if not items:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._thread_lock, FileLock(str(self.folder / _LOCK_FILE), thread_local=False):
            described = self.folder / DESCRIPTION_FILE
            if self.description is not None and not described.exists():
                write_atomically(described, lambda tmp: tmp.write_text(self.description, encoding="utf-8"))
            total = self._stored_total()
            for key, data in items:
                size = footprint(len(data))
                if size > self.max_bytes:
                    continue
                path = self.path(key)
                old = self._size(path)
                if total - old + size > self.max_bytes:
                    total = self._recount(int(self.max_bytes * LOW_WATER) - size)
                    old = self._size(path)
                total += size - old
                self._write_total(total)
                write_atomically(path, lambda tmp: (tmp.write_bytes(data), self._stamp(tmp)))

    def _stamp(self, path: Path) -> None:
        """Set ``path``'s mtime to now (strictly later than this object's previous stamp); a vanished or read-only
        file keeps its own."""
        self._last_stamp = stamp = max(time.time_ns(), self._last_stamp + 1)
        try:
            os.utime(path, ns=(stamp, stamp))
        except OSError:
            pass

    def _size(self, path: Path) -> int:
        try:
            return footprint(path.stat().st_size)
        except FileNotFoundError:
            return 0

    def _stored_total(self) -> int:
        try:
            return int((self.folder / _TOTAL_FILE).read_text(encoding="ascii"))
        except (OSError, ValueError):  # none yet, or damaged: counted again
            total = self._recount(self.max_bytes)
            self._write_total(total)
            return total

    def _write_total(self, total: int) -> None:
        write_atomically(self.folder / _TOTAL_FILE, lambda tmp: tmp.write_text(str(total), encoding="ascii"))

    def _recount(self, target: int) -> int:
        """Remove the least recently used entries until at most ``target`` bytes are left (and every temporary
        file); the entries' total after it. A file that vanishes meanwhile is simply gone."""
        entries, total = [], 0
        with os.scandir(self.folder) as listing:
            for item in listing:
                try:
                    if item.name.endswith(_TEMPORARY):
                        os.unlink(item.path)
                    elif item.name.endswith(self.suffix) and item.name != DESCRIPTION_FILE:
                        info = item.stat()
                        entries.append((info.st_mtime_ns, item.name, footprint(info.st_size)))
                        total += entries[-1][2]
                except FileNotFoundError:
                    continue
        for _, name, size in sorted(entries):
            if total <= target:
                break
            try:
                os.unlink(self.folder / name)
            except FileNotFoundError:
                pass
            except OSError:  # cannot be removed now (e.g. open on Windows): still there, still counted
                continue
            total -= size
            self.evictions += 1
        return total
