"""Registry of named weights and the single entry point that resolves them to local files.

A weight is addressed by a registry name (``"openai-clip-vit-b-32"``), a hub repo id (``"org/name"``,
optionally ``"org/name@revision"``) or a local directory. Hub downloads honour the Hugging Face cache,
``HF_HUB_OFFLINE`` and an explicit ``cache_dir``, and are tagged with the library name.

A weight converted from an authors' file names its :class:`Upstream`; :func:`resolve` then looks in the Hugging Face
cache, in capeval's converted-weights cache (``<capeval cache>/weights/<name>``), on the hub (capeval's repo at its
revision), and finally downloads the authors' file (:mod:`capeval.core.download`: resumable, sha256-checked),
converts it with its registered converter and caches the result with a provenance JSON beside it.
"""

from __future__ import annotations

import contextvars
import fnmatch
import json
import os
import posixpath
import re
import shutil
import stat
import tempfile
import warnings
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from capeval.core.constants import PROVENANCE_FILE
from capeval.core.discovery import add_registered, load_registrations
from capeval.core.errors import ModelNotAvailableError
from capeval.core.hashing import file_sha256

MIRROR_ENV = "CAPEVAL_UPSTREAM_MIRROR"  # base URL serving every upstream file by its name (a mirror; tests)
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class Upstream:
    """The authors' own file a converted weight is made from."""

    filename: str  # the official file's name (also its name on a mirror)
    converter: str  # the registered converter (`capeval convert <converter>`) turning it into the weight's files
    url: Optional[str] = None  # a direct download link; None: the authors publish no direct link (see ``page``)
    sha256: Optional[str] = None  # the published sha256 of the file, checked before conversion
    page: str = ""  # where the authors publish the file (README / model zoo)
    member: Optional[str] = None  # for a zip archive: the pattern of the one member to convert (e.g. "*.ckpt")
    beside: Tuple[str, ...] = ()  # files next to ``member`` in the archive the converter reads too, when present


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
    upstream: Optional[Upstream] = None  # the authors' file this weight is converted from (capeval repos)

    @property
    def pinned(self) -> bool:
        """Whether the hub revision is a commit (not a branch such as ``main``)."""
        return bool(_COMMIT.match(self.revision))


_REGISTRY: Dict[str, WeightSpec] = {}


def register(spec: WeightSpec) -> WeightSpec:
    """Add ``spec`` to the registry (re-registering an identical spec is a no-op)."""
    return add_registered(_REGISTRY, spec)


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


# the lists of the active `recording_resolutions()` blocks of this context (thread / task)
_RECORDERS: contextvars.ContextVar = contextvars.ContextVar("capeval_weight_recorders", default=())


@contextmanager
def recording_resolutions() -> Iterator[List[Tuple[str, Path]]]:
    """Collect ``(ref, directory)`` for every :func:`resolve` inside the block (nested blocks all see them): how
    :func:`capeval.core.scoring.load_scorer` learns which weights a scorer loaded."""
    loaded: List[Tuple[str, Path]] = []
    token = _RECORDERS.set(_RECORDERS.get() + (loaded,))
    try:
        yield loaded
    finally:
        _RECORDERS.reset(token)


@contextmanager
def unrecorded() -> Iterator[None]:
    """:func:`resolve` inside the block is not recorded: for a folder made from weights already recorded (a merged
    judge is its base and adapter, which the provenance names)."""
    token = _RECORDERS.set(())
    try:
        yield
    finally:
        _RECORDERS.reset(token)


def _recorded(ref: str, directory: Path) -> Path:
    for loaded in _RECORDERS.get():
        loaded.append((ref, directory))
    return directory


def hub_snapshot_of(directory: os.PathLike) -> Optional[Tuple[str, str]]:
    """``(repo_id, commit)`` of a Hugging Face cache snapshot directory (``…/models--org--name/snapshots/<commit>``
    or a folder inside one), else None."""
    parts = Path(directory).absolute().parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i - 1].split("--", 1)[0] in ("models", "datasets", "spaces"):
            return parts[i - 1].split("--", 1)[1].replace("--", "/"), parts[i + 1]
    return None


