"""Where a number came from: the weights a scorer loaded and the options that change its values, as a
``provenance`` dict and a compact ``hashcode`` string (as evaluate's BERTScore reports one).

Two scorers whose provenance differs (capeval version, metric, the content of any weight's files, any number-changing
option, the device type, tiny random test weights) have different hashcodes; two loads of the same configuration have
equal ones, whatever the batch size, order or cache settings, and whatever spelling named the weights (registry name,
hub id with or without revision, cache or local folder): a weight enters the hashcode by its files' sha256 only.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import warnings
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from capeval.core.constants import MERGE_RECORD, PROVENANCE_FILE, TINY_MARKER_FILE
from capeval.core.hashing import file_sha256
from capeval.core.hub import hub_snapshot_of, registered_spec_of
from capeval.core.caches import LruCache
from capeval.core.version import __version__

# options that do not change a single value: how fast, where cached (the device enters as its type)
NEUTRAL_OPTIONS = ("device", "batch_size", "cache_dir", "persist_dir", "image_cache_dir", "num_workers",
                   "preprocess_workers", "cache_bytes", "judge_cache")
# (path, inode, size, mtime_ns, ctime_ns) -> sha256 of a local weights file: a rewrite (even of the same size within
# one clock tick, or by a rename over it) changes the inode or the ctime
_FILE_HASHES: LruCache = LruCache(256)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# files beside the weights that do not change a number: model cards, git metadata, capeval's own records
# records beside the weights, not weights (EXPERT's merge record holds file times: the same merge twice differs)
_NOT_WEIGHTS = ("README.md", ".gitattributes", PROVENANCE_FILE, TINY_MARKER_FILE, MERGE_RECORD)


class TinyWeightsWarning(UserWarning):
    """Tiny random test weights were loaded: the scores mean nothing."""


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    known = _FILE_HASHES.get(key)
    if known is None:
        known = file_sha256(path)
        _FILE_HASHES.put(key, known)
    return known


def _content_sha256(path: Path, recorded: Mapping[str, Mapping]) -> str:
    """The sha256 of ``path``'s content: the name of the Hugging Face cache blob it links to (the hub names LFS
    blobs by their sha256), the hash recorded at conversion for a file of that size and modification time (one
    rewritten in place since is not the file it describes), else hashed here."""
    if path.is_symlink():
        target = path.resolve()
        if target.parent.name == "blobs" and _SHA256.match(target.name):
            return target.name
    known, stat = recorded.get(path.name), path.stat()
    if isinstance(known, Mapping) and (known.get("bytes"), known.get("mtime_ns")) == (
            stat.st_size, stat.st_mtime_ns) and _SHA256.match(str(known.get("sha256"))):
        return str(known["sha256"])
    return _file_sha256(path)


def _weight_files(ref: str, directory: Path) -> List[Path]:
    """The files that make the weights: a registered weight's own file list, else every file below ``directory``
    but model cards, capeval's records and hidden folders (``.cache`` of ``hf download --local-dir``)."""
    spec = registered_spec_of(ref, directory)
    if spec is not None and all((directory / name).is_file() for name in spec.files):
        return [directory / name for name in spec.files]
    return [path for path in directory.rglob("*") if path.is_file() and path.name not in _NOT_WEIGHTS
            and not any(part.startswith(".") for part in path.relative_to(directory).parts)]


def _tree_sha256(ref: str, directory: Path, recorded: Mapping[str, Mapping]) -> str:
    """One sha256 over the weights' files (relative path and content hash, in sorted order)."""
    digest = hashlib.sha256()
    for path in sorted(_weight_files(ref, directory), key=lambda p: p.relative_to(directory).as_posix()):
        digest.update(f"{path.relative_to(directory).as_posix()}\0{_content_sha256(path, recorded)}\n".encode())
    return digest.hexdigest()


def describe_weights(ref: str, directory: os.PathLike) -> Dict[str, object]:
    """What ``directory`` (returned by :func:`capeval.core.hub.resolve` for ``ref``) holds: ``repo@commit`` of a hub
    snapshot, the upstream source of weights converted from an official file, or the path of a local folder; the
    ``sha256`` of its weight files (what the hashcode covers); ``tiny_random_weights`` when it is a snapshot written
    by :mod:`capeval.testing`."""
    directory = Path(directory)
    entry: Dict[str, object] = {"ref": str(ref)}
    converted = directory / PROVENANCE_FILE
    snapshot = hub_snapshot_of(directory)
    recorded: Mapping[str, Mapping] = {}
    if converted.is_file():
        entry["converted_from"] = json.loads(converted.read_text(encoding="utf-8"))
        recorded = entry["converted_from"].pop("files", None) or {}
    elif snapshot is not None:
        entry["source"] = f"{snapshot[0]}@{snapshot[1]}"
    else:
        entry["source"] = f"local:{directory.resolve()}"
    entry["sha256"] = _tree_sha256(str(ref), directory, recorded)
    entry["tiny_random_weights"] = (directory / TINY_MARKER_FILE).exists()
    return entry


