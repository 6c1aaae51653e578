"""Content keys and bounded caches: an LRU map, the byte-bounded (optionally persisted) embedding cache, and
``encode_cached``, which encodes each distinct item once in batches."""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Generic, Hashable, Iterable, Iterator, List, Optional, Sequence, \
    Tuple, TypeVar

from tqdm.auto import tqdm

from capeval.core.disk_cache import DiskCache
from capeval.core.errors import InputError

if TYPE_CHECKING:  # torch and PIL load on use: the text metrics' path (LruCache, text keys) never imports them
    import torch
    from PIL import Image

V = TypeVar("V")


class LruCache(Generic[V]):
    """A least-recently-used map bounded by its number of entries (``max_entries``; None: no such bound) and, with
    ``sizeof``, by the total size of its values (``max_bytes``). Storing evicts the least recently used entries until
    both bounds hold; a value larger than ``max_bytes`` on its own (or any value when ``max_entries`` is 0) is not
    stored. Thread-safe. The one bounded in-memory map of the package: every memo of data uses it."""

    def __init__(self, max_entries: Optional[int], *, max_bytes: Optional[int] = None,
                 sizeof: Optional[Callable[[V], int]] = None):
        if (max_entries is not None and max_entries < 0) or (max_bytes is not None and max_bytes < 0):
            raise ValueError(f"cache bounds must be ≥ 0, not max_entries={max_entries}, max_bytes={max_bytes}")
        if max_bytes is not None and sizeof is None:
            raise ValueError("a byte bound needs sizeof")
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._sizeof = sizeof
        self._items: "OrderedDict[Hashable, V]" = OrderedDict()
        self._sizes: Dict[Hashable, int] = {}  # with ``sizeof`` only
        self._lock = threading.Lock()
        self.nbytes = 0  # total size of the stored values (0 without ``sizeof``)
        self.evictions = 0

    def get(self, key: Hashable, default: Optional[V] = None) -> Optional[V]:
        with self._lock:
            value = self._items.get(key, _MISSING)
            if value is _MISSING:
                return default
            self._items.move_to_end(key)
            return value

    def get_many(self, keys: Iterable[Hashable]) -> List[Optional[V]]:
        """:meth:`get` of each key (None where absent), under one lock: for callers that look up many keys at once
        on a hot path."""
        found: List[Optional[V]] = []
        with self._lock:
            lookup, touch = self._items.get, self._items.move_to_end
            for key in keys:
                value = lookup(key, _MISSING)
                if value is _MISSING:
                    found.append(None)
                else:
                    touch(key)
                    found.append(value)
        return found

    def put(self, key: Hashable, value: V) -> None:
        size = int(self._sizeof(value)) if self._sizeof is not None else 0
        with self._lock:
            self._store(key, value, size)

    def put_many(self, items: Iterable[Tuple[Hashable, V]]) -> None:
        """:meth:`put` of each ``(key, value)`` in order, under one lock."""
        sized = [(key, value, int(self._sizeof(value)) if self._sizeof is not None else 0) for key, value in items]
        with self._lock:
            for key, value, size in sized:
                self._store(key, value, size)

    def _store(self, key: Hashable, value: V, size: int) -> None:
        if self._items.pop(key, _MISSING) is not _MISSING:
            self.nbytes -= self._sizes.pop(key, 0)
        if self.max_entries == 0 or (self.max_bytes is not None and size > self.max_bytes):
            return
        self._items[key] = value
        if self._sizeof is not None:
            self._sizes[key] = size
            self.nbytes += size
        while (self.max_entries is not None and len(self._items) > self.max_entries) or (
                self.max_bytes is not None and self.nbytes > self.max_bytes):
            evicted, _ = self._items.popitem(last=False)
            self.nbytes -= self._sizes.pop(evicted, 0)
            self.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._sizes.clear()
            self.nbytes = 0

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)


_MISSING = object()  # what LruCache.get finds for an absent key (a stored None is a value)


def image_key(image: Image.Image) -> str:
    """Content hash of a decoded image (mode, size and pixels)."""
    digest = hashlib.sha256(f"{image.mode}{image.size}".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


def image_keys(images: Sequence[Image.Image], map_fn: Callable = map) -> List[str]:
    """:func:`image_key` of each image, each distinct image object hashed once (the input layer hands the same object
    to every sample of a repeated file); ``map_fn``: e.g. a thread pool's ``map``."""
    distinct = {id(image): image for image in images}
    key_of = dict(zip(distinct, map_fn(image_key, distinct.values())))
    return [key_of[id(image)] for image in images]


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)


class CacheNamespace:
    """What the features of one cache are a function of: made by :func:`capeval.core.cache_keys.cache_namespace`
    (the one key function) and nowhere else. ``kind``: what is cached; ``digest``: sha256 of ``description``, the
    canonical JSON of the weights' content identity, the forward's numerics, the preprocessing and the dtype."""

    kind: str
    digest: str
    description: str

    def __str__(self) -> str:
        return f"{self.kind}-{self.digest[:32]}"

