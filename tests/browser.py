"""The headless browser the screenshot tests drive (Debian's chromium): required in CI, skipped elsewhere."""

import base64
import json
import os
import select
import subprocess
import time

import pytest

CHROMIUM = "/usr/bin/chromium"


def chromium_or_skip() -> str:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing in CI: apt-get install -y chromium")
    pytest.skip(f"{CHROMIUM} not installed (Debian package 'chromium')")


class DevToolsPage:
    """A page in headless chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: commands
    on fd 3, replies on fd 4, NUL-terminated JSON), so a test waits in real time for what the page shows, however
    slowly the server answers, instead of dumping the page when a virtual-time budget runs out."""

    def __init__(self, url: str, profile, *, width: int = 1200, height: int = 900):
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def wire_pipes():  # in the child: fd 3 reads our commands, fd 4 writes the browser's replies
            os.dup2(to_browser_read, 3)
            os.dup2(from_browser_write, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--force-device-scale-factor=1",
                 "--remote-debugging-pipe", f"--user-data-dir={profile}", f"--window-size={width},{height}"]
        self._process = subprocess.Popen([chromium_or_skip(), *flags, url], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         pass_fds=(3, 4), preexec_fn=wire_pipes)  # kept open after preexec_fn
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        target = self._page_target(url)
        self._session = self.command("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        # the viewport is the window size asked for (the headless window keeps some of it for its own frame)
        self.command("Emulation.setDeviceMetricsOverride", self._session, width=width, height=height,
                     deviceScaleFactor=1, mobile=False)

    def command(self, method: str, session: str = None, **params):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def _read_message(self) -> dict:
        while b"\0" not in self._buffer:
            if not select.select([self._from_browser], [], [], 120)[0]:
                raise TimeoutError("chromium did not answer on the DevTools pipe within 120 s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _page_target(self, url: str, timeout_s: float = 60) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pages = [t for t in self.command("Target.getTargets")["targetInfos"] if t["type"] == "page"]
            if pages:
                return pages[0]["targetId"]
            time.sleep(0.2)
        raise TimeoutError(f"chromium opened no page for {url}")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page."""
        result = self.command("Runtime.evaluate", self._session, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, *, timeout_s: float = 300, every_s: float = 0.25):
        """Poll ``expression`` in real time until it is truthy; its value, or ``TimeoutError`` naming it."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"after {timeout_s} s the page still does not satisfy: {expression}")
            time.sleep(every_s)

    def screenshot(self, path) -> None:
        """The viewport as a PNG file."""
        shot = self.command("Page.captureScreenshot", self._session, format="png")["data"]
        with open(path, "wb") as file:
            file.write(base64.b64decode(shot))

    def html(self) -> str:
        return self.evaluate("document.documentElement.outerHTML")

    def close(self):
        try:
            self.command("Browser.close")
        except (OSError, RuntimeError):
            pass
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
