"""Helpers for offline tests: tiny random models in the Hugging Face hub-cache layout.

    populate_tiny_hub_cache(dir)  # then HF_HUB_CACHE=dir HF_HUB_OFFLINE=1

writes ``models--org--name/snapshots/<revision>/<files>`` and ``refs/main`` for every registered weight,
so every metric runs offline through its real loading code.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterable, Optional

from capeval.hub import WeightSpec, registered_weights

_SHA = re.compile(r"^[0-9a-f]{40}$")


def snapshot_revision(spec: WeightSpec) -> str:
    """The commit a cache entry is filed under: the pinned one, or a stable stand-in for branch names."""
    if _SHA.match(spec.revision):
        return spec.revision
    return hashlib.sha1(f"capeval-tiny:{spec.repo_id}@{spec.revision}".encode()).hexdigest()


def populate_tiny_hub_cache(cache_dir: os.PathLike, names: Optional[Iterable[str]] = None) -> Path:
    """Write a tiny random model for every registered weight (or only ``names``) into ``cache_dir``."""
    cache_dir = Path(cache_dir)
    weights = registered_weights()
    for name in names or weights:
        spec = weights[name]
        if spec.tiny_factory is None:
            continue
        repo_dir = cache_dir / ("models--" + spec.repo_id.replace("/", "--"))
        revision = snapshot_revision(spec)
        snapshot = repo_dir / "snapshots" / revision
        if snapshot.is_dir() and all((snapshot / f).exists() for f in spec.files):
            continue
        with tempfile.TemporaryDirectory(dir=cache_dir if cache_dir.exists() else None) as tmp:
            spec.tiny_factory(Path(tmp))
            missing = [f for f in spec.files if not (Path(tmp) / f).exists()]
            if missing:
                raise RuntimeError(f"tiny factory of {name!r} did not write {missing}")
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(snapshot, ignore_errors=True)
            shutil.copytree(tmp, snapshot)
        (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
        ref = "main" if _SHA.match(spec.revision) else spec.revision
        (repo_dir / "refs" / ref).write_text(revision)
    return cache_dir
