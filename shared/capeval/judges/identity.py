"""What a local judge folder is: the sha256 of its files' content, the one mechanism behind every judge's model id
(a FLEUR folder, a merged EXPERT folder, an EXPERT adapter or base folder). A hub snapshot is named by its
``repo@commit`` instead (the hub names its blobs by their content); a local folder by ``local:`` and the digest of
its files, so a cache keyed by the model id outlives no change of the weights, tokenizer or configs. Weights not
loaded (a replay) are named as they would load (:func:`unloaded_model_id`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Dict, Mapping, Optional, Sequence

from capeval.core.caches import LruCache
from capeval.core.constants import MERGE_RECORD, PROVENANCE_FILE, TINY_MARKER_FILE
from capeval.core.hashing import file_sha256
from capeval.core.hub import cached_location, hub_snapshot_of, registered_weights

TINY_SUFFIX = "+tiny-random"  # ends the model id of capeval's tiny random test weights
# beside the weights, what does not change an answer: model cards, capeval's own records, the tiny marker (it
# enters the id as TINY_SUFFIX)
NOT_CONTENT = ("README.md", ".gitattributes", PROVENANCE_FILE, TINY_MARKER_FILE, MERGE_RECORD)
# (resolved path, inode, size, mtime_ns, ctime_ns) -> sha256: a file rewritten since (even in place) is hashed again
_HASHES: LruCache = LruCache(4096)


def _stat_key(path: Path) -> tuple:
    stat = path.stat()
    return str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def content_sha256(path: Path, recorded: Optional[Mapping] = None) -> str:
    """sha256 of a file's content: the name of the hub-cache blob it links to; the sha256 ``recorded`` for it
    (``{"sha256", "bytes", "mtime_ns"}``, as :func:`capeval.core.hub.recorded_files` writes) while its size and
    modification time are those recorded; else its bytes hashed (once per process while the file is unchanged)."""
    path = Path(path)
    target = path.resolve()
    if path.is_symlink() and target.parent.name == "blobs" and len(target.name) == 64:
        return target.name
    stat = path.stat()
    if recorded and (recorded.get("bytes"), recorded.get("mtime_ns")) == (stat.st_size, stat.st_mtime_ns):
        return str(recorded["sha256"])
    key = _stat_key(path)
    known = _HASHES.get(key)
    if known is None:
        known = file_sha256(path)
        _HASHES.put(key, known)
    return known


def content_files(directory: Path) -> Sequence[str]:
    """The files of a folder that make its answers (relative POSIX paths, sorted): every file but model cards,
    capeval's records and hidden folders."""
    directory = Path(directory)
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")
                  if p.is_file() and p.name not in NOT_CONTENT
                  and not any(part.startswith(".") for part in p.relative_to(directory).parts))


def folder_content(directory: Path, names: Optional[Sequence[str]] = None,
                   recorded: Optional[Mapping[str, Mapping]] = None) -> Dict[str, str]:
    """``{file: sha256}`` of ``names`` (default: :func:`content_files`) in ``directory``."""
    directory = Path(directory)
    names = content_files(directory) if names is None else names
    return {name: content_sha256(directory / name, (recorded or {}).get(name)) for name in names}


def content_digest(parts: Mapping[str, str]) -> str:
    """One sha256 over ``{name: sha256}``."""
    return hashlib.sha256(json.dumps(dict(parts), sort_keys=True).encode()).hexdigest()


def tiny_suffix(directory: Path) -> str:
    return TINY_SUFFIX if (Path(directory) / TINY_MARKER_FILE).exists() else ""


def is_tiny_model_id(model_id) -> bool:
    """Whether a judge's model id names tiny random test weights (any of its parts)."""
    return TINY_SUFFIX in str(model_id or "")


def folder_model_id(directory: Path, parts=None) -> str:
    """``repo@commit`` of a hub snapshot, else ``local:`` and the digest of the folder's content (``parts()``:
    ``{name: sha256}``, default :func:`folder_content`); :data:`TINY_SUFFIX` for capeval's test weights."""
    directory = Path(directory)
    snapshot = hub_snapshot_of(directory)
    if snapshot is not None:
        return f"{snapshot[0]}@{snapshot[1]}{tiny_suffix(directory)}"
    content = parts() if parts is not None else folder_content(directory)
    return f"local:{content_digest(content)[:16]}{tiny_suffix(directory)}"


def unloaded_model_id(ref: str, id_of: Callable[[Path], str]) -> str:
    """The id of weights ``ref`` without loading them: ``id_of`` its folder when it is one, or when it is a registry
    name whose snapshot is in the cache; else the registered ``repo@revision``, or ``ref`` as given (a hub id)."""
    local = Path(ref).expanduser()
    if local.is_dir():
        return id_of(local)
    spec = registered_weights().get(ref)
    if spec is None:
        return ref
    found = cached_location(spec)
    return id_of(found) if found is not None else f"{spec.repo_id}@{spec.revision}"
