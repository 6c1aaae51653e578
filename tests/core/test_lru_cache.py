"""LruCache, the one bounded in-memory map: least recently used entries leave first, both bounds hold after every
store, and a stored None is a value, not a miss."""

import pytest

from capeval.core.caches import LruCache


def test_the_least_recently_used_entry_leaves_first():
    cache = LruCache(3)
    for key in "abc":
        cache.put(key, key.upper())
    assert cache.get("a") == "A"  # a is now the most recent: b is the oldest
    cache.put("d", "D")
    assert "b" not in cache and [cache.get(k) for k in "acd"] == ["A", "C", "D"]
    assert cache.evictions == 1 and len(cache) == 3


def test_the_byte_bound_holds_after_every_store_and_no_entry_bound_is_needed():
    cache = LruCache(None, max_bytes=10, sizeof=len)
    stored = []
    for i, text in enumerate(["abcd", "efg", "hij", "klmno", "p"]):
        cache.put(i, text)
        stored.append(text)
        assert cache.nbytes <= 10
        kept = [t for t in stored if t in [cache.get(j) for j in range(i + 1)]]
        assert cache.nbytes == sum(map(len, kept))
    cache.put("big", "x" * 11)  # larger than the bound on its own: not stored, nothing evicted for it
    assert "big" not in cache and cache.nbytes <= 10
    cache.put(4, "pq")  # replacing a value counts its new size only
    assert cache.nbytes == sum(len(cache.get(k)) for k in range(5) if k in cache)
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0


def test_a_stored_none_is_found_and_bounds_are_checked():
    cache = LruCache(2)
    cache.put("k", None)
    assert "k" in cache and cache.get("k", "missing") is None and cache.get("other", "missing") == "missing"
    zero = LruCache(0)
    zero.put("k", 1)
    assert "k" not in zero
    with pytest.raises(ValueError):
        LruCache(-1)
    with pytest.raises(ValueError):
        LruCache(1, max_bytes=5)
