"""The provenance sidecar ``<output>.provenance.json`` that ``capeval score``, ``capeval merge`` and
``capeval ray-score`` write beside each output: the hashcode and the full provenance of the scorer the numbers came
from, ``tiny_random_weights``, how many rows the output holds and, for a shard, its tag and stamp (``shard`` and
``shard_of``). Each output row carries the ``hashcode``; its sidecar says what that hashcode stands for."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Optional

from capeval.core.errors import InputError

SIDECAR_SUFFIX = ".provenance.json"
TINY_TAG = "TINY-RANDOM-WEIGHTS"  # what capeval.core.provenance.hashcode appends for tiny random test weights


def sidecar_path(output) -> Path:
    return Path(f"{os.fspath(output)}{SIDECAR_SUFFIX}")


def is_tiny(hashcode: Optional[str], provenance: Optional[Dict] = None) -> bool:
    """Whether numbers of this hashcode / provenance come from tiny random test weights (meaningless numbers)."""
    return bool((provenance or {}).get("tiny_random_weights")) or TINY_TAG in str(hashcode or "")


def identity(hashcode: Optional[str], provenance: Optional[Dict]) -> Dict:
    """The fields every summary and sidecar carries: ``hashcode``, ``tiny_random_weights`` and ``provenance``."""
    return {"hashcode": hashcode, "tiny_random_weights": is_tiny(hashcode, provenance), "provenance": provenance}


def write_sidecar(output, *, rows: int, hashcode: Optional[str], provenance: Optional[Dict], **extra) -> Path:
    """Write ``<output>.provenance.json`` (under a temporary name, then renamed: it appears complete or not at all)."""
    path = sidecar_path(output)
    partial = path.with_name(path.name + ".partial")
    content = {"output": Path(output).name, "rows": rows, **identity(hashcode, provenance), **extra}
    partial.write_text(json.dumps(content, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, path)
    return path


def remove_sidecar(output) -> None:
    """Drop a sidecar left beside an output folder by an earlier run (``ray-score`` writes into an empty folder)."""
    sidecar_path(output).unlink(missing_ok=True)


def read_sidecar(output) -> Dict:
    """The sidecar of ``output``; a missing or unreadable one is an :class:`InputError` naming it."""
    path = sidecar_path(output)
    if not path.is_file():
        raise InputError(f"{output} has no provenance sidecar {path.name} (written beside every `capeval score` "
                         "output): copy it along with the output, or score it again")
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a provenance sidecar ({exc})") from None
    if not isinstance(content, dict) or not {"rows", "hashcode", "provenance"} <= set(content):
        raise InputError(f"{path}: not a provenance sidecar (needs 'rows', 'hashcode' and 'provenance')")
    return content
