"""The FACTUAL textual scene-graph parser (``lizhuang144/flan-t5-base-VG-factual-sg``) as a backbone several metrics
share: each distinct text is generated once, and its raw output string is cached, so that every metric reads it its
own way (HICE-S through :func:`capeval.hice_s.phrases.parse_scene_graph`).

Generation is the official ``SceneGraphParser`` one: prompt ``"Generate Scene Graph: " + text.strip()``, input cut at
``max_input_length`` tokens (end token included; the end token kept), beam search (``num_beams``, early stopping when
more than one beam, default length penalty), decoder started with the pad token, at most ``max_output_length`` tokens,
decoded without special tokens and with tokenisation spaces cleaned up.

Batching (a deviation from the official code, which pads each batch of 32 texts, taken in input order, to its longest
member). Distinct inputs are generated in batches of at most ``batch_size`` inputs of exactly one token length, in
ascending length (then text): nothing is padded. Padding changes the last bits of T5's encoder states (its reductions
run over the padded width), which in a near-tie of beam scores can change a string; unpadded, a text's string is the
one it gets parsed alone, whatever other texts the run holds, in any order and batch size (tested on the CPU with the
tiny model: the same strings alone, in mixed runs, at batch sizes 1 and 32, in any order; a GPU may choose other
kernels for other batch sizes, untested). A run of texts of many lengths makes more, smaller batches.

Cache: raw strings by content key, :func:`capeval.core.cache_keys.cache_namespace` of the weights' content, dtype and
generation settings, and the sha256 of the stripped text. In memory at most ``max_cached_texts`` entries and
``cache_bytes`` bytes (least recently used leave first); with ``persist_dir`` also one JSON file per text under
``persist_dir/<namespace>``, read back in later runs: a :class:`capeval.core.disk_cache.DiskCache` of at most
``persist_bytes`` bytes (default 256 MiB), least recently used removed first, safe for processes sharing the folder.

One parser per distinct weights and settings is shared by every consumer in a process
(:func:`shared_scene_graph_parser`), with its model, caches and truncation counts.
"""

from __future__ import annotations

import json
import sys
import threading
import warnings
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from capeval.core.caches import DEFAULT_CACHE_BYTES, ENTRY_OVERHEAD, LruCache, split_cached, text_key
from capeval.core.constants import FACTUAL_FILES
from capeval.core.disk_cache import DiskCache
from capeval.core.errors import InputError
from capeval.core.live_models import LiveModels

FACTUAL_PROMPT = "Generate Scene Graph: "
DEFAULT_WEIGHTS = "flan-t5-base-vg-factual-sg"
MAX_CACHED_TEXTS = 50_000  # raw strings kept in memory (~1.1–1.5 KB each with its entry)


def _string_nbytes(value: str) -> int:
    """Memory of a cached string, its entry and key included."""
    return ENTRY_OVERHEAD + sys.getsizeof(value)


