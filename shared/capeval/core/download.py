"""HTTP(S) download of an upstream file: progress bar, resumable through a ``.part`` file (HTTP Range), sha256
computed while streaming and checked, atomic rename into place. A failure never leaves a file under the final name.

A ``.part`` file is resumed only against the version of the file it was started from: the validator the server sent
then (a strong ``ETag``, else a strong ``Last-Modified``) is kept beside it in ``.part.json`` and sent as ``If-Range``, so a
server now serving another version answers with the whole new file, which replaces the part. A part started without
a validator, or whose record is missing, or a range whose response names no version or another one, is downloaded
again from the start: the bytes of one file always come from
one version of it."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import urllib.error
import urllib.request
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Iterator, Optional, Tuple

from capeval.core.errors import ModelNotAvailableError
from capeval.core.hashing import sha256_of

_CHUNK = 1 << 20
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body")


def looks_like_html(head: bytes) -> bool:
    """Whether the first bytes of a file are an HTML page (a login, quota or error page served in its place)."""
    return head.lstrip().lower().startswith(_HTML_STARTS)


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive inter-process lock on ``path`` (created if needed) for the block."""
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path)):
        yield


def _validator(headers) -> Optional[str]:
    """What identifies this version of the file: a strong ETag (``If-Range`` takes no weak one), else a strong
    Last-Modified (at least a second before the response's Date, RFC 9110 8.8.2.2: an earlier date could name two
    versions written within that second); None when the response names no version."""
    etag = headers.get("ETag")
    if etag and not etag.startswith("W/"):
        return etag
    modified, date = headers.get("Last-Modified"), headers.get("Date")
    try:
        strong = (parsedate_to_datetime(date) - parsedate_to_datetime(modified)).total_seconds() >= 1
    except (TypeError, ValueError):
        return None
    return modified if strong else None


def _open(url: str, offset: int, validator: Optional[str], timeout: float):
    from capeval.core.version import __version__

    headers = {"User-Agent": f"capeval/{__version__}"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        headers["If-Range"] = validator
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:  # the part file is already complete (or longer than the file): start over
            return None
        raise ModelNotAvailableError(f"could not download {url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ModelNotAvailableError(f"could not download {url}: {getattr(exc, 'reason', exc)}") from exc


def _resumable(part: Path, record: Path, url: str) -> Tuple[int, Optional[str]]:
    """(bytes to resume from, validator of their version); (0, None) after deleting a part that cannot be resumed
    (no record, another URL, no validator)."""
    try:
        started = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        started = {}
    validator = started.get("validator") if isinstance(started, dict) and started.get("url") == url else None
    if part.exists() and validator:
        return part.stat().st_size, validator
    part.unlink(missing_ok=True)
    record.unlink(missing_ok=True)
    return 0, None


def _same_version(response, offset: int, validator: str) -> bool:
    """Whether ``response`` continues the part: 206 from ``offset`` on, of the version the part was started from
    (a server that ignores ``If-Range`` and names another version, or names none, is caught too)."""
    if response.status != 206 or not (response.headers.get("Content-Range") or "").startswith(f"bytes {offset}-"):
        return False
    return _validator(response.headers) == validator


def _resume_or_restart(url: str, part: Path, record: Path, timeout: float):
    """(response, offset): the rest of the part's version from ``offset``, else the whole file from 0."""
    offset, validator = _resumable(part, record, url)
    response = _open(url, offset, validator, timeout) if offset else None
    if response is not None and _same_version(response, offset, validator):
        return response, offset
    if response is not None and response.status == 200:  # the whole file: another version, or no Range support
        return response, 0
    if response is not None:  # a range of another version (If-Range ignored)
        response.close()
    _discard(part, record)
    return _open(url, 0, None, timeout), 0


def download(url: str, dest: os.PathLike, *, sha256: Optional[str] = None, timeout: float = 60.0) -> str:
    """Download ``url`` to ``dest`` and return the file's sha256 (hex).

    An existing ``dest.part`` is resumed with an HTTP Range request conditional on its version (``If-Range``); a
    server answering with the whole file (another version, or no Range support) restarts it. With ``sha256`` the
    file must hash to it: a mismatch deletes the part file and raises
    :class:`~capeval.core.errors.ModelNotAvailableError` naming both hashes; so does an HTML page served in place
    of the file. A connection that ends early keeps the part file (the next call resumes) and raises; ``dest``
    itself only ever appears complete (atomic rename). Callers serialise concurrent downloads of one ``dest``
    (:func:`file_lock`)."""
    from tqdm.auto import tqdm

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    record = dest.with_name(dest.name + ".part.json")
    response, offset = _resume_or_restart(url, part, record, timeout)
    with response:
        if "text/html" in (response.headers.get("Content-Type") or ""):
            raise ModelNotAvailableError(f"{url} answered with an HTML page, not the file (a login, quota or "
                                         f"confirmation page?): download it by hand and pass it with --file")
        if not offset:
            record.write_text(json.dumps({"url": url, "validator": _validator(response.headers)}))
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length is not None else None
        digest = sha256_of(part) if offset else hashlib.sha256()
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
                if received == 0 and looks_like_html(block[:64]):
                    out.close()
                    _discard(part, record)
                    raise ModelNotAvailableError(f"{url} answered with an HTML page, not the file (a login, quota "
                                                 f"or error page?): download it by hand and pass it with --file")
                out.write(block)
                digest.update(block)
                received += len(block)
                bar.update(len(block))
    if total is not None and received < total:
        raise ModelNotAvailableError(f"download of {url} ended after {received} of {total} bytes; run again to "
                                     f"resume from {part}")
    actual = digest.hexdigest()
    if sha256 is not None and actual != sha256.lower():
        _discard(part, record)
        raise ModelNotAvailableError(f"{url}: downloaded file has sha256 {actual}, expected {sha256.lower()}: "
                                     f"refused and deleted")
    os.replace(part, dest)
    record.unlink(missing_ok=True)
    return actual


def _discard(part: Path, record: Path) -> None:
    part.unlink(missing_ok=True)
    record.unlink(missing_ok=True)
