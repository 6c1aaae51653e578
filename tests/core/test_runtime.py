import threading

import numpy as np
import pytest
import torch
from PIL import Image

from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import EmbeddingCache, encode_cached


def test_each_distinct_item_encoded_once_in_input_order():
    calls = []

    def encode(batch):
        calls.append(list(batch))
        return torch.tensor([[float(x)] for x in batch])

    cache = EmbeddingCache(cache_namespace("t", ()))
    out = encode_cached([3, 1, 3, 2, 1], ["3", "1", "3", "2", "1"], encode, cache, batch_size=2, desc="x")
    assert out[:, 0].tolist() == [3, 1, 3, 2, 1]
    assert calls == [[3, 1], [2]]
    encode_cached([2, 4], ["2", "4"], encode, cache, batch_size=2, desc="x")
    assert calls[-1] == [4]


def test_lru_bound_and_calls_larger_than_the_bound():
    cache = EmbeddingCache(cache_namespace("t", ()), max_items=2)
    out = encode_cached(list(range(5)), [str(i) for i in range(5)], lambda b: torch.tensor([[float(x)] for x in b]),
                        cache, batch_size=4, desc="x")
    assert out[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert len(cache) == 2 and cache.get("4") is not None and cache.get("0") is None


def test_persisted_cache_concurrent_writers(tmp_path):
    caches = [EmbeddingCache(cache_namespace("model", ()), tmp_path) for _ in range(4)]

    def write(cache):
        for i in range(20):
            cache.put(f"k{i}", torch.full((3,), float(i)))

    threads = [threading.Thread(target=write, args=(c,)) for c in caches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fresh = EmbeddingCache(cache_namespace("model", ()), tmp_path)
    assert fresh.get("k7").tolist() == [7.0, 7.0, 7.0]
    assert not list(tmp_path.rglob("*.tmp"))


def test_cached_rows_share_large_blocks_not_one_allocation_each():
    cache = EmbeddingCache(cache_namespace("t", ()))
    batch = torch.randn(10, 8)
    for i, row in enumerate(batch):
        cache.put(str(i), row)
    assert len({id(block) for block, _ in cache._memory.values()}) == 1  # one block holds them all
    assert torch.equal(torch.stack([cache.get(str(i)) for i in range(10)]), batch)
    batch.zero_()  # copies, not views of the caller's tensor
    assert cache.get("3").abs().sum() > 0


def test_a_damaged_persisted_embedding_is_recomputed_not_trusted(tmp_path):
    import warnings as _warnings

    from capeval.core.caches import EmbeddingCache

    cache = EmbeddingCache(cache_namespace("model", ()), tmp_path)
    cache.put("k", torch.arange(4, dtype=torch.float32))
    (entry,) = list(tmp_path.rglob("k.safetensors"))
    entry.write_bytes(entry.read_bytes()[:10])  # truncated on disk
    fresh = EmbeddingCache(cache_namespace("model", ()), tmp_path)
    with pytest.warns(UserWarning, match=r"damaged embedding cache entry: .*k\.safetensors"):
        assert fresh.get("k") is None
    fresh.put("k", torch.arange(4, dtype=torch.float32))
    with _warnings.catch_warnings():
        _warnings.simplefilter("error")
        reread = EmbeddingCache(cache_namespace("model", ()), tmp_path).get("k")
        assert torch.equal(reread, torch.arange(4, dtype=torch.float32))


def test_sort_key_buckets_pending_items_and_prepare_feeds_the_encoder():
    calls = []

    def encode(batch):
        calls.append(batch)
        return torch.tensor([[float(len(x))] for x in batch["texts"]])

    def prepare(batches):  # what encode_batch receives: prepared batches, in order
        for batch in batches:
            yield {"texts": batch}

    cache = EmbeddingCache(cache_namespace("t", ()))
    cache.put("ccc", torch.tensor([-1.0]))  # cached items are not encoded again
    texts = ["aaaa", "b", "ccc", "dd", "b", "eeeee", "f"]
    out = encode_cached(texts, texts, encode, cache, batch_size=2, desc="x", sort_key=len, prepare=prepare)
    assert [call["texts"] for call in calls] == [["b", "f"], ["dd", "aaaa"], ["eeeee"]]  # stable ascending length
    assert out[:, 0].tolist() == [4, 1, -1, 2, 1, 5, 1]  # input order


def test_image_keys_hash_each_distinct_image_object_once():
    from capeval.core.caches import image_key, image_keys

    rng = np.random.default_rng(0)
    a = Image.fromarray(rng.integers(0, 256, (5, 6, 3), dtype=np.uint8))
    b = Image.fromarray(rng.integers(0, 256, (5, 6, 3), dtype=np.uint8))
    hashed = []

    def recording_map(fn, items):
        items = list(items)
        hashed.extend(items)
        return map(fn, items)

    keys = image_keys([a, b, a, a.copy(), b], recording_map)
    assert keys == [image_key(x) for x in (a, b, a, a, b)]  # a copy is another object with the same content key
    assert len(hashed) == 3


def test_in_fixed_rows_runs_every_forward_at_the_same_shape_and_drops_the_padding():
    from capeval.core.shapes import in_fixed_rows

    shapes = []

    def forward(x, y):
        shapes.append((tuple(x.shape), tuple(y.shape)))
        return x.sum(-1) + y

    x, y = torch.arange(30.0).reshape(10, 3), torch.arange(10.0)
    out = in_fixed_rows(forward, x, y, rows=4)
    assert torch.equal(out, x.sum(-1) + y)
    assert shapes == [((4, 3), (4,))] * 3  # 4 + 4 + 2 padded to 4


def test_image_rows_fill_a_token_budget_on_cpu_and_are_fixed_on_an_accelerator():
    from capeval.core.shapes import image_rows

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert image_rows(cpu, 50) == 8  # ViT-B/32 at 224: 49 patches + class token, 400 tokens per forward
    assert image_rows(cpu, 65) == 4 and image_rows(cpu, 197) == 4 and image_rows(cpu, 257) == 4
    assert image_rows(cpu, None) == 4  # tokens unknown (e.g. a ResNet)
    assert image_rows(cuda, 50) == image_rows(cuda, 257) == image_rows(cuda) == 32


def test_in_text_shapes_pads_each_width_to_fixed_rows_with_the_pad_id_and_keeps_input_order():
    from capeval.core.shapes import in_text_shapes

    calls = []

    def forward(tokens, mask):
        calls.append((tokens.clone(), mask.clone()))
        return (tokens * mask).sum(-1, keepdim=True).float()

    ids = [[5, 6, 7], [8], [9, 9, 9, 9, 9], [3, 4]]
    out = in_text_shapes(forward, ids, width_of=lambda n: 4 if n <= 3 else 8, device=torch.device("cpu"), pad_id=1)
    assert out.flatten().tolist() == [18.0, 8.0, 45.0, 7.0]
    assert [tuple(t.shape) for t, _ in calls] == [(24, 4), (24, 8)]  # one forward per width, 24 rows on CPU
    tokens, mask = calls[0]
    assert tokens[:3].tolist() == [[5, 6, 7, 1], [8, 1, 1, 1], [3, 4, 1, 1]] and (tokens[3:] == 1).all()
    assert mask[:3].sum(1).tolist() == [3, 1, 2] and not mask[3:].any()


def test_encode_cached_batches_never_mix_groups_of_the_sort_key():
    items = ["aaaa", "b", "cc", "ddd", "e", "ffff", "gg", "h"]
    batches = []

    def encode(batch):
        batches.append(list(batch))
        return torch.tensor([[float(len(t))] for t in batch])

    out = encode_cached(items, items, encode, EmbeddingCache(cache_namespace("t", ())), batch_size=2, desc="t",
                        show_progress=False, sort_key=len, group_key=lambda length: length > 2)
    assert out.flatten().tolist() == [float(len(t)) for t in items]
    assert batches == [["b", "e"], ["h", "cc"], ["gg"], ["ddd", "aaaa"], ["ffff"]]
    with pytest.raises(ValueError, match="sort_key"):
        encode_cached(items, items, encode, EmbeddingCache(cache_namespace("u", ())), batch_size=2, desc="t",
                      group_key=len)
