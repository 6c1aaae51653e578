"""Polos: CLIP ViT-B/32 + SimCSE-RoBERTa features → MLP, max over references."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from tqdm.auto import tqdm

from capeval.backbones.clip import OPENAI_FP16, ClipBackbone, check_shared_backbone
from capeval.backbones.text_encoder import TokenizerTextEncoder
from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import DEFAULT_CACHE_BYTES, EmbeddingCache
from capeval.core.constants import CLIPSCORE_PREFIX
from capeval.core.device import resolve_device, resolve_dtype
from capeval.core.hub import load_safetensors, registered_weights, resolve
from capeval.core.inputs import ValidInputs, load_images
from capeval.core.keys import ScoreKey
from capeval.core.option_types import BatchSize, Bytes, Device, Dtype, OneOf, PathLike, Precision, Workers
from capeval.core.scoring import Scorer, check_precision, summarize
from capeval.core.shapes import in_fixed_rows, shapes_tag
from capeval.core.truncation import warn_truncated
from capeval.functional.polos import polos_features, scalar_mix
from capeval.polos.checkpoint import CONFIG_FILE, HEAD_FILE, SIMCSE_FILES, head_config, read_official_head

MAX_TEXT_TOKENS = 512
STATISTICS = ("per_sentence", "batch")


class PolosHead(torch.nn.Module):
    """The trained part of Polos: the scalar mix (one logit per hidden state + gamma) and the 3-layer MLP."""

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

    def digest(self) -> str:
        """Identifies the scalar mix, on which cached sentence vectors depend."""
        values = torch.cat([self.scalar_parameters.detach().flatten(), self.gamma.detach().flatten()]).cpu()
        return hashlib.sha256(values.float().numpy().tobytes()).hexdigest()[:16]


def head_from_config(config: Dict, state_dict=None) -> PolosHead:
    head = PolosHead(config["feature_dim"], config["hidden"], config["num_layers"])
    if state_dict is not None:
        head.load_state_dict(state_dict)
    return head.eval()


def load_head(weights: str, cache_dir=None) -> Tuple[PolosHead, Dict]:
    """Our head artifact (registry name, hub id or directory), or the official ``reprod.ckpt`` file itself."""
    if Path(weights).is_file():
        state, config = read_official_head(Path(weights))
        return head_from_config(config, state), config
    directory = resolve(weights, [CONFIG_FILE, HEAD_FILE], cache_dir=cache_dir)
    config = json.loads((directory / CONFIG_FILE).read_text())
    return head_from_config(config, load_safetensors(directory / HEAD_FILE)), config


def clip_weights_of(options: dict) -> str:
    """The CLIP weights ``PolosScorer(**options)`` loads: its head's ``clip_weights`` (for sharing a backbone)."""
    if options.get("config") is not None:
        return options["config"]["clip_weights"]
    weights = options.get("weights") or "polos"
    if Path(weights).is_file():  # the official reprod.ckpt: CLIP ViT-B/32
        return head_config(text_dim=0, clip_dim=0)["clip_weights"]
    directory = resolve(weights, [CONFIG_FILE, HEAD_FILE], cache_dir=options.get("cache_dir"))
    return json.loads((directory / CONFIG_FILE).read_text())["clip_weights"]


def encoder_dir(name: str, cache_dir=None) -> Path:
    """The SimCSE files: a registry name, a local directory, or a hub id in the SimCSE repo layout."""
    weights = registered_weights()
    if name in weights:
        return resolve(name, list(weights[name].files), cache_dir=cache_dir)
    return resolve(name, None if Path(name).is_dir() else list(SIMCSE_FILES), cache_dir=cache_dir)