def registered_spec_of(ref: str, directory: Optional[os.PathLike] = None) -> Optional[WeightSpec]:
    """The registered weight ``ref`` (resolved to ``directory``) is, whatever its spelling: its registry name, its hub
    repo id (any revision), a Hugging Face cache snapshot of that repo, or capeval's converted folder of it (or a copy
    of that folder: its provenance JSON names the weight); None for other weights."""
    weights = registered_weights()
    if ref in weights:
        return weights[ref]
    by_repo = {spec.repo_id: spec for spec in weights.values()}
    repo_id = _split_revision(ref)[0]
    if repo_id in by_repo and not Path(ref).expanduser().is_dir():
        return by_repo[repo_id]
    if directory is None:
        return None
    snapshot = hub_snapshot_of(directory)
    if snapshot is not None:
        return by_repo.get(snapshot[0])
    record = Path(directory) / PROVENANCE_FILE
    if record.is_file():
        try:
            name = json.loads(record.read_text(encoding="utf-8")).get("weight")
        except (ValueError, AttributeError):
            name = None
        if name in weights:
            return weights[name]
    resolved = Path(directory).resolve()
    return next((spec for spec in weights.values() if spec.upstream is not None
                 and converted_dir(spec.name).resolve() == resolved), None)


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
        return _recorded(ref, local)
    if ref in registered_weights():
        spec = _REGISTRY[ref]
        if spec.upstream is not None and revision is None:
            return _recorded(ref, _resolve_converted(spec, list(files or spec.files), cache_dir))
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
    fetch = f"capeval fetch {ref}" if ref in _REGISTRY else None
    directory = _download(repo_id, revision, files, cache_dir, fetch=fetch)
    if not _COMMIT.match(revision or "main"):
        _warn_unpinned(ref, repo_id, revision or "main", directory)
    return _recorded(ref, directory)


class UnpinnedWeightsWarning(UserWarning):
    """Weights were loaded from a hub branch (``main``), not a pinned commit: another day it may be another model."""


_UNPINNED_WARNED: set = set()  # (repo_id, revision, commit) already warned about in this process (≤ 1024 kept)


def _warn_unpinned(ref: str, repo_id: str, revision: str, directory: Path) -> None:
    snapshot = hub_snapshot_of(directory)
    commit = snapshot[1] if snapshot is not None else "unknown"
    if (repo_id, revision, commit) in _UNPINNED_WARNED:
        return
    if len(_UNPINNED_WARNED) < 1024:
        _UNPINNED_WARNED.add((repo_id, revision, commit))
    warnings.warn(f"weights {ref!r} are not pinned to a commit: loaded {repo_id}@{commit} (the commit {revision!r} "
                  f"named when it was fetched; results record it)", UnpinnedWeightsWarning, stacklevel=3)


