"""The headless browser the screenshot tests drive (Debian's chromium): required in CI, skipped elsewhere."""

import os

import pytest

CHROMIUM = "/usr/bin/chromium"


def chromium_or_skip() -> str:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} is missing in CI: apt-get install -y chromium")
    pytest.skip(f"{CHROMIUM} not installed (Debian package 'chromium')")
