"""Registry of named weights and the single entry point that resolves them to local files.

A weight is addressed by a registry name (``"openai-clip-vit-b-32"``), a hub repo id (``"org/name"``,
optionally ``"org/name@revision"``) or a local directory. Hub downloads honour the Hugging Face cache,
``HF_HUB_OFFLINE`` and an explicit ``cache_dir``, and are tagged with the library name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence

from capeval.core.discovery import load_registrations
from capeval.core.errors import ModelNotAvailableError


@dataclass(frozen=True)
class WeightSpec:
    """One named set of weights: where it lives on the hub and what it is."""

    name: str
    repo_id: str
    revision: str
    files: Sequence[str]
    format: str  # "open_clip", "transformers", "safetensors", "json", ...
    license: str
    source_url: str
    description: str = ""
    options: Mapping[str, Any] = field(default_factory=dict, compare=False)  # family-specific loading options


_REGISTRY: Dict[str, WeightSpec] = {}


def register(spec: WeightSpec) -> WeightSpec:
    """Add ``spec`` to the registry (re-registering an identical spec is a no-op)."""
    existing = _REGISTRY.get(spec.name)
    if existing is not None and existing != spec:
        raise ValueError(f"weight name {spec.name!r} is already registered with a different spec")
    _REGISTRY[spec.name] = spec
    return spec


def registered_weights() -> Dict[str, WeightSpec]:
    """All registered weights, by name (imports every model family first)."""
    load_registrations()

    return dict(_REGISTRY)


def get_spec(name: str) -> WeightSpec:
    weights = registered_weights()
    if name not in weights:
        raise KeyError(f"unknown weight name {name!r}; known: {sorted(weights)}")
    return weights[name]


def default_cache_dir(cache_dir: Optional[os.PathLike] = None) -> Path:
    """capeval's own cache (embeddings, masks, generated images): argument → $CAPEVAL_CACHE → ~/.cache/capeval."""
    if cache_dir is not None:
        return Path(cache_dir)
    env = os.environ.get("CAPEVAL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "capeval"


def _split_revision(ref: str):
    if "@" in ref:
        repo_id, revision = ref.split("@", 1)
        return repo_id, revision
    return ref, None


def resolve(
    ref: str,
    files: Optional[Sequence[str]] = None,
    *,
    revision: Optional[str] = None,
    cache_dir: Optional[os.PathLike] = None,
) -> Path:
    """Return a local directory holding ``files`` of the weights ``ref``.

    ``ref`` is a local directory, a registry name, or a hub repo id (``org/name[@revision]``).
    For registry names the pinned revision and file list of the spec are used.
    """
    local = Path(ref).expanduser()
    if local.is_dir():
        missing = [f for f in (files or []) if not (local / f).exists()]
        if missing:
            raise ModelNotAvailableError(f"local weights directory {local} lacks {missing}")
        return local
    if ref in registered_weights():
        spec = _REGISTRY[ref]
        repo_id, revision, files = spec.repo_id, revision or spec.revision, list(files or spec.files)
    else:
        repo_id, pinned = _split_revision(ref)
        revision = revision or pinned
        if repo_id.count("/") != 1:
            raise ModelNotAvailableError(
                f"{ref!r} is neither a local directory, a registered weight name "
                f"({sorted(_REGISTRY)}) nor a hub repo id 'org/name'"
            )
    if not files:
        raise ValueError(f"no file list given for {ref!r}")
    return _download(repo_id, revision, files, cache_dir)


def _download(repo_id: str, revision: Optional[str], files: Sequence[str], cache_dir) -> Path:
    from huggingface_hub import hf_hub_download

    from capeval.core.version import __version__

    paths = []
    for filename in files:
        try:
            paths.append(
                hf_hub_download(
                    repo_id,
                    filename,
                    revision=revision,
                    cache_dir=cache_dir,
                    library_name="capeval",
                    library_version=__version__,
                )
            )
        except Exception as exc:  # offline, missing file, network: all end the same way for the user
            rev = revision or "main"
            raise ModelNotAvailableError(
                f"could not load {filename!r} of hub repo {repo_id!r} (revision {rev}): {exc.__class__.__name__}: {exc}\n"
                f"Fetch it on a machine with internet access with\n"
                f"    hf download {repo_id} --revision {rev}\n"
                f"and copy the Hugging Face cache (HF_HUB_CACHE) here, or pass a local directory instead. "
                f"For tests, capeval.testing.populate_tiny_hub_cache(dir) writes tiny random weights."
            ) from exc
    first = Path(paths[0])
    return first.parents[len(Path(files[0]).parts) - 1]


def load_safetensors(path: os.PathLike, *, device: str = "cpu") -> Dict[str, Any]:
    """The tensors of the safetensors file ``path`` (``safetensors.torch.load_file``); a file that is not a complete
    safetensors file (truncated download or copy, a Git LFS pointer, other bytes) raises
    :class:`ModelNotAvailableError` naming it, instead of safetensors' own error, which names no file."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device=device)
    except SafetensorError as exc:
        links = f" (a link to {Path(path).resolve()}: delete both)" if os.path.islink(path) else ""
        raise ModelNotAvailableError(
            f"weights file {path} is corrupt or truncated: not a complete safetensors file ({exc}). Delete it{links} "
            f"and download or convert it again"
        ) from exc