DEFAULT_CACHE_BYTES = 256 * 2**20  # the in-memory bound of each embedding cache (option ``cache_bytes``)
DEFAULT_PERSIST_BYTES = 2**30  # the bound of each embedding cache's files under ``persist_dir`` (one namespace's)
# bytes an entry costs besides its row and its key string (map node, slot, table and allocator slack under
# eviction churn; RSS measured 700–900 with 512-float rows)
ENTRY_OVERHEAD = 1024
BLOCK_BYTES = 2**20  # rows are stored in blocks of about this size (at most the cache's bound)


class _Block:
    """Rows of one shape and dtype in one tensor; ``free``: the row indices not in use."""

    __slots__ = ("rows", "free")

    def __init__(self, rows: torch.Tensor):
        self.rows = rows
        self.free = list(range(len(rows) - 1, -1, -1))

    @property
    def in_use(self) -> int:
        return len(self.rows) - len(self.free)


class EmbeddingCache:
    """Embeddings by content key, in memory (least recently used leave first, within ``max_bytes``) and optionally
    persisted one file per key under ``persist_dir/<namespace>``.

    ``namespace``: a :class:`CacheNamespace` from :func:`capeval.core.cache_keys.cache_namespace`, so features of
    other weights (content, not path), numerics, preprocessing or dtype never mix. Memory: rows are copied into
    blocks of about :data:`BLOCK_BYTES` (millions of small long-lived tensors fragment the C heap); a freed row is
    reused and a block with no row in use is released. ``nbytes`` counts every allocated block whole plus
    :data:`ENTRY_OVERHEAD` and the key's size per entry, and stays at most ``max_bytes``; an entry larger than that
    on its own is not kept in memory. ``max_items`` (optional) also bounds the number of entries. :meth:`get` returns
    copies: later evictions never change them. Persisted: ``persisted``, a :class:`capeval.core.disk_cache.DiskCache`
    of ``<key>.safetensors`` files (the tensor as stored, read back bitwise equal) of at most ``persist_bytes`` bytes
    (default :data:`DEFAULT_PERSIST_BYTES`, 1 GiB), least recently used removed first (a file's use is its write or
    its read into memory; a value served from memory does not touch it), safe for processes sharing the folder.
    """

    def __init__(self, namespace: CacheNamespace, persist_dir: Optional[os.PathLike] = None, *,
                 max_bytes: int = DEFAULT_CACHE_BYTES, max_items: Optional[int] = None,
                 persist_bytes: int = DEFAULT_PERSIST_BYTES):
        if not isinstance(namespace, CacheNamespace):
            raise TypeError(f"an EmbeddingCache needs a CacheNamespace from capeval.core.cache_keys.cache_namespace, "
                            f"not {namespace!r}")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise InputError(f"cache_bytes must be an int ≥ 0 (bytes of each in-memory cache), not {max_bytes!r}")
        if isinstance(persist_bytes, bool) or not isinstance(persist_bytes, int) or persist_bytes < 0:
            raise InputError(f"persist_bytes must be an int ≥ 0 (bytes of each persisted cache), not {persist_bytes!r}")
        self.namespace = namespace
        self.max_bytes, self.max_items = max_bytes, max_items
        self.nbytes = 0
        self.evictions = 0
        self._memory: "OrderedDict[Hashable, Tuple[_Block, int]]" = OrderedDict()
        self._blocks: Dict[Tuple[Tuple[int, ...], torch.dtype], List[_Block]] = {}
        self._lock = threading.Lock()
        self.persisted = DiskCache(Path(persist_dir) / str(namespace), max_bytes=persist_bytes, suffix=".safetensors",
                                   description=namespace.description) if persist_dir else None

    def get(self, key: str) -> Optional[torch.Tensor]:
        with self._lock:
            slot = self._memory.get(key)
            if slot is not None:
                self._memory.move_to_end(key)
                return slot[0].rows[slot[1]].clone()
        data = self.persisted.read(key) if self.persisted is not None else None
        if data is None:
            return None
        from safetensors import SafetensorError
        from safetensors.torch import load

        try:
            value = load(data)["embedding"]
        except (SafetensorError, KeyError) as exc:  # a damaged entry: recomputed and rewritten
            warnings.warn(f"ignoring a damaged embedding cache entry: {self.persisted.path(key)} ({exc!r})")
            return None
        self._remember(key, value)
        return value

    def put(self, key: str, value: torch.Tensor) -> torch.Tensor:
        """Store ``value`` under ``key`` and return it on the CPU."""
        value = value.detach().cpu()
        self._remember(key, value)
        if self.persisted is not None:
            from safetensors.torch import save

            self.persisted.write_many([(key, save({"embedding": value.contiguous()}))])
        return value

    def _entry_bytes(self, key: Hashable) -> int:
        return ENTRY_OVERHEAD + sys.getsizeof(key)

    def _remember(self, key: str, value: torch.Tensor) -> None:
        row_bytes = value.numel() * value.element_size()
        with self._lock:
            self._forget(key)
            if self.max_items == 0 or row_bytes + self._entry_bytes(key) > self.max_bytes:
                return
            self.nbytes += self._entry_bytes(key)
            block, row = self._free_row(tuple(value.shape), value.dtype, row_bytes + self._entry_bytes(key))
            block.rows[row].copy_(value)
            self._memory[key] = (block, row)
            while self.nbytes > self.max_bytes or (self.max_items is not None and len(self._memory) > self.max_items):
                self._evict()

    def _free_row(self, shape: Tuple[int, ...], dtype: torch.dtype, entry_bytes: int) -> Tuple[_Block, int]:
        """A row not in use for a value of ``shape`` and ``dtype``: a freed one, else one of a new block with room
        for its rows' entries (``entry_bytes`` each, row included), evicting the least recently used entries first
        while not even one row would fit."""
        blocks = self._blocks.setdefault((shape, dtype), [])
        while True:
            with_room = next((block for block in blocks if block.free), None)
            if with_room is not None:
                return with_room, with_room.free.pop()
            rows = min(BLOCK_BYTES, self.max_bytes - self.nbytes) // entry_bytes
            if rows >= 1 or not self._memory:
                break
            self._evict()
        import torch

        block = _Block(torch.empty((max(1, rows), *shape), dtype=dtype))
        blocks.append(block)
        self.nbytes += block.rows.nbytes
        return block, block.free.pop()

    def _evict(self) -> None:
        key, _ = next(iter(self._memory.items()))
        self._forget(key)
        self.evictions += 1

    def _forget(self, key: Hashable) -> None:
        slot = self._memory.pop(key, None)
        if slot is None:
            return
        block, row = slot
        block.free.append(row)
        self.nbytes -= self._entry_bytes(key)
        if not block.in_use:  # released: its memory goes back
            self._blocks[(tuple(block.rows.shape[1:]), block.rows.dtype)].remove(block)
            self.nbytes -= block.rows.nbytes

    def __len__(self) -> int:
        return len(self._memory)