class SimcseEncoder(TokenizerTextEncoder):
    """SimCSE-RoBERTa sentence vectors: position 0 of the Polos ``head``'s layer-normalised scalar mix of all hidden
    states (embeddings + every layer). :meth:`encode_texts`: per-sentence statistics, each distinct text once, cached
    by encoder, scalar mix and dtype; :meth:`official_batch`: the official batch-wide statistics.

    Texts are not truncated below 512 tokens (the encoder's limit); longer ones are truncated, counted and warned.
    """

    encoder_name = "SimCSE"

    def __init__(self, name: str, head: PolosHead, *, device, dtype, batch_size: int = 64, cache_dir=None,
                 persist_dir=None, cache_bytes: int = DEFAULT_CACHE_BYTES):
        from transformers import AutoModel, AutoTokenizer

        self.directory = encoder_dir(name, cache_dir)
        self.head, self.device, self.dtype, self.batch_size = head, device, dtype, batch_size
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.directory))
        self.pad_id = self.tokenizer.pad_token_id
        self.model = AutoModel.from_pretrained(str(self.directory)).to(device, dtype).eval()
        self.hidden_size = int(self.model.config.hidden_size)
        self.num_states = int(self.model.config.num_hidden_layers) + 1
        self.token_limit = min(MAX_TEXT_TOKENS, self.tokenizer.model_max_length)
        self._persist_dir, self._cache_bytes = persist_dir, cache_bytes
        self.reset_caches()

    def reset_caches(self) -> None:
        """An empty in-memory cache of sentence vectors (persisted entries stay on disk)."""
        namespace = cache_namespace("polos-simcse", self.directory, scalar_mix=self.head.digest(), dtype=self.dtype,
                                    max_tokens=self.token_limit, shapes=shapes_tag(self.device.type))
        self.text_cache = EmbeddingCache(namespace, self._persist_dir, max_bytes=self._cache_bytes)

    def _encode_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.sentence_vectors(*self.states(input_ids, attention_mask), per_sentence=True)

    def official_batch(self, texts: List[str]) -> torch.Tensor:
        """Sentence vectors of ``texts`` as one official batch (padded to its longest text, batch-wide statistics)."""
        return self.sentence_vectors(*self.hidden_states(texts), per_sentence=False)

    def sentence_vectors(self, states: List[torch.Tensor], mask: torch.Tensor, *, per_sentence: bool) -> torch.Tensor:
        """Position 0 of the layer-normalised scalar mix of all hidden states (CPU, float32)."""
        with torch.inference_mode():
            mixed = scalar_mix(states, mask, self.head.scalar_parameters, self.head.gamma, per_sentence=per_sentence)
        return mixed[:, 0].cpu()

    @torch.inference_mode()
    def hidden_states(self, texts: List[str]) -> Tuple[List[torch.Tensor], torch.Tensor]:
        """float32 hidden states, each (B, T, D), and the (B, T) attention mask, on the encoder's device; the batch
        padded to its longest text (the official batches)."""
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.token_limit, return_tensors="pt")
        return self.states(batch["input_ids"], batch["attention_mask"])

    @torch.inference_mode()
    def states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Tuple[List[torch.Tensor], torch.Tensor]:
        """float32 hidden states (embeddings and every layer) of token tensors, and the mask, on the encoder's
        device."""
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True).hidden_states
        return [h.float() for h in hidden], attention_mask


# references per head forward (the last one zero-padded): a matrix product over a few rows gives other bits than
# the same rows among many, so a fixed count keeps a score independent of batch size, order and company
HEAD_ROWS = 64