def _json_value(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    text = str(value)  # an object (e.g. fixed document frequencies): its type and a digest of its deterministic repr
    return f"{type(value).__name__}:{hashlib.sha256(text.encode()).hexdigest()[:16]}" if len(text) > 200 else text


def effective_options(factory, options: Mapping) -> Dict[str, object]:
    """The factory's keyword defaults overridden by ``options``: passing a default explicitly or not is the same."""
    merged = {name: parameter.default for name, parameter in inspect.signature(factory).parameters.items()
              if parameter.default is not inspect.Parameter.empty}
    merged.update(options)
    return merged


def build_provenance(metric: str, options: Mapping, loaded: Iterable[Tuple[str, os.PathLike]],
                     parts: Optional[Sequence[object]], *, shared: Iterable[str] = ()) -> Dict[str, object]:
    """The provenance of a scorer built as ``metric`` with ``options`` (effective, defaults included), having loaded
    ``loaded`` (``(ref, directory)`` pairs from :func:`capeval.core.hub.recording_resolutions`). ``parts``: what the
    scorer says describes it (:meth:`capeval.core.scoring.Scorer.provenance_parts`: itself, then the models it wraps;
    ``None`` without a scorer): the first ``dtype`` and ``device`` among them, and each one's ``provenance_extras()``.
    Options named in ``shared`` are backbones passed in: their weights are described from their ``directory``."""
    parts = tuple(parts or ())
    by_directory: Dict[str, Dict[str, object]] = {}
    passed_in = [(name, options[name]) for name in shared if options.get(name) is not None]
    for ref, directory in [*loaded, *((name, getattr(obj, "directory", None)) for name, obj in passed_in)]:
        if directory is None:
            continue
        key = str(Path(directory).absolute())
        if key not in by_directory:
            by_directory[key] = describe_weights(ref, directory)
        entry = by_directory[key]
        named_by = {name for name, value in options.items() if isinstance(value, (str, os.PathLike))
                    and name not in shared and str(value) == str(ref)}
        if named_by:  # in the hashcode these options count as the weights' content, not as their spelling
            entry["named_by"] = sorted(named_by.union(entry.get("named_by", ())))
    weights: List[Dict[str, object]] = list(by_directory.values())
    numeric = {name: _json_value(value) for name, value in sorted(options.items())
               if name not in NEUTRAL_OPTIONS and name not in shared and name != "dtype"}  # dtype: below
    provenance: Dict[str, object] = {"capeval": __version__, "metric": metric, "options": numeric, "weights": weights}
    dtype = _first(parts, "dtype")
    if dtype is None and options.get("dtype") is not None:
        dtype = options["dtype"]
    if dtype is not None:
        provenance["dtype"] = str(dtype).replace("torch.", "")
    device = _first(parts, "device")
    if device is not None:
        provenance["device_type"] = getattr(device, "type", str(device).split(":")[0])
    for part in parts:  # the scorer's own, then the models it wraps (a CLIP's forwards)
        extras = getattr(part, "provenance_extras", None)
        if callable(extras):
            provenance.update(_json_value(extras()))
    # a scorer's extras may say so too: a judge replaying records written with test weights loads none
    provenance["tiny_random_weights"] = any(w["tiny_random_weights"] for w in weights) \
        or provenance.get("tiny_random_weights") is True
    if provenance["tiny_random_weights"]:
        tiny = [w["ref"] for w in weights if w["tiny_random_weights"]] or ["replayed judge records"]
        warnings.warn(f"{metric}: loaded TINY RANDOM TEST WEIGHTS ({', '.join(tiny)}): its scores mean nothing",
                      TinyWeightsWarning, stacklevel=3)
    return provenance


def _first(parts: Sequence[object], name: str):
    """The first part's ``<name>`` that is set (the scorer's own, else that of a model it wraps)."""
    for part in parts:
        value = getattr(part, name, None)
        if value is not None:
            return value
    return None


def identity(provenance: Mapping) -> Dict[str, object]:
    """What the hashcode covers: ``provenance`` with each weight reduced to its content (``sha256``, tiny flag) and
    each option that named a weight replaced by that content, so every spelling of the same weights is one identity."""
    weights = provenance.get("weights", [])
    content = {option: f"sha256:{entry.get('sha256')}" for entry in weights for option in entry.get("named_by", ())}
    options = {name: content.get(name, value) for name, value in provenance.get("options", {}).items()}
    return {**provenance, "options": options,
            "weights": [{"sha256": entry.get("sha256"), "tiny_random_weights": entry.get("tiny_random_weights")}
                        for entry in weights]}


def hashcode(provenance: Mapping) -> str:
    """``<metric>|capeval <version>|<16 hex of sha256 over the canonical JSON of its identity>``
    (:func:`identity`; ``|TINY-RANDOM-WEIGHTS`` appended for test weights)."""
    digest = hashlib.sha256(json.dumps(identity(provenance), sort_keys=True).encode()).hexdigest()[:16]
    tiny = "|TINY-RANDOM-WEIGHTS" if provenance.get("tiny_random_weights") else ""
    return f"{provenance['metric']}|capeval {provenance['capeval']}|{digest}{tiny}"
