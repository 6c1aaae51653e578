"""The embedding cache's files under ``persist_dir`` are bounded in bytes: after many inserts they never pass the
bound, the most recently used stay, and every value read back is bitwise the value stored."""

import pytest
import torch

from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import DEFAULT_PERSIST_BYTES, EmbeddingCache
from capeval.core.disk_cache import DESCRIPTION_FILE
from capeval.core.errors import InputError

BLOCK = 4096


def _embedding(i: int, dtype=torch.float32) -> torch.Tensor:
    """A distinct value per ``i``, with a negative zero, a NaN and an infinity (bits an inexact copy would lose)."""
    value = torch.randn(16, generator=torch.Generator().manual_seed(i)).to(dtype)
    value[0], value[1], value[2] = -0.0, float("nan"), float("inf")
    return value


def _bits(value: torch.Tensor) -> bytes:
    return value.contiguous().view(torch.uint8).numpy().tobytes()


def _files(folder):
    """Entry name → bytes of every persisted embedding file, read independently of the caches."""
    return {p.name: p.read_bytes() for p in folder.rglob("*.safetensors")}


def _counted(folder) -> int:
    """The files' bytes as the bound counts them: each in whole 4096-byte blocks."""
    return sum(-(-len(data) // BLOCK) * BLOCK for data in _files(folder).values())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_persisted_embeddings_stay_within_the_bound_keep_the_recent_and_read_back_bitwise(tmp_path, dtype):
    namespace = cache_namespace("model", ())
    bound = 12 * BLOCK  # each 16-value embedding file takes one block
    writer = EmbeddingCache(namespace, tmp_path, max_bytes=2**20, persist_bytes=bound)
    writer.put("hot", _embedding(-1, dtype))
    for i in range(200):
        writer.put(f"k{i}", _embedding(i, dtype))
        # read from disk by a cache with an empty memory: the file's use makes it the most recently used
        assert _bits(EmbeddingCache(namespace, tmp_path, persist_bytes=bound).get("hot")) == _bits(_embedding(-1, dtype))
        assert _counted(tmp_path) <= bound
    assert writer.persisted.evictions > 150
    survivors = {name[:-len(".safetensors")] for name in _files(tmp_path)}
    assert {"hot", "k199", "k198"} <= survivors and "k0" not in survivors
    reader = EmbeddingCache(namespace, tmp_path, persist_bytes=bound)
    for key in survivors - {"hot"}:
        value = reader.get(key)
        assert value.dtype == dtype and _bits(value) == _bits(_embedding(int(key[1:]), dtype))
    assert EmbeddingCache(namespace, tmp_path, persist_bytes=bound).get("k0") is None  # removed: computed again
    assert (tmp_path / str(namespace) / DESCRIPTION_FILE).read_text() == namespace.description


def test_processes_sharing_a_folder_keep_it_bounded_and_a_later_run_reads_it(tmp_path):
    import subprocess
    import sys
    import textwrap

    bound = 20 * BLOCK
    script = textwrap.dedent(f"""
        import sys, torch
        from capeval.core.cache_keys import cache_namespace
        from capeval.core.caches import EmbeddingCache
        cache = EmbeddingCache(cache_namespace("model", ()), sys.argv[1], persist_bytes={bound})
        for i in range(int(sys.argv[2]), int(sys.argv[2]) + 150):
            cache.put(f"k{{i}}", torch.full((16,), float(i)))
    """)
    workers = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), str(start)]) for start in (0, 1000)]
    assert [worker.wait(timeout=300) for worker in workers] == [0, 0]
    assert _counted(tmp_path) <= bound
    reader = EmbeddingCache(cache_namespace("model", ()), tmp_path, persist_bytes=bound)
    for name in _files(tmp_path):
        i = int(name[1:-len(".safetensors")])
        assert torch.equal(reader.get(f"k{i}"), torch.full((16,), float(i)))


def test_files_persisted_before_the_bound_are_read_and_counted(tmp_path):
    from safetensors.torch import save_file

    namespace = cache_namespace("model", ())
    folder = tmp_path / str(namespace)
    folder.mkdir()
    for i in range(6):  # as the unbounded cache wrote them: no running total yet
        save_file({"embedding": _embedding(i)}, str(folder / f"k{i}.safetensors"))
    cache = EmbeddingCache(namespace, tmp_path, persist_bytes=4 * BLOCK)
    assert _bits(cache.get("k5")) == _bits(_embedding(5))
    cache.put("new", _embedding(99))  # the folder is counted, then the least recently used leave
    assert _counted(tmp_path) <= 4 * BLOCK and {"k5.safetensors", "new.safetensors"} <= set(_files(tmp_path))


def test_the_persisted_bound_is_checked_and_documented():
    assert DEFAULT_PERSIST_BYTES == 2**30
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(InputError, match="persist_bytes"):
            EmbeddingCache(cache_namespace("model", ()), persist_bytes=bad)
