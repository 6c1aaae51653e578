"""Polos: CLIP ViT-B/32 + SimCSE-RoBERTa features → MLP, max over references."""

from __future__ import annotations

import json
import warnings
from typing import List, Optional, Sequence

import torch

from capeval.clip import ClipBackbone
from capeval.errors import InputError
from capeval.functional.polos import polos_features, scalar_mix
from capeval.hub import resolve
from capeval.inputs import check_captions, check_lengths, check_references, load_images
from capeval.runtime import EmbeddingCache, encode_cached, resolve_device, resolve_dtype, text_key
from capeval.scoring import summarize

HEAD_FILE = "polos_head.safetensors"
CONFIG_FILE = "polos_config.json"
CLIP_PREFIX = "A photo depicts "
STATISTICS = ("per_sentence", "batch")


class PolosHead(torch.nn.Module):
    """The trained part of Polos: the 13-layer scalar mix and the 3-layer MLP (Tanh, dropout, sigmoid)."""

    def __init__(self, feature_dim: int, hidden: Sequence[int] = (2304, 1152), num_layers: int = 13,
                 dropout: float = 0.1):
        super().__init__()
        self.scalar_parameters = torch.nn.Parameter(torch.zeros(num_layers))
        self.gamma = torch.nn.Parameter(torch.ones(1))
        h1, h2 = hidden
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(feature_dim, h1), torch.nn.Tanh(), torch.nn.Dropout(dropout),
            torch.nn.Linear(h1, h2), torch.nn.Tanh(), torch.nn.Dropout(dropout),
            torch.nn.Linear(h2, 1), torch.nn.Sigmoid(),
        )


def load_head(weights: str, cache_dir=None):
    """Our head artifact (registry name, hub id or directory), or the official ``reprod.ckpt`` file itself."""
    from pathlib import Path

    from safetensors.torch import load_file

    if Path(weights).is_file():
        return _head_from_official_checkpoint(Path(weights))
    directory = resolve(weights, [CONFIG_FILE, HEAD_FILE], cache_dir=cache_dir)
    config = json.loads((directory / CONFIG_FILE).read_text())
    head = PolosHead(config["feature_dim"], config["hidden"], config["num_layers"])
    head.load_state_dict(load_file(str(directory / HEAD_FILE)))
    return head.eval(), config


def _head_from_official_checkpoint(path):
    from capeval.convert import load_torch_checkpoint
    from capeval.models.polos import head_config, official_to_head_state

    checkpoint = load_torch_checkpoint(path)
    state = official_to_head_state(checkpoint.get("state_dict", checkpoint))
    config = head_config(state)
    head = PolosHead(config["feature_dim"], config["hidden"], config["num_layers"])
    head.load_state_dict(state)
    return head.eval(), config


