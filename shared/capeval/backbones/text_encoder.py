"""The one text-encoding mechanism of every text encoder (CLIP and its variants, MPNet, SimCSE, BLIP-2's Q-Former).

:class:`TextEncoder` encodes each distinct text once (cached by content), in batches of texts sorted by length, each
text at a width of its own length (:meth:`TextEncoder.forward_width`) in forwards of a fixed number of rows
(:func:`~capeval.core.shapes.in_text_shapes`), so a feature is bitwise the same in any batch, batch size or order;
its :attr:`~TextEncoder.truncation` counts the texts over the token limit. A subclass states only what differs: the
tokenizer (:meth:`~TextEncoder.text_ids`, :meth:`~TextEncoder.token_ids`), the forward
(:meth:`~TextEncoder._encode_tokens`) and, where the default does not hold, the width rule.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from functools import cached_property
from typing import Any, List, Optional, Sequence

import torch

from capeval.core.caches import EmbeddingCache, encode_cached, text_key
from capeval.core.shapes import in_text_shapes, text_batch_size, text_width
from capeval.core.truncation import TruncationCounter


class TextEncoder(ABC):
    """Cached, length-sorted, fixed-shape text encoding with truncation counting.

    A subclass sets ``encoder_name`` (named in progress bars and truncation warnings) and, on its instances,
    ``device``, ``batch_size`` (texts per :meth:`_encode_text_batch` call, rounded up by
    :func:`~capeval.core.shapes.text_batch_size`), ``token_limit`` and ``text_cache`` (an :class:`EmbeddingCache`).
    ``pad_id`` fills a forward's positions after a text; ``keep_padding``: the width rule of
    :func:`~capeval.core.shapes.text_width` (transformers encoders keep one padding position)."""

    encoder_name: str
    keep_padding = True
    pad_id = 0
    device: torch.device
    batch_size: int
    token_limit: int
    text_cache: EmbeddingCache

    @abstractmethod
    def text_ids(self, text: str) -> List[int]:
        """The ids the tokenizer gives ``text`` before truncation (special tokens included): what is counted."""

    @abstractmethod
    def token_ids(self, texts: Sequence[str]) -> List[List[int]]:
        """The ids the forward runs on for each text: truncated to ``token_limit``, as officially."""

    @abstractmethod
    def _encode_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """One output row (float32, CPU) per row of the CPU token tensors (padding rows included)."""

    @cached_property
    def truncation(self) -> TruncationCounter:
        """Counts the texts over ``token_limit`` (each distinct text measured once)."""
        return TruncationCounter(lambda text: len(self.text_ids(text)), self.token_limit, self.encoder_name)

    def text_length(self, text: str) -> int:
        """Tokens the forward runs on for ``text`` (the length-sorting key)."""
        return len(self.token_ids([text])[0])

    def forward_width(self, length: int) -> int:
        """The width a text of ``length`` tokens runs at (:func:`~capeval.core.shapes.text_width`)."""
        return text_width(length, self.token_limit, keep_padding=self.keep_padding)

    def _text_order(self, text: str) -> Any:
        """The batching key: texts are encoded in its ascending order."""
        return self.text_length(text)

    def _text_group(self, order: Any) -> Any:
        """Texts of one value (of their :meth:`_text_order`) may share a forward: here, those of one width."""
        return self.forward_width(order)

    @torch.inference_mode()
    def _encode_text_batch(self, texts: List[str]) -> torch.Tensor:
        """Each text at its own width in fixed-row forwards: a text's feature is bitwise the same in any batch."""
        return in_text_shapes(self._encode_tokens, self.token_ids(texts), width_of=self.forward_width,
                              device=self.device, pad_id=self.pad_id)

    def encode_texts(self, texts: Sequence[str], *, show_progress: Optional[bool] = None) -> torch.Tensor:
        """Text features (float32, CPU), one row per input; each distinct text is encoded once."""
        return encode_cached(texts, [text_key(text) for text in texts], self._encode_text_batch, self.text_cache,
                             batch_size=text_batch_size(self.batch_size, self.device),
                             desc=f"{self.encoder_name} texts", show_progress=show_progress,
                             sort_key=self._text_order, group_key=self._text_group)


class TokenizerTextEncoder(TextEncoder):
    """A :class:`TextEncoder` over a transformers ``tokenizer`` (set by the subclass, with ``pad_id`` its pad token):
    texts are ``clean`` ed, then tokenized and truncated by the tokenizer itself."""

    tokenizer: Any

    def clean(self, text: str) -> str:
        """The text the tokenizer reads (unchanged unless the official preprocessing cleans captions)."""
        return text

    def text_ids(self, text: str) -> List[int]:
        return self.tokenizer(self.clean(text))["input_ids"]

    def token_ids(self, texts: Sequence[str]) -> List[List[int]]:
        return self.tokenizer([self.clean(text) for text in texts], truncation=True,
                              max_length=self.token_limit)["input_ids"]
