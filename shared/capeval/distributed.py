"""Multi-process scoring under ``torchrun`` / ``accelerate launch``, on accelerate's process group (``capeval[dist]``).

accelerate joins the group (gloo on CPU, NCCL on GPU) and sets each process's own device (``LOCAL_RANK``) before
any collective. Each process scores the samples ``i`` with ``i % world_size == rank``; results are gathered and
put back in input order on every rank. Corpus-level scorers (per-sample values that depend on the whole corpus,
such as CIDEr) are refused: score them in one process. An error in one process is raised in every process, so
none is left waiting in a collective.
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.distributed as dist

from capeval.core.errors import InputError
from capeval.core.inputs import as_list, check_lengths
from capeval.core.scoring import Scorer


def process_state():
    """accelerate's ``PartialState`` when this process is one of several (a torchrun / accelerate launch
    environment, or a group already joined), else ``None``. Joining sets this process's device first."""
    joined = dist.is_available() and dist.is_initialized()
    if not joined and int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    try:
        from accelerate import PartialState
    except ImportError as error:  # pragma: no cover - accelerate is the `dist` extra
        raise ImportError("multi-process scoring needs accelerate: pip install 'capeval[dist]'") from error
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6: CUDA, XPU, MPS...
    has_accelerator = accelerator.is_available() if accelerator is not None else torch.cuda.is_available()
    state = PartialState(cpu=not has_accelerator)  # (ignored when the group is already set up, e.g. by a Trainer)
    return state if state.num_processes > 1 else None


def share(state, n: int) -> List[int]:
    """The sample indices this process scores: ``i % num_processes == process_index``."""
    return list(range(state.process_index, n, state.num_processes))


def _failure(error: BaseException) -> Dict[str, Any]:
    return {"message": f"{type(error).__name__}: {error}", "input_error": isinstance(error, InputError)}


def _raise_remote(failures: List[Optional[Dict[str, Any]]]) -> None:
    for rank, failure in enumerate(failures):
        if failure is not None:
            kind = InputError if failure["input_error"] else RuntimeError
            raise kind(f"process {rank} failed: {failure['message']}")


def gather_shares(state, n: int, indices: Sequence[int], compute: Callable[[], Dict]) -> Dict:
    """Run ``compute()`` (this process's result for the samples ``indices``) in every process and merge the
    results of all processes (:func:`merge_shares`)."""
    from accelerate.utils import gather_object

    failure = None
    try:
        part = {"indices": list(indices), "result": compute() if len(indices) else {}, "failure": None}
    except Exception as error:  # noqa: BLE001 - re-raised below, after the other processes heard of it
        failure = error
        part = {"indices": [], "result": {}, "failure": _failure(error)}
    parts = gather_object([part])
    if failure is not None:
        raise failure
    _raise_remote([p["failure"] for p in parts])
    return merge_shares(parts, n)


def merge_shares(parts: Sequence[Dict], n: int) -> Dict:
    """The results of the processes (``{"indices", "result"}`` each) as one result on the ``n`` samples: per-sample
    lists put back in input order, other numbers (counters such as ``truncated_texts``) summed, and each mean taken as
    the scorer takes it (:func:`_mean_of_shares`)."""
    identities = {part["result"]["hashcode"]: part["result"]["provenance"] for part in parts
                  if "hashcode" in part["result"]}
    if len(identities) > 1:
        raise RuntimeError(f"the processes scored with different weights or options: hashcodes {sorted(identities)}")
    columns: Dict[str, List] = {}
    counters: Dict[str, float] = {}
    for part in parts:
        for key, value in part["result"].items():
            if key.endswith("_per_sample"):
                column = columns.setdefault(key[: -len("_per_sample")], [None] * n)
                for index, v in zip(part["indices"], value):
                    column[index] = None if v is None else float(v)
            elif f"{key}_per_sample" not in part["result"] and isinstance(value, (int, float)):
                counters[key] = counters.get(key, 0) + value
    out: Dict[str, object] = {}
    for key, column in columns.items():
        out[key] = _mean_of_shares(key, column, parts)
        out[f"{key}_per_sample"] = column
    identity = {"provenance": next(iter(identities.values())), "hashcode": next(iter(identities))} if identities else {}
    return {**out, **counters, **identity}


def _defined(values) -> List[float]:
    return [v for v in values if v is not None and not math.isnan(v)]


def _mean_of_shares(key: str, column: List, parts: Sequence[Dict]) -> float:
    """The mean of a merged score column, as the scorer averages its own: samples without a score (``None``: empty
    captions skipped) never count; a NaN value counts (the mean is NaN) when some process's own mean held one, and is
    left out when the scorer leaves undefined values out of its mean (HICE-S's local terms)."""
    for part in parts:
        own_mean, own = part["result"].get(key), part["result"].get(f"{key}_per_sample")
        if isinstance(own_mean, float) and math.isnan(own_mean) and own is not None and _defined(own):
            return float("nan")
    defined = _defined(column)
    return float(np.mean(defined)) if defined else float("nan")


def on_main_process(state, compute: Callable[[], Any]) -> Any:
    """``compute()`` in the main process only; its result (or its error) reaches every process."""
    from accelerate.utils import broadcast_object_list

    payload: List[Any] = [None]
    failure = None
    if state.is_main_process:
        try:
            payload = [{"result": compute(), "failure": None}]
        except Exception as error:  # noqa: BLE001 - re-raised below, after the other processes heard of it
            failure = error
            payload = [{"result": None, "failure": _failure(error)}]
    broadcast_object_list(payload, from_process=0)
    if failure is not None:
        raise failure
    _raise_remote([payload[0]["failure"]])
    return payload[0]["result"]


def score_distributed(scorer, predictions: Sequence[str], images: Optional[Sequence] = None,
                      references: Optional[Sequence] = None, *, corpus_level: Optional[bool] = None) -> Dict:
    """Score with every process of the group; each returns the full result, in input order. ``corpus_level``:
    by default a capeval scorer's own (corpus-level scorers are refused). Errors name the samples' indices in the input.
    Load the scorer after :func:`process_state` (or with ``device="auto"``) so that it sits on this process's
    device."""
    state = process_state()
    if state is None:
        return scorer.score(predictions, images=images, references=references)
    if corpus_level if corpus_level is not None else isinstance(scorer, Scorer) and scorer.corpus_level:
        raise InputError("corpus-level scorers cannot be split across processes; score the whole corpus in one")
    predictions = as_list(predictions, "predictions")
    check_lengths(predictions=predictions, images=images, references=references)
    mine = share(state, len(predictions))

    def pick(seq):
        return None if seq is None else [seq[i] for i in mine]

    def compute() -> Dict:
        if isinstance(scorer, Scorer):
            return scorer.score_inputs(scorer.validate(pick(predictions), pick(images), pick(references),
                                                       indices=mine))
        return scorer.score(pick(predictions), images=pick(images), references=pick(references))

    return gather_shares(state, len(predictions), mine, compute)