def is_offline() -> bool:
    """``HF_HUB_OFFLINE`` is set: no hub request and no upstream download."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def converted_dir(name: str) -> Path:
    """Where capeval caches the weight ``name`` converted from its upstream file."""
    return default_cache_dir() / "weights" / name


def downloads_dir() -> Path:
    """Where upstream files are downloaded (``.part`` while incomplete, so a later call resumes them)."""
    return default_cache_dir() / "downloads"


def _complete(directory: Path, files: Sequence[str]) -> bool:
    return directory.is_dir() and (directory / PROVENANCE_FILE).is_file() and all((directory / f).is_file()
                                                                                 for f in files)


def cached_location(spec: WeightSpec) -> Optional[Path]:
    """The local directory holding every file of ``spec`` (hub cache or converted cache), without any network."""
    try:
        return _download(spec.repo_id, spec.revision, list(spec.files), None, local_only=True)
    except ModelNotAvailableError:
        pass
    converted = converted_dir(spec.name)
    return converted if spec.upstream is not None and _complete(converted, spec.files) else None


def fetch_command(spec: WeightSpec) -> str:
    """The command that makes ``spec`` available offline (run it on a machine with internet access)."""
    if spec.upstream is not None and spec.upstream.url is None:
        return f"capeval fetch {spec.name} --file {spec.upstream.filename}"
    return f"capeval fetch {spec.name}"


def _resolve_converted(spec: WeightSpec, files: List[str], cache_dir) -> Path:
    """Hub cache → converted cache → capeval's hub repo → the authors' file, downloaded and converted."""
    try:
        return _download(spec.repo_id, spec.revision, files, cache_dir, local_only=True)
    except ModelNotAvailableError:
        pass
    converted = converted_dir(spec.name)
    if _complete(converted, files):
        return converted
    if is_offline():
        raise ModelNotAvailableError(
            f"weights {spec.name!r} are not in the Hugging Face cache nor in capeval's cache ({converted}), and "
            f"HF_HUB_OFFLINE is set. On a machine with internet access run\n    {fetch_command(spec)}\n"
            f"(it downloads {spec.upstream.filename} from {spec.upstream.url or spec.upstream.page} and converts "
            f"it), then copy {converted} to the same place here ($CAPEVAL_CACHE/weights/{spec.name})."
        )
    try:
        return _download(spec.repo_id, spec.revision, files, cache_dir)
    except ModelNotAvailableError:
        pass
    return fetch_upstream(spec)


def recorded_files(folder: Path, names: Sequence[str]) -> Dict[str, Dict[str, object]]:
    """What a conversion record says of each file it wrote: sha256, size and modification time (the provenance
    takes the recorded sha256 only for a file of that size and time, so a file rewritten in place is hashed again)."""
    record = {}
    for name in names:
        info = (folder / name).stat()
        record[name] = {"sha256": file_sha256(folder / name), "bytes": info.st_size, "mtime_ns": info.st_mtime_ns}
    return record


def locks_dir() -> Path:
    """Where the inter-process locks of fetches live (one per weight)."""
    return default_cache_dir() / "locks"


def _writable(directory: Path) -> Path:
    """``directory``, created if needed; a folder capeval cannot write to is a one-line error naming it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise ModelNotAvailableError(f"cannot write to capeval's cache folder {directory} ({exc.strerror or exc}): "
                                     f"set CAPEVAL_CACHE to a writable folder") from exc
    return directory


def fetch_upstream(spec: WeightSpec, *, file: Optional[os.PathLike] = None) -> Path:
    """Download ``spec``'s upstream file (or take the local ``file``), check its sha256, convert it with the
    registered converter and cache the result with a provenance JSON; return the converted directory.

    ``$CAPEVAL_UPSTREAM_MIRROR``, when set, is a base URL serving the official files by name (a mirror of your own;
    tests). Processes fetching the same weight take turns (a file lock): the later ones find it converted. A failure
    leaves no converted directory; only an interrupted download's ``.part`` file stays, to be resumed."""
    upstream = spec.upstream
    if upstream is None:
        raise ValueError(f"weights {spec.name!r} have no upstream file: they are fetched from the hub")
    mirror = os.environ.get(MIRROR_ENV)
    url = f"{mirror.rstrip('/')}/{upstream.filename}" if mirror else upstream.url
    if file is not None and not Path(file).is_file():
        raise ModelNotAvailableError(f"{file}: no such file (the official {upstream.filename} for {spec.name!r})")
    if file is None and url is None:
        raise ModelNotAvailableError(
            f"the authors publish {upstream.filename} ({spec.name!r}) without a direct download link: download it by "
            f"hand from {upstream.page}, then run\n    capeval fetch {spec.name} --file <path to {upstream.filename}>")
    from capeval.core.download import file_lock

    target = converted_dir(spec.name)
    for folder in (locks_dir(), target.parent, *(() if file is not None else (downloads_dir(),))):
        _writable(folder)
    with file_lock(locks_dir() / f"{spec.name}.lock"):
        if file is None and _complete(target, spec.files):  # another process fetched it meanwhile
            return target
        if file is not None:
            return _convert_official(spec, Path(file), file_sha256(Path(file)), f"local file {Path(file).name}")
        from capeval.core.download import download

        official = downloads_dir() / upstream.filename
        sha256 = download(url, official, sha256=upstream.sha256)
        try:
            return _convert_official(spec, official, sha256, url)
        finally:  # the converted weights are what is kept; a refused file is not kept for a later resume
            official.unlink(missing_ok=True)


