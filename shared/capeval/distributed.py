"""Multi-process scoring under ``torchrun`` / ``accelerate launch`` (torch.distributed; gloo on CPU, NCCL on GPU).

Each process scores the samples ``i`` with ``i % world_size == rank`` on its own device; results are gathered
and put back in input order on every rank. Corpus-level scorers (per-sample values that depend on the whole
corpus, such as CIDEr) are refused: score them in one process.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

import torch.distributed as dist

from capeval.core.errors import InputError
from capeval.core.inputs import as_list, check_lengths
from capeval.core.scoring import Scorer, scorers, summarize


def init_from_environment() -> bool:
    """Join the process group described by torchrun's environment (no-op when already joined or single)."""
    if dist.is_available() and dist.is_initialized():
        return True
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    import torch

    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    return True


def _is_corpus_level(scorer) -> bool:
    """The scorer's own answer (EnsembEval's depends on its weights), else its registry entry's."""
    if hasattr(scorer, "corpus_level"):
        return bool(scorer.corpus_level)
    spec = scorers().get(getattr(scorer, "name", ""))
    return bool(spec and spec.is_corpus_level())


def score_distributed(scorer, predictions: Sequence[str], images: Optional[Sequence] = None,
                      references: Optional[Sequence] = None, *, corpus_level: Optional[bool] = None) -> Dict:
    """Score with every process of the group; each returns the full result, in input order. ``corpus_level``:
    default from the scorer (corpus-level scorers are refused). Errors name the samples' indices in the input."""
    if not init_from_environment():
        return scorer.score(predictions, images=images, references=references)
    if corpus_level if corpus_level is not None else _is_corpus_level(scorer):
        raise InputError("corpus-level scorers cannot be split across processes; score the whole corpus in one")
    predictions = as_list(predictions, "predictions")
    check_lengths(predictions=predictions, images=images, references=references)
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = list(range(rank, len(predictions), world))
    pick = (lambda seq: None if seq is None else [seq[i] for i in mine])  # noqa: E731
    if not mine:
        local = {}
    elif isinstance(scorer, Scorer):
        local = scorer.score_inputs(scorer.validate(pick(predictions), pick(images), pick(references), indices=mine))
    else:
        local = scorer.score(pick(predictions), images=pick(images), references=pick(references))
    gathered: List[Optional[Dict]] = [None] * world
    dist.all_gather_object(gathered, {"indices": mine, "result": local})
    per_sample: Dict[str, List[float]] = {}
    counters: Dict[str, float] = {}
    for part in gathered:
        for key, value in part["result"].items():
            if key.endswith("_per_sample"):
                column = per_sample.setdefault(key[: -len("_per_sample")], [0.0] * len(predictions))
                for index, v in zip(part["indices"], value):
                    column[index] = v
            elif f"{key}_per_sample" not in part["result"] and isinstance(value, (int, float)):
                counters[key] = counters.get(key, 0) + value
    return {**summarize(per_sample), **counters}
