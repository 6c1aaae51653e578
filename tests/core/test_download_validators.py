"""A part file is resumed only when the server proves the version: a 206 that names no version restarts the file,
and a Last-Modified date is a validator only when it is strong (at least a second before the response's Date)."""

import hashlib
import http.server
import threading
from email.utils import formatdate

import pytest

from capeval.core.download import download
from capeval.core.errors import ModelNotAvailableError

VERSION_A = bytes(range(256)) * 64
VERSION_B = bytes(reversed(range(256))) * 64


class Server:
    """Serves ``data`` at /f; ``etag``: send a strong ETag of the version; ``last_modified_age``: seconds between
    the Last-Modified and Date headers (None: no Last-Modified); ``honour_if_range``; ``truncate``: send half the
    announced body. ``ranges`` records each request's Range header."""

    def __init__(self):
        self.data, self.etag, self.last_modified_age = VERSION_A, True, None
        self.honour_if_range, self.truncate, self.ranges = True, False, []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                data = server.data
                etag = f'"{hashlib.sha256(data).hexdigest()[:16]}"'
                now = 2_000_000_000.0 + (0 if data is VERSION_A else 3600)
                last_modified = (formatdate(now - server.last_modified_age, usegmt=True)
                                 if server.last_modified_age is not None else None)
                wanted = self.headers.get("Range")
                server.ranges.append(wanted)
                if wanted and server.honour_if_range and self.headers.get("If-Range") not in (etag, last_modified):
                    wanted = None
                start = int(wanted.split("=")[1].split("-")[0]) if wanted else 0
                self.send_response_only(206 if wanted else 200)  # no automatic Date: ours below
                if wanted:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                if server.etag:
                    self.send_header("ETag", etag)
                if last_modified:
                    self.send_header("Last-Modified", last_modified)
                self.send_header("Date", formatdate(now, usegmt=True))
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2] if server.truncate else body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/f"


@pytest.fixture
def server():
    running = Server()
    yield running
    running.httpd.shutdown()
    running.httpd.server_close()


def _break_off_version_a(server, dest):
    server.truncate = True
    with pytest.raises(ModelNotAvailableError, match="resume"):
        download(server.url, dest)
    server.truncate = False


def test_a_range_that_names_no_version_restarts_the_file(server, tmp_path):
    """Version A breaks off; the server now serves B's ranges with no ETag, ignoring If-Range: the part is not
    completed with B's bytes."""
    dest = tmp_path / "weights.bin"
    _break_off_version_a(server, dest)
    server.data, server.etag, server.honour_if_range = VERSION_B, False, False
    assert download(server.url, dest) == hashlib.sha256(VERSION_B).hexdigest()
    assert dest.read_bytes() == VERSION_B
    assert server.ranges[-1] is None  # the whole file, from the start


def test_a_weak_last_modified_is_no_validator(server, tmp_path):
    """A Last-Modified equal to the response's Date could name two versions written within that second: the part
    cannot be resumed on it."""
    server.etag, server.last_modified_age = False, 0
    dest = tmp_path / "weights.bin"
    _break_off_version_a(server, dest)
    assert download(server.url, dest) == hashlib.sha256(VERSION_A).hexdigest()
    assert server.ranges[-1] is None


def test_a_strong_last_modified_resumes(server, tmp_path):
    server.etag, server.last_modified_age = False, 60
    dest = tmp_path / "weights.bin"
    _break_off_version_a(server, dest)
    assert download(server.url, dest) == hashlib.sha256(VERSION_A).hexdigest()
    assert server.ranges[-1] == f"bytes={len(VERSION_A) // 2}-"