class PolosScorer:
    """Polos with per-sentence scalar-mix statistics by default (``statistics="batch"``: the official
    batch-wide statistics, for exact paper reproduction) and every reference used."""

    def __init__(self, weights: str = "polos", *, statistics: str = "per_sentence", device: str = "auto",
                 dtype=None, batch_size: int = 64, cache_dir=None, persist_dir=None,
                 clip_backbone: Optional[ClipBackbone] = None):
        from transformers import AutoModel, AutoTokenizer

        if statistics not in STATISTICS:
            raise ValueError(f"statistics must be one of {STATISTICS}, not {statistics!r}")
        self.statistics = statistics
        self.device, self.dtype, self.batch_size = resolve_device(device), resolve_dtype(dtype), batch_size
        self.head, self.config = load_head(weights, cache_dir)
        self.head.to(self.device)
        self.clip = clip_backbone or ClipBackbone(self.config["clip_weights"], device=device, dtype=dtype,
                                                  batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir)
        encoder_dir = _encoder_dir(self.config["text_encoder"], cache_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(str(encoder_dir))
        self.encoder = AutoModel.from_pretrained(str(encoder_dir)).to(self.device, self.dtype).eval()
        self.text_cache = EmbeddingCache(f"polos-simcse|{encoder_dir.resolve()}|{weights}|{self.dtype}", persist_dir)
        self.truncated_texts = 0

    @torch.inference_mode()
    def _sentence_batch(self, texts: List[str]) -> torch.Tensor:
        """Position 0 of the scalar mix of all hidden states, statistics per ``self.statistics``."""
        limit = min(512, self.tokenizer.model_max_length)
        lengths = [len(ids) for ids in self.tokenizer(texts, add_special_tokens=True)["input_ids"]]
        too_long = sum(n > limit for n in lengths)
        if too_long:
            self.truncated_texts += too_long
            warnings.warn(f"{too_long} of {len(texts)} texts exceed {limit} SimCSE tokens and were truncated")
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=limit, return_tensors="pt")
        batch = {k: v.to(self.device) for k, v in batch.items()}
        hidden = self.encoder(**batch, output_hidden_states=True).hidden_states
        mixed = scalar_mix([h.float() for h in hidden], batch["attention_mask"], self.head.scalar_parameters,
                           self.head.gamma, per_sentence=self.statistics == "per_sentence")
        return mixed[:, 0]

    def sentence_embeddings(self, texts: Sequence[str]) -> torch.Tensor:
        if self.statistics == "batch":  # depends on batch composition: never cached
            return torch.cat([self._sentence_batch(list(texts[i:i + self.batch_size]))
                              for i in range(0, len(texts), self.batch_size)]).cpu()
        return encode_cached(texts, [text_key(t) for t in texts], self._sentence_batch, self.text_cache,
                             batch_size=self.batch_size, desc="SimCSE texts")

    def score(self, predictions: Sequence[str], images: Sequence, references: Optional[Sequence] = None) -> dict:
        predictions = check_captions(predictions)
        n = check_lengths(predictions=predictions, images=images)
        if references is None:
            raise InputError("polos needs references")
        refs = check_references(references, n)
        flat = [r for sample in refs for r in sample]
        owner = [i for i, sample in enumerate(refs) for _ in sample]
        image = self.clip.encode_images(load_images(images))
        cand_clip = self.clip.encode_texts([CLIP_PREFIX + p for p in predictions])
        ref_clip = self.clip.encode_texts([CLIP_PREFIX + r for r in flat])
        if self.statistics == "batch":
            cand_se, ref_se = self._official_batches(predictions, refs)
        else:
            cand_se, ref_se = self.sentence_embeddings(predictions), self.sentence_embeddings(flat)
        index = torch.as_tensor(owner)
        features = polos_features(ref_se, cand_se[index], image[index], cand_clip[index], ref_clip)
        with torch.inference_mode():
            per_ref = torch.cat([self.head.mlp(chunk.to(self.device)).squeeze(-1).float().cpu()
                                 for chunk in features.split(max(self.batch_size, 1) * 8)])
        best = torch.full((n,), float("-inf")).scatter_reduce(0, index, per_ref, reduce="amax")
        result = summarize({"polos": best.tolist()})
        result["truncated_texts"] = self.truncated_texts
        return result

    def _official_batches(self, predictions, refs):
        """Batch-wide statistics as in the official code: each chunk of ``batch_size`` samples encodes its
        candidates together and its references together (all of them, unlike the official code)."""
        cand, ref = [], []
        for start in range(0, len(predictions), self.batch_size):
            cand.append(self._sentence_batch(list(predictions[start:start + self.batch_size])).cpu())
            ref.append(self._sentence_batch([r for s in refs[start:start + self.batch_size] for r in s]).cpu())
        return torch.cat(cand), torch.cat(ref)


def _encoder_dir(name: str, cache_dir):
    """A registry name, a local directory, or a hub id holding the SimCSE-layout files."""
    from pathlib import Path

    from capeval.hub import registered_weights
    from capeval.models.polos import SIMCSE_FILES

    weights = registered_weights()
    files = list(weights[name].files) if name in weights else None if Path(name).is_dir() else list(SIMCSE_FILES)
    return resolve(name, files, cache_dir=cache_dir)
