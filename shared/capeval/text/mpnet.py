"""MPNetScore (as in EnsembEval): cosine between all-mpnet-base-v2 sentence embeddings (mean pooling over tokens,
L2-normalised, 384-token limit as sentence-transformers), averaged over the references; the encoder is the process's
one of its settings (:func:`shared_mpnet_encoder`), which CAPTURE's soft stage and Soft-SPICE hold too."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch

from capeval.backbones.text_encoder import TokenizerTextEncoder
from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import DEFAULT_CACHE_BYTES, EmbeddingCache
from capeval.core.device import resolve_device, resolve_dtype
from capeval.core.hub import get_spec, resolve
from capeval.core.inputs import ValidInputs
from capeval.core.keys import ScoreKey
from capeval.core.live_models import LiveModels
from capeval.core.option_types import BatchSize, Bytes, Device, Dtype, PathLike
from capeval.core.scoring import Scorer, summarize
from capeval.core.shapes import shapes_tag
from capeval.core.truncation import warn_truncated

MAX_TOKENS = 384  # sentence-transformers' max_seq_length for all-mpnet-base-v2
ENCODER_WEIGHTS = "all-mpnet-base-v2"


class MPNetEncoder(TokenizerTextEncoder):
    """all-mpnet-base-v2 sentence embeddings (mean pooling over the text's tokens, L2-normalised), cached."""

    encoder_name, token_limit = "MPNet", MAX_TOKENS

    def __init__(self, weights: str = ENCODER_WEIGHTS, *, device: str = "auto", dtype=None, batch_size: int = 64,
                 cache_dir=None, persist_dir=None, cache_bytes: int = DEFAULT_CACHE_BYTES):
        from transformers import AutoModel, AutoTokenizer

        files = list(get_spec(weights).files) if weights == ENCODER_WEIGHTS else None
        directory = resolve(weights, files, cache_dir=cache_dir)
        self.device, self.dtype, self.batch_size = resolve_device(device), resolve_dtype(dtype), batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(str(directory))
        self.pad_id = self.tokenizer.pad_token_id
        self.model = AutoModel.from_pretrained(str(directory)).to(self.device, self.dtype).eval()
        self.text_cache = EmbeddingCache(cache_namespace("mpnet-text", directory, dtype=self.dtype, max_tokens=MAX_TOKENS,
                                                         shapes=shapes_tag(self.device.type)),
                                         persist_dir, max_bytes=cache_bytes)

    def _encode_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state.float()
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1).cpu()


_LIVE = LiveModels()


def shared_mpnet_encoder(weights: str = ENCODER_WEIGHTS, *, device="auto", dtype=None, batch_size: int = 64,
                         cache_dir=None, persist_dir=None, cache_bytes: int = DEFAULT_CACHE_BYTES) -> MPNetEncoder:
    """The :class:`MPNetEncoder` of these weights, device, dtype and cache settings that is alive in this process,
    else a new one (:class:`~capeval.core.live_models.LiveModels`): one model load and one embedding cache for
    MPNetScore, CAPTURE's soft stage and Soft-SPICE."""
    files = list(get_spec(weights).files) if weights == ENCODER_WEIGHTS else None
    directory = resolve(weights, files, cache_dir=cache_dir).resolve()
    settings = {"device": str(resolve_device(device)), "dtype": str(resolve_dtype(dtype)), "batch_size": batch_size,
                "persist_dir": str(Path(persist_dir).resolve()) if persist_dir else None, "cache_bytes": cache_bytes}
    return _LIVE.get(directory, settings, lambda: MPNetEncoder(
        weights, device=device, dtype=dtype, batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir,
        cache_bytes=cache_bytes))


class MPNetScorer(Scorer):
    name, images, references = "mpnet_score", "unused", "required"
    key_metadata = {"mpnet_score": ScoreKey("MPNetScore")}

    def __init__(self, weights: str = ENCODER_WEIGHTS, *, device: Device = "auto", dtype: Optional[Dtype] = None,
                 batch_size: BatchSize = 64, cache_dir: Optional[PathLike] = None,
                 persist_dir: Optional[PathLike] = None, cache_bytes: Bytes = DEFAULT_CACHE_BYTES):
        self.encoder = shared_mpnet_encoder(weights, device=device, dtype=dtype, batch_size=batch_size,
                                            cache_dir=cache_dir, persist_dir=persist_dir, cache_bytes=cache_bytes)

    def _score(self, inputs: ValidInputs) -> dict:
        predictions, refs = inputs.predictions, inputs.references
        flat = [r for sample in refs for r in sample]
        owner = torch.as_tensor([i for i, sample in enumerate(refs) for _ in sample])
        cand, ref = self.encoder.encode_texts(predictions), self.encoder.encode_texts(flat)
        cos = (cand[owner] * ref).sum(-1)
        total = torch.zeros(len(predictions)).index_add(0, owner, cos)
        counts = torch.zeros(len(predictions)).index_add(0, owner, torch.ones_like(cos))
        result = summarize({"mpnet_score": (total / counts).tolist()})
        texts = [*predictions, *flat]
        truncation = self.encoder.truncation
        result["truncated_texts"] = truncated = truncation.count(texts)
        warn_truncated([truncation.describe(truncated, len(texts)) if truncated else ""])
        return result