class PolosScorer(Scorer):
    """Polos with per-sentence scalar-mix statistics by default (``statistics="batch"``: the official
    batch-wide statistics, for exact paper reproduction) and every reference used.

    ``weights``: our head artifact or the official ``reprod.ckpt``; or pass an in-memory ``head`` and its ``config``.
    ``clip_backbone``: a loaded :class:`ClipBackbone` of the head's CLIP weights to share (e.g. with RefCLIP-S).
    ``preprocess_workers``: CLIP's official image preprocessing in that many worker processes (same pixels).
    """

    name, images, references = "polos", "required", "required"
    key_metadata = {"polos": ScoreKey("Polos", 100.0)}
    clip_weights_of = staticmethod(clip_weights_of)  # the CLIP weights it loads, for lending it a backbone

    @staticmethod
    def corpus_level_of(options: Mapping) -> bool:
        """``statistics="batch"`` is corpus-level: a sample's value depends on the captions sharing its batch."""
        return options.get("statistics", "per_sentence") == "batch"

    def __init__(self, weights: Optional[str] = "polos", *,
                 statistics: Annotated[str, OneOf(STATISTICS)] = "per_sentence", device: Device = "auto",
                 dtype: Optional[Dtype] = None, precision: Precision = None, batch_size: BatchSize = 64,
                 cache_dir: Optional[PathLike] = None, persist_dir: Optional[PathLike] = None,
                 cache_bytes: Bytes = DEFAULT_CACHE_BYTES, preprocess_workers: Workers = 0,
                 head: Optional[PolosHead] = None, config: Optional[Dict] = None,
                 clip_backbone: Optional[ClipBackbone] = None):
        if statistics not in STATISTICS:
            raise ValueError(f"statistics must be one of {STATISTICS}, not {statistics!r}")
        official = check_precision(precision, dtype, metric="polos")
        self.statistics = statistics
        self.corpus_level = self.corpus_level_of({"statistics": statistics})
        # precision="official" (polos 0.1.3 on CUDA): OpenAI's mixed fp16 CLIP, its features combined in fp16;
        # SimCSE and the head in fp32
        self.official = official
        clip_precision = OPENAI_FP16 if self.official else "uniform"
        self.device, self.dtype, self.batch_size = resolve_device(device), resolve_dtype(dtype), batch_size
        if head is None:
            head, config = load_head(weights, cache_dir)
        self.head, self.config = head.to(self.device), config
        self._owns_clip = clip_backbone is None  # a borrowed backbone's caches are its owner's to reset
        if clip_backbone is not None:
            self.clip = check_shared_backbone(clip_backbone, config["clip_weights"], cache_dir=cache_dir,
                                              precision=clip_precision, preprocess_workers=preprocess_workers)
        else:
            self.clip = ClipBackbone(config["clip_weights"], device=device, dtype=dtype, precision=clip_precision,
                                     batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir,
                                     cache_bytes=cache_bytes, preprocess_workers=preprocess_workers)
        self.encoder = SimcseEncoder(config["text_encoder"], self.head, device=self.device, dtype=self.dtype,
                                     batch_size=batch_size, cache_dir=cache_dir, persist_dir=persist_dir,
                                     cache_bytes=cache_bytes)
        self._check_dimensions()

    def provenance_parts(self) -> Tuple[object, ...]:
        return (self, self.clip)

    def _check_dimensions(self) -> None:
        clip_dim = int(self.clip.model.text_projection.shape[1])
        expected = (self.config["text_dim"], self.config["clip_dim"], self.config["num_layers"])
        found = (self.encoder.hidden_size, clip_dim, self.encoder.num_states)
        if expected != found:
            raise ValueError(f"the Polos head expects (text dim, CLIP dim, hidden states) = {expected} but its "
                             f"encoders give {found}")

    def reset_caches(self) -> None:
        """Empty in-memory caches of sentence vectors and, unless the CLIP backbone is borrowed, CLIP features."""
        if self._owns_clip:
            self.clip.reset_caches()
        self.encoder.reset_caches()

    def official_batch_embeddings(self, predictions: List[str], refs: List[List[str]]):
        """Batch-wide statistics as in the official code: consecutive chunks of ``batch_size`` samples; a chunk's
        candidates form one batch and, for each j, the j-th references of its samples form one batch (the official
        code stops at the smallest reference count; here samples with fewer references just sit out)."""
        offsets = [0]
        for sample in refs:
            offsets.append(offsets[-1] + len(sample))
        cand = torch.empty(len(predictions), self.encoder.hidden_size)
        ref = torch.empty(offsets[-1], self.encoder.hidden_size)
        chunks = range(0, len(predictions), self.batch_size)
        for start in tqdm(chunks, desc="SimCSE batches", disable=len(chunks) < 2):
            members = range(start, min(start + self.batch_size, len(predictions)))
            cand[start:members.stop] = self.encoder.official_batch([predictions[i] for i in members])
            for j in range(max(len(refs[i]) for i in members)):
                having = [i for i in members if len(refs[i]) > j]
                vectors = self.encoder.official_batch([refs[i][j] for i in having])
                ref[[offsets[i] + j for i in having]] = vectors
        return cand, ref

    def clip_images(self, images: Sequence) -> torch.Tensor:
        """Unnormalised CLIP image features; images are converted to RGB first, as the official data loading does."""
        loaded, rgb = load_images(images), {}  # each distinct image object converted once (a repeated file: one)
        for image in loaded:
            if id(image) not in rgb:
                rgb[id(image)] = image if image.mode == "RGB" else image.convert("RGB")
        return self.clip.encode_images([rgb[id(image)] for image in loaded])

    def clip_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Unnormalised CLIP text features of ``"A photo depicts " + text``."""
        return self.clip.encode_texts([CLIPSCORE_PREFIX + text for text in texts])

    def _score(self, inputs: ValidInputs) -> dict:
        predictions, images, refs, n = inputs.predictions, inputs.images, inputs.references, len(inputs)
        flat = [r for sample in refs for r in sample]
        owner = torch.as_tensor([i for i, sample in enumerate(refs) for _ in sample])
        image, texts_clip = self.clip_images(images), self.clip_texts([*predictions, *flat])  # one length bucketing
        cand_clip, ref_clip = texts_clip[:n], texts_clip[n:]
        if self.statistics == "batch":
            cand_se, ref_se = self.official_batch_embeddings(predictions, refs)
        else:
            texts_se = self.encoder.encode_texts([*predictions, *flat])  # one call: one length sorting
            cand_se, ref_se = texts_se[:n], texts_se[n:]
        if self.official:  # officially the fp16 CLIP features' |a−b| and a⊙b are fp16; torch.cat promotes to fp32
            image, cand_clip, ref_clip = image.half(), cand_clip.half(), ref_clip.half()
        features = polos_features(ref_se, cand_se[owner], image[owner], cand_clip[owner], ref_clip)
        with torch.inference_mode():  # fixed-row forwards: a score's bits do not depend on the other references
            per_ref = in_fixed_rows(lambda chunk: self.head.mlp(chunk.to(self.device)).squeeze(-1).float().cpu(),
                                    features, rows=HEAD_ROWS)
        best = torch.full((n,), float("-inf")).scatter_reduce(0, owner, per_ref, reduce="amax")
        result = summarize({"polos": best.tolist()})
        texts = [*predictions, *flat]
        result["truncated_texts"] = simcse = self.encoder.truncation.count(texts)
        clip_texts = [CLIPSCORE_PREFIX + text for text in texts]
        result["clip_truncated_texts"] = clip = self.clip.truncation.count(clip_texts)
        warn_truncated([self.encoder.truncation.describe(simcse, len(texts)) if simcse else "",
                        self.clip.truncation.describe(clip, len(texts)) if clip else ""])
        return result
