"""Where a number came from: the weights a scorer loaded and the options that change its values, as a
``provenance`` dict and a compact ``hashcode`` string (as evaluate's BERTScore reports one).

Two scorers whose provenance differs (capeval version, metric, any weight's ``repo@commit`` or file hash, any
number-changing option, the device type, tiny random test weights) have different hashcodes; two loads of the
same configuration have equal ones, whatever the batch size, order or cache settings.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import warnings
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from capeval.core.constants import PROVENANCE_FILE, TINY_MARKER_FILE
from capeval.core.runtime import LruCache
from capeval.core.version import __version__

# options that do not change a single value: how fast, where cached (the device enters as its type)
NEUTRAL_OPTIONS = ("device", "batch_size", "cache_dir", "persist_dir", "image_cache_dir", "num_workers",
                   "preprocess_workers")
_FILE_HASHES: LruCache = LruCache(256)  # (path, size, mtime_ns) -> sha256 of a local weights file


class TinyWeightsWarning(UserWarning):
    """Tiny random test weights were loaded: the scores mean nothing."""


def _snapshot_of(directory: Path) -> Optional[Tuple[str, str]]:
    """``(repo_id, commit)`` of a Hugging Face cache snapshot directory (``…/models--org--name/snapshots/<commit>``
    or a folder inside one), else None."""
    parts = directory.parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i - 1].split("--", 1)[0] in ("models", "datasets", "spaces"):
            return parts[i - 1].split("--", 1)[1].replace("--", "/"), parts[i + 1]
    return None


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    known = _FILE_HASHES.get(key)
    if known is None:
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        known = digest.hexdigest()
        _FILE_HASHES.put(key, known)
    return known


def _tree_sha256(directory: Path) -> str:
    """One sha256 over every file below ``directory`` (relative path and content hash, in sorted order)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(directory).as_posix()}\0{_file_sha256(path)}\n".encode())
    return digest.hexdigest()


def describe_weights(ref: str, directory: os.PathLike) -> Dict[str, object]:
    """What ``directory`` (returned by :func:`capeval.core.hub.resolve` for ``ref``) holds: ``repo@commit`` of a hub
    snapshot, the upstream source and sha256 of weights converted from an official file, or the sha256 of a local
    folder; ``tiny_random_weights`` when it is a snapshot written by :mod:`capeval.testing`."""
    directory = Path(directory)
    entry: Dict[str, object] = {"ref": str(ref)}
    converted = directory / PROVENANCE_FILE
    snapshot = _snapshot_of(directory.absolute())
    if converted.is_file():
        entry["converted_from"] = json.loads(converted.read_text(encoding="utf-8"))
    elif snapshot is not None:
        entry["source"] = f"{snapshot[0]}@{snapshot[1]}"
    else:
        entry["source"] = f"local:{directory.resolve()}"
        entry["sha256"] = _tree_sha256(directory)
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


def build_provenance(metric: str, options: Mapping, loaded: Iterable[Tuple[str, os.PathLike]], scorer, *,
                     shared: Iterable[str] = ()) -> Dict[str, object]:
    """The provenance of ``scorer``, built as ``metric`` with ``options`` (effective, defaults included), having
    loaded ``loaded`` (``(ref, directory)`` pairs from :func:`capeval.core.hub.recording_resolutions`). Options named
    in ``shared`` are backbones passed in: their weights are described from their ``directory``."""
    weights: List[Dict[str, object]] = []
    seen = set()
    passed_in = [(name, options[name]) for name in shared if options.get(name) is not None]
    for ref, directory in [*loaded, *((name, getattr(obj, "directory", None)) for name, obj in passed_in)]:
        if directory is None or str(Path(directory).absolute()) in seen:
            continue
        seen.add(str(Path(directory).absolute()))
        weights.append(describe_weights(ref, directory))
    numeric = {name: _json_value(value) for name, value in sorted(options.items())
               if name not in NEUTRAL_OPTIONS and name not in shared and name != "dtype"}  # dtype: below
    provenance: Dict[str, object] = {"capeval": __version__, "metric": metric, "options": numeric, "weights": weights}
    dtype = _model_attribute(scorer, "dtype")
    if dtype is None and options.get("dtype") is not None:
        dtype = options["dtype"]
    if dtype is not None:
        provenance["dtype"] = str(dtype).replace("torch.", "")
    device = _model_attribute(scorer, "device")
    if device is not None:
        provenance["device_type"] = getattr(device, "type", str(device).split(":")[0])
    extras = getattr(scorer, "provenance_extras", None)
    if callable(extras):
        provenance.update(_json_value(extras()))
    provenance["tiny_random_weights"] = any(w["tiny_random_weights"] for w in weights)
    if provenance["tiny_random_weights"]:
        tiny = [w["ref"] for w in weights if w["tiny_random_weights"]]
        warnings.warn(f"{metric}: loaded TINY RANDOM TEST WEIGHTS ({', '.join(tiny)}): its scores mean nothing",
                      TinyWeightsWarning, stacklevel=3)
    return provenance


def _model_attribute(scorer, name: str):
    """``scorer.<name>``, else that of the model it wraps (``backbone``, ``clip``, ``extractor``)."""
    for holder in (scorer, *(getattr(scorer, part, None) for part in ("backbone", "clip", "extractor"))):
        value = getattr(holder, name, None)
        if value is not None:
            return value
    return None


def hashcode(provenance: Mapping) -> str:
    """``<metric>|capeval <version>|<16 hex of sha256 over the canonical provenance JSON>`` (``|TINY-RANDOM-WEIGHTS``
    appended for test weights)."""
    digest = hashlib.sha256(json.dumps(provenance, sort_keys=True).encode()).hexdigest()[:16]
    tiny = "|TINY-RANDOM-WEIGHTS" if provenance.get("tiny_random_weights") else ""
    return f"{provenance['metric']}|capeval {provenance['capeval']}|{digest}{tiny}"
