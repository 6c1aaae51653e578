"""Small tmpfs mounts for tests of full and read-only file systems (root only). A test module imports the
``tmpfs`` fixture (``from mounts import tmpfs``); the test calls ``tmpfs(size="64k", read_only=False)`` for a new
mounted folder under its ``tmp_path``, unmounted at teardown. Skipped, with the reason, when not root or when the
mount fails (no CAP_SYS_ADMIN in a container)."""

import os
import subprocess

import pytest


def _mount_command(*args):
    return subprocess.run(["mount", *args], capture_output=True, text=True)


@pytest.fixture
def tmpfs(tmp_path):
    mounted = []

    def mount(size: str = "64k", read_only: bool = False):
        if os.geteuid() != 0:
            pytest.skip("needs root: mounts a tmpfs to get a full or read-only file system")
        folder = tmp_path / f"tmpfs{len(mounted)}"
        folder.mkdir()
        done = _mount_command("-t", "tmpfs", "-o", f"size={size},mode=755", "tmpfs", str(folder))
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        if read_only:
            done = _mount_command("-o", "remount,ro", str(folder))
            if done.returncode:
                pytest.skip(f"cannot remount a tmpfs read-only here: {done.stderr.strip()}")
        return folder

    yield mount
    for folder in reversed(mounted):
        subprocess.run(["umount", str(folder)], check=True, capture_output=True)


def fill(folder) -> None:
    """Fill ``folder``'s file system: one file grown until the system refuses another byte."""
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    with pytest.raises(OSError):
        with open(os.path.join(folder, "probe"), "wb") as handle:
            handle.write(b"x")