def _convert_official(spec: WeightSpec, official: Path, sha256: str, origin: str) -> Path:
    """Check the official file's sha256 and kind, convert it, and put the result with its provenance in place."""
    from capeval.core.convert import convert
    from capeval.core.download import looks_like_html
    from capeval.core.version import __version__

    upstream = spec.upstream
    with open(official, "rb") as handle:
        if looks_like_html(handle.read(64)):
            raise ModelNotAvailableError(f"{official} (from {origin}) is an HTML page, not {upstream.filename}: a "
                                         f"server returned a web page (login, quota or error page?) instead of it")
    if upstream.sha256 and sha256 != upstream.sha256:
        raise ModelNotAvailableError(f"{official}: sha256 {sha256} differs from the published {upstream.sha256} "
                                     f"of {upstream.filename}: not the official file")
    target = converted_dir(spec.name)
    with tempfile.TemporaryDirectory(prefix=f".{spec.name}-", dir=target.parent) as tmp:
        source = _archive_member(official, upstream, Path(tmp) / "official") if upstream.member else official
        out = Path(tmp) / "out"
        convert(upstream.converter, source, out)
        missing = [f for f in spec.files if not (out / f).is_file()]
        if missing:
            raise ModelNotAvailableError(f"converter {upstream.converter!r} did not write {missing}")
        (out / PROVENANCE_FILE).write_text(json.dumps({
            "weight": spec.name, "source": upstream.url or upstream.page, "file": upstream.filename, "sha256": sha256,
            "converter": upstream.converter, "capeval_version": __version__, "downloaded_from": origin,
            "files": recorded_files(out, spec.files),
        }, indent=2))
        shutil.rmtree(target, ignore_errors=True)
        os.replace(out, target)
    return target


def _archive_member(archive: Path, upstream: Upstream, out_dir: Path) -> Path:
    """Extract the one member of the zip ``archive`` matching ``upstream.member`` (and its ``beside`` files) into
    ``out_dir`` under their base names (never a path taken from the archive)."""
    if not zipfile.is_zipfile(archive):
        raise ModelNotAvailableError(f"{archive}: not a zip archive (expected {upstream.filename})")
    with zipfile.ZipFile(archive) as zf:
        names = [n for n in zf.namelist() if not n.endswith("/")]
        matches = [n for n in names if fnmatch.fnmatch(n.rsplit("/", 1)[-1], upstream.member)]
        if len(matches) != 1:
            raise ModelNotAvailableError(f"{archive}: expected one member matching {upstream.member!r}, found "
                                         f"{matches or 'none'}")
        folder = matches[0].rsplit("/", 1)[0] + "/" if "/" in matches[0] else ""
        wanted = [matches[0]] + [folder + b for b in upstream.beside if folder + b in names]
        out_dir.mkdir(parents=True)
        for name in wanted:
            with zf.open(_link_target(zf, archive, name, names)) as src, \
                    open(out_dir / name.rsplit("/", 1)[-1], "wb") as dst:
                shutil.copyfileobj(src, dst)
    return out_dir / matches[0].rsplit("/", 1)[-1]


def _link_target(zf: zipfile.ZipFile, archive: Path, name: str, names: Sequence[str]) -> str:
    """The member whose content ``name`` has: a symbolic-link entry (a Unix zip stores the link's target path as its
    content) is followed inside the archive; a link leading out of it, nowhere or in a loop is refused."""
    seen = []
    while stat.S_ISLNK(zf.getinfo(name).external_attr >> 16):
        seen.append(name)
        link = zf.read(name).decode("utf-8", "replace")
        target = posixpath.normpath(posixpath.join(posixpath.dirname(name), link))
        if target not in names or target in seen:
            raise ModelNotAvailableError(f"{archive}: {name} is a link to {link}, which is not a file of the archive")
        name = target
    return name


def _download(repo_id: str, revision: Optional[str], files: Sequence[str], cache_dir, *, local_only: bool = False,
              fetch: Optional[str] = None) -> Path:
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
                    local_files_only=local_only,
                )
            )
        except Exception as exc:  # offline, missing file, network: all end the same way for the user
            rev = revision or "main"
            command = fetch or f"hf download {repo_id} --revision {rev}"
            raise ModelNotAvailableError(
                f"could not load {filename!r} of hub repo {repo_id!r} (revision {rev}): {exc.__class__.__name__}: {exc}\n"
                f"Fetch it on a machine with internet access with\n"
                f"    {command}\n"
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