class SceneGraphParser:
    """FACTUAL's raw scene-graph strings, generated once per distinct (stripped) text; see the module docstring.

    ``parse(texts)`` returns one raw string per text; ``parse(texts, input_limits=...)`` cuts each text at its own
    limit (≤ ``max_input_length``), e.g. to reproduce a caller's official batching. ``truncation`` counts texts
    over ``max_input_length`` (prompt and end token included); ``generated_texts`` counts the texts the model
    generated (cache misses). ``dtype``: float32 by default; on a GPU prefer bfloat16 (T5 overflows in float16).
    ``persisted``: the :class:`~capeval.core.disk_cache.DiskCache` under ``persist_dir`` (None without one).
    """

    def __init__(self, weights: str = DEFAULT_WEIGHTS, *, device: str = "auto", dtype=None, batch_size: int = 32,
                 max_input_length: int = 64, max_output_length: int = 128, num_beams: int = 5,
                 show_progress: Optional[bool] = None, cache_dir=None, persist_dir=None,
                 max_cached_texts: int = MAX_CACHED_TEXTS, cache_bytes: int = DEFAULT_CACHE_BYTES,
                 persist_bytes: int = DEFAULT_CACHE_BYTES):
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        from capeval.core.cache_keys import cache_namespace
        from capeval.core.device import resolve_device, resolve_dtype
        from capeval.core.hub import resolve
        from capeval.core.truncation import TruncationCounter

        for name, value in (("batch_size", batch_size), ("max_input_length", max_input_length),
                            ("max_output_length", max_output_length), ("num_beams", num_beams)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"scene-graph parser: {name} must be an int ≥ 1, not {value!r}")
        if isinstance(persist_bytes, bool) or not isinstance(persist_bytes, int) or persist_bytes < 0:
            raise InputError(f"scene-graph parser: persist_bytes must be an int ≥ 0, not {persist_bytes!r}")
        self.directory = str(resolve(weights, list(FACTUAL_FILES), cache_dir=cache_dir))
        self.device, self.dtype = resolve_device(device), resolve_dtype(dtype)
        self.tokenizer = AutoTokenizer.from_pretrained(self.directory)
        self.model = AutoModelForSeq2SeqLM.from_pretrained(self.directory).to(self.device, self.dtype).eval()
        self.batch_size, self.num_beams, self.show_progress = batch_size, num_beams, show_progress
        self.max_input_length, self.max_output_length = max_input_length, max_output_length
        self.namespace = cache_namespace(
            "factual-scene-graph-strings", self.directory, dtype=self.dtype, prompt=FACTUAL_PROMPT,
            num_beams=num_beams, early_stopping=num_beams > 1, max_input_length=max_input_length,
            max_output_length=max_output_length, decoder_start="pad")
        # (namespace, key) -> raw string; at most max_cached_texts and cache_bytes
        self.memory: "LruCache[str]" = LruCache(max_cached_texts, max_bytes=cache_bytes, sizeof=_string_nbytes)
        self.persisted = DiskCache(Path(persist_dir) / str(self.namespace), max_bytes=persist_bytes, suffix=".json",
                                   description=self.namespace.description) if persist_dir else None
        self.truncation = TruncationCounter(self.input_length, max_input_length, "FACTUAL")
        self.generated_texts = 0
        self._lock = threading.Lock()  # one generation at a time: consumers in threads share the model

    def _token_ids(self, texts: Sequence[str]) -> List[List[int]]:
        return self.tokenizer([FACTUAL_PROMPT + t.strip() for t in texts])["input_ids"]

    def input_length(self, text: str) -> int:
        """Tokens of the prompted, stripped ``text`` before truncation (end token included)."""
        return len(self._token_ids([text])[0])

    def count_truncated(self, texts: Sequence[str]) -> int:
        """How many of ``texts`` (per occurrence) exceed ``max_input_length``."""
        return self.truncation.count([t.strip() for t in texts])

    def _cut(self, ids: List[int], limit: int) -> List[int]:
        """``ids`` cut at ``limit`` tokens as the tokenizer truncates: the end token kept."""
        return ids if len(ids) <= limit else ids[:limit - 1] + [ids[-1]]

    def generate(self, texts: Sequence[str], input_limits: Optional[Sequence[int]] = None) -> List[str]:
        """The raw strings of one batch of texts (no cache), padded to the longest input (:meth:`parse` passes
        inputs of one length only)."""
        import torch

        limits = input_limits or [self.max_input_length] * len(texts)
        rows = [self._cut(ids, limit) for ids, limit in zip(self._token_ids(texts), limits)]
        width = max(map(len, rows))
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([row + [pad] * (width - len(row)) for row in rows], device=self.device)
        mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows], device=self.device)
        with self._lock, torch.inference_mode():
            out = self.model.generate(input_ids, attention_mask=mask, use_cache=True, decoder_start_token_id=pad,
                                      num_beams=self.num_beams, max_length=self.max_output_length,
                                      early_stopping=self.num_beams > 1, num_return_sequences=1)
            self.generated_texts += len(texts)
        return self.tokenizer.batch_decode(out, skip_special_tokens=True, clean_up_tokenization_spaces=True)

    def parse(self, texts: Sequence[str], *, input_limits: Optional[Sequence[int]] = None) -> List[str]:
        """One raw scene-graph string per text (stripped); distinct inputs generated once, cached by content.
        ``input_limits``: each text's input limit in tokens (1 … ``max_input_length``; default: that)."""
        from tqdm.auto import tqdm

        texts = _checked_texts(texts)
        limits = self._checked_limits(input_limits, len(texts))
        if not texts:
            return []
        stripped = [t.strip() for t in texts]
        distinct = list(dict.fromkeys(zip(stripped, limits)))
        full = dict(zip((t for t, _ in distinct), map(len, self._token_ids([t for t, _ in distinct]))))
        keys = {(t, limit): self._key(t, full[t], limit) for t, limit in distinct}
        # found: this call's strings (the cache may evict some before the call ends); pending: key -> its input
        found, pending = split_cached(((keys[entry], entry) for entry in distinct), self._cached)
        todo = list(pending.values())
        length = {entry: min(full[entry[0]], entry[1]) for entry in todo}
        todo.sort(key=lambda entry: (length[entry], entry))
        batches: List[List[Tuple[str, int]]] = []
        for entry in todo:  # inputs of one length per batch: nothing padded
            last = batches[-1] if batches else None
            if last and len(last) < self.batch_size and length[last[0]] == length[entry]:
                last.append(entry)
            else:
                batches.append([entry])
        show = len(todo) > self.batch_size if self.show_progress is None else self.show_progress
        with tqdm(total=len(todo), desc="FACTUAL parsing", unit="text", disable=not show) as bar:
            for batch in batches:
                outputs = self.generate([t for t, _ in batch], [limit for _, limit in batch])
                generated = [(keys[entry], output) for entry, output in zip(batch, outputs)]
                found.update(generated)
                self._store(generated)
                bar.update(len(batch))
        return [found[keys[entry]] for entry in zip(stripped, limits)]

    def _checked_limits(self, input_limits: Optional[Sequence[int]], count: int) -> List[int]:
        if input_limits is None:
            return [self.max_input_length] * count
        limits = list(input_limits)
        if len(limits) != count:
            raise InputError(f"input_limits has {len(limits)} entries for {count} texts")
        for i, limit in enumerate(limits):
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= self.max_input_length:
                raise InputError(f"input_limits[{i}] must be an int in 1…{self.max_input_length} "
                                 f"(max_input_length), not {limit!r}")
        return limits

    def _key(self, text: str, length: int, limit: int) -> str:
        """The content key of ``text`` (stripped, ``length`` tokens prompted) cut at ``limit``: the text's sha256
        when the input equals the one at ``max_input_length``, else with the limit that cuts it."""
        if min(length, limit) == min(length, self.max_input_length):
            return text_key(text)
        return f"{text_key(text)}-{limit}"

    def _cached(self, key: str) -> Optional[str]:
        value = self.memory.get((self.namespace, key))
        if value is not None or self.persisted is None:
            return value
        data = self.persisted.read(key)
        if data is None:
            return None
        try:
            value = json.loads(data.decode("utf-8"))["output"]
            if not isinstance(value, str):
                raise TypeError(f"output is a {type(value).__name__}")
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"ignoring a damaged scene-graph cache entry {self.persisted.path(key)}: {exc!r}")
            return None  # generated again and rewritten
        self.memory.put((self.namespace, key), value)
        return value

    def _store(self, generated: Sequence[Tuple[str, str]]) -> None:
        """Keep each ``(key, raw string)`` in memory and, with ``persist_dir``, on disk."""
        self.memory.put_many(((self.namespace, key), value) for key, value in generated)
        if self.persisted is not None:
            self.persisted.write_many((key, json.dumps({"output": value}, ensure_ascii=False).encode("utf-8"))
                                      for key, value in generated)


