"""Counting the texts over an encoder's token limit, and the one warning of a call that truncated some."""

from __future__ import annotations

import warnings
from typing import Callable, Sequence

from capeval.core.caches import LruCache, text_key
from capeval.core.errors import TruncationWarning


class TruncationCounter:
    """Counts the texts of a call over an encoder's token limit, per occurrence and whatever the embedding caches
    hold; each distinct text's length is measured once (LRU-bounded memo keyed by the text's sha256: an entry's size
    does not grow with its text's length)."""

    def __init__(self, length: Callable[[str], int], limit: int, encoder: str, max_entries: int = 200_000):
        self.length, self.limit, self.encoder = length, limit, encoder
        self._over: LruCache[bool] = LruCache(max_entries)

    def over_limit(self, text: str) -> bool:
        key = text_key(text)
        over = self._over.get(key)
        if over is None:
            over = self.length(text) > self.limit
            self._over.put(key, over)
        return over

    def count(self, texts: Sequence[str]) -> int:
        return sum(self.over_limit(text) for text in texts)

    def describe(self, count: int, total: int, what: str = "texts") -> str:
        return f"{count} of {total} {what} exceed {self.limit} {self.encoder} tokens"


def warn_truncated(parts: Sequence[str]) -> None:
    """One :class:`TruncationWarning` for a call, naming every encoder that truncated (``parts`` may be empty)."""
    parts = [part for part in parts if part]
    if parts:
        warnings.warn("; ".join(parts) + " and were truncated (as officially)", TruncationWarning, stacklevel=3)
