"""The bounded on-disk cache: its files never pass the bound, the most recently used entries stay, a file vanishing
under a recount is tolerated, and two processes writing and reading at once leave a whole, bounded cache."""

import hashlib
import os
import subprocess
import sys
import textwrap
import time

import pytest

from capeval.core.disk_cache import DESCRIPTION_FILE, FILE_BLOCK, DiskCache


def _value(key: str) -> bytes:
    """Content determined by the key, 1 to 3 blocks long: a reader can tell a whole entry from any other bytes."""
    size = 500 + int(hashlib.sha256(key.encode()).hexdigest()[:4], 16) % (2 * FILE_BLOCK + 3000)
    return (key.encode() * (size // len(key) + 1))[:size]


def _entries(folder, suffix=".bin"):
    """Name → bytes of every entry file, read independently of DiskCache."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name.endswith(suffix) and p.name != DESCRIPTION_FILE}


def _counted(folder, suffix=".bin"):
    """The entries' bytes as the bound counts them: each file in whole 4096-byte blocks."""
    return sum(-(-len(data) // 4096) * 4096 for data in _entries(folder, suffix).values())


def test_the_bound_is_never_passed_and_the_most_recently_used_stay(tmp_path):
    bound = 12 * FILE_BLOCK
    cache = DiskCache(tmp_path / "c", max_bytes=bound, suffix=".bin", description='{"kind": "test"}')
    cache.write_many([("hot", _value("hot"))])
    written = []
    for i in range(300):
        key = f"k{i:04d}"
        cache.write_many([(key, _value(key))])
        written.append(key)
        assert cache.read("hot") == _value("hot")  # used after every write: never removed
        assert _counted(tmp_path / "c") <= bound
        assert int((tmp_path / "c" / ".bytes").read_text()) == _counted(tmp_path / "c")  # the running total is exact
    assert cache.evictions > 250
    survivors = {name[:-4] for name in _entries(tmp_path / "c")}
    newest = []  # the most recently written, as many as fit in the bound's quarter: always kept
    for key in reversed(written):
        if sum(-(-len(_value(k)) // 4096) * 4096 for k in newest + [key]) > bound // 4:
            break
        newest.append(key)
    assert len(newest) >= 1 and set(newest) <= survivors
    assert all(cache.read(key) == _value(key) for key in survivors)
    assert cache.read("k0000") is None  # long gone
    assert (tmp_path / "c" / DESCRIPTION_FILE).read_text() == '{"kind": "test"}'
    assert not [p for p in (tmp_path / "c").iterdir() if p.name.endswith(".tmp")]
    cache.write_many([("huge", b"x" * (bound + 1))])  # larger than the bound on its own: not stored
    assert cache.read("huge") is None and _counted(tmp_path / "c") <= bound


def test_writes_in_one_call_keep_their_order_and_a_replaced_entry_counts_once(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=4 * FILE_BLOCK, suffix=".bin")
    cache.write_many([(f"k{i}", b"a" * 100) for i in range(4)])
    cache.write_many([("k0", b"b" * 200)])  # replaced: still one block
    assert int((tmp_path / ".bytes").read_text()) == 4 * FILE_BLOCK == _counted(tmp_path)
    # passes the bound: the least recently used go (k1, then k2) until 3/4 of the bound is left with k4
    cache.write_many([("k4", b"c" * 100)])
    assert set(_entries(tmp_path)) == {"k3.bin", "k0.bin", "k4.bin"} and cache.evictions == 2
    assert _counted(tmp_path) == 3 * FILE_BLOCK and cache.read("k0") == b"b" * 200


def test_a_file_vanishing_under_a_recount_or_a_reader_is_tolerated(tmp_path, monkeypatch):
    bound = 8 * FILE_BLOCK
    cache = DiskCache(tmp_path, max_bytes=bound, suffix=".bin")
    cache.write_many([(f"k{i}", b"v" * 1000) for i in range(8)])
    real_scandir, real_unlink = os.scandir, os.unlink
    vanished = []

    class Listing:
        """os.scandir whose entries lose their files after being listed (before the recount stats them)."""

        def __init__(self, path):
            self.inner = real_scandir(path)

        def __enter__(self):
            items = list(self.inner)
            first = next(item for item in items if item.name.endswith(".bin"))
            real_unlink(first.path)
            vanished.append(first.name)
            return iter(items)

        def __exit__(self, *exc):
            self.inner.close()

    def unlink_twice(path, *args, **kwargs):  # someone else removes an entry first
        if str(path).endswith(".bin"):
            real_unlink(path)
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "scandir", Listing)
    monkeypatch.setattr(os, "unlink", unlink_twice)
    cache.write_many([("k8", b"w" * 1000)])  # passes the bound: recounts with files vanishing under it
    monkeypatch.undo()
    # one entry vanished before its stat, the two least recently used of the 7 left before their removal
    assert len(vanished) == 1 and cache.evictions == 2 and len(_entries(tmp_path)) == 6
    assert _counted(tmp_path) <= bound and cache.read("k8") == b"w" * 1000
    assert int((tmp_path / ".bytes").read_text()) == _counted(tmp_path)
    assert cache.read(vanished[0][:-4]) is None  # a reader finds nothing, not an error

    for path in tmp_path.glob("*.bin"):  # removed by hand: the total is high until the next recount
        path.unlink()
    cache.write_many([(f"n{i}", b"n" * 1000) for i in range(12)])
    assert _counted(tmp_path) <= bound and int((tmp_path / ".bytes").read_text()) == _counted(tmp_path)


def test_a_damaged_running_total_is_counted_again(tmp_path):
    cache = DiskCache(tmp_path, max_bytes=4 * FILE_BLOCK, suffix=".bin")
    cache.write_many([("a", b"1"), ("b", b"2")])
    (tmp_path / ".bytes").write_text("garbage")
    DiskCache(tmp_path, max_bytes=4 * FILE_BLOCK, suffix=".bin").write_many([("c", b"3")])
    assert int((tmp_path / ".bytes").read_text()) == 3 * FILE_BLOCK == _counted(tmp_path)
    with pytest.raises(ValueError, match="max_bytes"):
        DiskCache(tmp_path, max_bytes=-1, suffix=".bin")


_WORKER = textwrap.dedent("""
    import hashlib, random, sys, time
    from pathlib import Path
    from capeval.core.disk_cache import DiskCache, FILE_BLOCK

    def value(key):
        size = 500 + int(hashlib.sha256(key.encode()).hexdigest()[:4], 16) % (2 * FILE_BLOCK + 3000)
        return (key.encode() * (size // len(key) + 1))[:size]

    folder, go, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    cache = DiskCache(folder, max_bytes=int(sys.argv[4]), suffix=".bin", description="shared")
    rng = random.Random(seed)
    while not go.exists():
        time.sleep(0.005)
    hits = 0
    for i in range(400):
        keys = [f"k{rng.randrange(120):03d}" for _ in range(rng.randint(1, 3))]  # both processes write these
        cache.write_many([(key, value(key)) for key in keys])
        probe = f"k{rng.randrange(120):03d}"
        data = cache.read(probe)
        if data is not None:
            assert data == value(probe), (probe, len(data))  # a whole entry, never part of one
            hits += 1
    print(hits)
""")


def test_two_processes_writing_and_reading_at_once_leave_a_whole_bounded_cache(tmp_path):
    bound, folder, go = 20 * FILE_BLOCK, tmp_path / "shared", tmp_path / "go"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER, str(folder), str(go), str(seed), str(bound)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for seed in (1, 2)]
    time.sleep(1.0)  # both started: they write from the same moment on
    go.touch()
    for worker in workers:
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err[-3000:]
        assert int(out.strip()) > 0  # the readers found entries while the other process wrote and removed
    entries = _entries(folder)
    assert entries and all(data == _value(name[:-4]) for name, data in entries.items())
    assert _counted(folder) <= bound
    assert int((folder / ".bytes").read_text()) == _counted(folder)  # no write lost from the running total
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert (folder / DESCRIPTION_FILE).read_text() == "shared"
