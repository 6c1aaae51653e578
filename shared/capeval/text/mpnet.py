"""MPNetScore (as in EnsembEval): cosine between all-mpnet-base-v2 sentence embeddings (mean pooling over tokens,
L2-normalised, 384-token limit as sentence-transformers), averaged over the references."""

from __future__ import annotations

from typing import Sequence

import torch

from capeval.core.cache_keys import cache_namespace
from capeval.core.hub import get_spec, resolve
from capeval.core.inputs import ValidInputs
from capeval.core.runtime import (
    DEFAULT_CACHE_BYTES,
    EmbeddingCache,
    TruncationCounter,
    encode_cached,
    in_text_shapes,
    resolve_device,
    resolve_dtype,
    text_batch_size,
    text_key,
    text_width,
    warn_truncated,
)
from capeval.core.scoring import Scorer, summarize

MAX_TOKENS = 384  # sentence-transformers' max_seq_length for all-mpnet-base-v2


class MPNetScorer(Scorer):
    name, images, references = "mpnet_score", "unused", "required"

    def __init__(self, weights: str = "all-mpnet-base-v2", *, device: str = "auto", dtype=None, batch_size: int = 64,
                 cache_dir=None, persist_dir=None, cache_bytes: int = DEFAULT_CACHE_BYTES):
        from transformers import AutoModel, AutoTokenizer

        files = list(get_spec(weights).files) if weights == "all-mpnet-base-v2" else None
        directory = resolve(weights, files, cache_dir=cache_dir)
        self.device, self.dtype, self.batch_size = resolve_device(device), resolve_dtype(dtype), batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(str(directory))
        self.model = AutoModel.from_pretrained(str(directory)).to(self.device, self.dtype).eval()
        self.cache = EmbeddingCache(cache_namespace("mpnet-text", directory, dtype=self.dtype, max_tokens=MAX_TOKENS),
                                    persist_dir, max_bytes=cache_bytes)
        self.truncation = TruncationCounter(lambda text: len(self.tokenizer(text)["input_ids"]), MAX_TOKENS, "MPNet")

    def text_length(self, text: str) -> int:
        """Tokens MPNet runs on for ``text`` (the length-bucketing key; padding is masked out)."""
        return min(len(self.tokenizer(text)["input_ids"]), MAX_TOKENS)

    @staticmethod
    def forward_width(length: int) -> int:
        """The width a text of ``length`` tokens runs at (:func:`~capeval.core.runtime.text_width`)."""
        return text_width(length, MAX_TOKENS, keep_padding=True)

    @torch.inference_mode()
    def _embed_batch(self, texts):
        """Mean-pooled, L2-normalised embeddings; each text at its own width in fixed-row forwards
        (:func:`~capeval.core.runtime.in_text_shapes`): bitwise the same in any batch."""
        ids = self.tokenizer(list(texts), truncation=True, max_length=MAX_TOKENS)["input_ids"]
        return in_text_shapes(self._pooled, ids, width_of=self.forward_width, device=self.device,
                              pad_id=self.tokenizer.pad_token_id)

    def _pooled(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.float()
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1).cpu()

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        return encode_cached(texts, [text_key(t) for t in texts], self._embed_batch, self.cache,
                             batch_size=text_batch_size(self.batch_size, self.device), desc="MPNet texts",
                             sort_key=self.text_length, group_key=self.forward_width)

    def _score(self, inputs: ValidInputs) -> dict:
        predictions, refs = inputs.predictions, inputs.references
        flat = [r for sample in refs for r in sample]
        owner = torch.as_tensor([i for i, sample in enumerate(refs) for _ in sample])
        cand, ref = self.embed(predictions), self.embed(flat)
        cos = (cand[owner] * ref).sum(-1)
        total = torch.zeros(len(predictions)).index_add(0, owner, cos)
        counts = torch.zeros(len(predictions)).index_add(0, owner, torch.ones_like(cos))
        result = summarize({"mpnet_score": (total / counts).tolist()})
        texts = [*predictions, *flat]
        result["truncated_texts"] = truncated = self.truncation.count(texts)
        warn_truncated([self.truncation.describe(truncated, len(texts)) if truncated else ""])
        return result