def _checked_texts(texts: Sequence[str]) -> List[str]:
    if isinstance(texts, str):
        raise InputError("texts must be a list of strings, not a single string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InputError(f"texts[{i}] must be a string, not {type(text).__name__}")
    return texts


_LIVE = LiveModels()


def shared_scene_graph_parser(weights: str = DEFAULT_WEIGHTS, *, device: str = "auto", dtype=None,
                              batch_size: int = 32, max_input_length: int = 64, max_output_length: int = 128,
                              num_beams: int = 5, show_progress: Optional[bool] = None, cache_dir=None,
                              persist_dir=None, max_cached_texts: int = MAX_CACHED_TEXTS,
                              cache_bytes: int = DEFAULT_CACHE_BYTES,
                              persist_bytes: int = DEFAULT_CACHE_BYTES) -> SceneGraphParser:
    """The :class:`SceneGraphParser` of these weights and settings that is alive in this process, else a new one
    (:class:`~capeval.core.live_models.LiveModels`): every consumer holding it shares one model load and one
    generation per distinct text."""
    from capeval.core.device import resolve_device, resolve_dtype
    from capeval.core.hub import resolve

    directory = resolve(weights, list(FACTUAL_FILES), cache_dir=cache_dir).resolve()
    settings = {"device": str(resolve_device(device)), "dtype": str(resolve_dtype(dtype)), "batch_size": batch_size,
                "max_input_length": max_input_length, "max_output_length": max_output_length,
                "num_beams": num_beams, "show_progress": show_progress,
                "persist_dir": str(Path(persist_dir).resolve()) if persist_dir else None,
                "max_cached_texts": max_cached_texts, "cache_bytes": cache_bytes, "persist_bytes": persist_bytes}
    return _LIVE.get(directory, settings, lambda: SceneGraphParser(
        weights, device=device, dtype=dtype, batch_size=batch_size, max_input_length=max_input_length,
        max_output_length=max_output_length, num_beams=num_beams, show_progress=show_progress, cache_dir=cache_dir,
        persist_dir=persist_dir, max_cached_texts=max_cached_texts, cache_bytes=cache_bytes,
        persist_bytes=persist_bytes))
