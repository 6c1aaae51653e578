"""HTTP(S) download of an upstream file: progress bar, resumable through a ``.part`` file (HTTP Range), sha256
computed while streaming and checked, atomic rename into place. A failure never leaves a file under the final name."""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from capeval.core.errors import ModelNotAvailableError

_CHUNK = 1 << 20


def _sha256_of(path: Path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest


def _open(url: str, offset: int, timeout: float):
    from capeval.core.version import __version__

    headers = {"User-Agent": f"capeval/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # the part file is already complete (or longer than the file): start over
            return None
        raise ModelNotAvailableError(f"could not download {url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ModelNotAvailableError(f"could not download {url}: {getattr(exc, 'reason', exc)}") from exc


def download(url: str, dest: os.PathLike, *, sha256: Optional[str] = None, timeout: float = 60.0) -> str:
    """Download ``url`` to ``dest`` and return the file's sha256 (hex).

    An existing ``dest.part`` is resumed with an HTTP Range request (a server ignoring Range restarts it). With
    ``sha256`` the file must hash to it: a mismatch deletes the part file and raises
    :class:`~capeval.core.errors.ModelNotAvailableError` naming both hashes. A connection that ends early keeps the
    part file (the next call resumes) and raises; ``dest`` itself only ever appears complete (atomic rename)."""
    from tqdm.auto import tqdm

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    offset = part.stat().st_size if part.exists() else 0
    response = _open(url, offset, timeout)
    if response is None:
        part.unlink()
        offset, response = 0, _open(url, 0, timeout)
    with response:
        if offset and response.status != 206:  # Range not honoured: the body is the whole file
            offset = 0
        if "text/html" in (response.headers.get("Content-Type") or ""):
            raise ModelNotAvailableError(f"{url} answered with an HTML page, not the file (a login, quota or "
                                         f"confirmation page?): download it by hand and pass it with --file")
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length is not None else None
        digest = _sha256_of(part) if offset else hashlib.sha256()
        received = offset
        with open(part, "ab" if offset else "wb") as out, tqdm(total=total, initial=offset, unit="B",
                                                                 unit_scale=True, desc=dest.name) as bar:
            while True:
                try:
                    block = response.read(_CHUNK)
                except (OSError, ValueError, http.client.HTTPException) as exc:  # reset, incomplete read
                    raise ModelNotAvailableError(f"download of {url} broke off after {received} bytes ({exc}); "
                                                 f"run again to resume from {part}") from exc
                if not block:
                    break
                out.write(block)
                digest.update(block)
                received += len(block)
                bar.update(len(block))
    if total is not None and received < total:
        raise ModelNotAvailableError(f"download of {url} ended after {received} of {total} bytes; run again to "
                                     f"resume from {part}")
    actual = digest.hexdigest()
    if sha256 is not None and actual != sha256.lower():
        part.unlink()
        raise ModelNotAvailableError(f"{url}: downloaded file has sha256 {actual}, expected {sha256.lower()}: "
                                     f"refused and deleted")
    os.replace(part, dest)
    return actual