def split_cached(entries: Iterable[Tuple[Hashable, object]], get: Callable[[Hashable], Any]) -> Tuple[Dict, Dict]:
    """``(found, missing)`` for ``(key, item)`` entries, each key looked up once with ``get`` (``None``: not cached):
    ``found`` maps a key to its cached value, ``missing`` to the first item given for it, in first-appearance order."""
    found: Dict = {}
    missing: Dict = {}
    for key, item in entries:
        if key in found or key in missing:
            continue
        value = get(key)
        if value is None:
            missing[key] = item
        else:
            found[key] = value
    return found, missing


def encode_cached(
    items: Sequence,
    keys: Sequence[str],
    encode_batch: Callable[[List], torch.Tensor],
    cache: EmbeddingCache,
    *,
    batch_size: int,
    desc: str,
    show_progress: Optional[bool] = None,
    sort_key: Optional[Callable[[object], Any]] = None,
    group_key: Optional[Callable[[object], Hashable]] = None,
    prepare: Optional[Callable[[Iterator[List]], Iterator]] = None,
) -> torch.Tensor:
    """Encode each distinct item once (by key), in batches, and return embeddings in input order.

    ``sort_key``: items to encode are batched in ascending ``sort_key(item)`` (stable; any sortable value), e.g. token
    length, so a batch padded to its longest member wastes little work. ``group_key`` (with ``sort_key``): a batch
    never holds two values of ``group_key(sort_key(item))``, e.g. the width a text of that many tokens runs at (each
    group then fills whole fixed-row forwards but its last); it must not decrease as the sort key grows.
    ``prepare``: maps the iterator of batches (lists of items) to what ``encode_batch`` takes; it may run ahead (e.g.
    preprocess the next batches in worker processes).
    """
    if group_key is not None and sort_key is None:
        raise ValueError("group_key maps sort_key's values: pass sort_key too")
    found, todo = split_cached(zip(keys, items), cache.get)
    pending = list(todo.items())
    if sort_key is not None:
        sort_value = {key: sort_key(item) for key, item in pending}
        pending.sort(key=lambda entry: sort_value[entry[0]])
    if show_progress is None:
        show_progress = len(pending) > batch_size
    groups = [pending] if group_key is None else [
        list(group) for _, group in itertools.groupby(pending, key=lambda entry: group_key(sort_value[entry[0]]))]
    chunks = [group[start:start + batch_size] for group in groups for start in range(0, len(group), batch_size)]
    batches = (prepare or iter)(iter([[item for _, item in chunk] for chunk in chunks]))
    with tqdm(total=len(pending), desc=desc, unit="item", disable=not show_progress) as bar:
        for chunk, batch in zip(chunks, batches):
            embeddings = encode_batch(batch)
            for (key, _), embedding in zip(chunk, embeddings):
                found[key] = cache.put(key, embedding)  # kept for this call even if the cache evicts it
            bar.update(len(chunk))
    import torch

    return torch.stack([found[key] for key in keys])
