"""The sha256 of a file, read in 1 MiB blocks: one implementation for downloads, weights, conversions and caches."""

from __future__ import annotations

import hashlib
import os

BLOCK = 1 << 20


def sha256_of(path: os.PathLike):
    """A ``hashlib.sha256`` object fed the file's bytes (to go on hashing what is appended to it)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            digest.update(block)
    return digest


def file_sha256(path: os.PathLike) -> str:
    """The file's sha256, hex."""
    return sha256_of(path).hexdigest()
