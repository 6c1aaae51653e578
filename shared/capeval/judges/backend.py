"""The judge backend interface: what runs a judge model for :class:`~capeval.judges.judge_scorer.JudgeScorer`, and
the registry of backends.

A backend loads a judge (:class:`JudgeBackend`'s constructor), renders a conversation in the judge's chat template,
and answers all the prompts a scorer hands it, greedily, with the probabilities of the ten digit tokens at every
generated token (:class:`Generation`), cutting them into batches as it sees fit and yielding each batch's answers as
it completes (the scorer records them batch by batch). Without loading anything it says its version and the dtype a
load would run in (a replay keys its records with them). Its registered name and version join every judge call's
cache key and the provenance (:func:`backend_identity`), so the records of two backends never answer for each other.

A new backend is a module with a class that has these members, and one ``register_judge_backend(name,
factory="module:Class")`` line in ``judges/registration.py``; the scorers' ``judge_backend`` option then takes its
name. The first backend, ``"transformers"``, is :class:`capeval.judges.generation.JudgeModel`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Dict, Iterator, List, Mapping, Optional, Protocol, Sequence

from capeval.core.discovery import add_registered, import_attr, load_registrations
from capeval.core.errors import InputError
from capeval.core.option_types import Satisfies


@dataclass(frozen=True)
class Generation:
    """One generated answer: its token ids (up to, not including, the end-of-sequence token), its text, whether
    generation ended with the end-of-sequence token, and the digit probabilities at each generated token."""

    token_ids: List[int]
    text: str
    ended: bool
    digit_probabilities: "torch.Tensor"  # noqa: F821 (len(token_ids), 10), float32


class JudgeBackend(Protocol):
    """What runs a judge. ``model_id``: the judge's weights' identity (:mod:`capeval.judges.judge_weights`);
    ``directory``: the folder it loaded; ``dtype``: the name of the dtype it runs in (``"float16"``); ``device``: the
    device it runs on (None when spread over several); ``model_type``: the architecture it loaded (``"llava"`` asks in
    LLaVA's conversation by default); ``digit_ids``: the token ids of the digits 0-9, in order (the ids its
    :class:`Generation` token ids are read against)."""

    model_id: str
    directory: Path
    dtype: str
    device: object
    model_type: str
    digit_ids: Sequence[int]

    def __init__(self, ref: str, *, device: str, dtype, device_map, cache_dir, batch_size: int,
                 float32_vision: bool) -> None:
        """Load judge ``ref`` (registry name, hub id or folder); ``batch_size``: at most that many prompts generated
        together; ``float32_vision``: the vision tower in float32 as LLaVA's loader leaves it (a backend that cannot
        refuses it with an :class:`InputError`)."""

    @classmethod
    def version(cls) -> str:
        """The version of what it runs on (e.g. the installed library's), found without loading a judge."""

    @classmethod
    def dtype_name(cls, dtype, device: str, device_map) -> str:
        """The dtype a load with these options runs in, found without loading a judge."""

    def chat_prompt(self, messages: list) -> str:
        """The prompt of ``messages`` (:func:`capeval.judges.prompts.chat_messages`) in the judge's chat template,
        ready for the answer."""

    def answers(self, prompts: Sequence[str], images: Sequence, *, max_new_tokens: int, square: bool,
                label: Optional[str] = None) -> Iterator[List[Generation]]:
        """Greedy answers to all ``prompts`` (each holding the image placeholder once), each about its image
        (``square``: padded to a square as LLaVA's ``expand2square`` first), in order, one list per batch as each
        completes; ``label``: a progress bar's, when there is one."""


@dataclass(frozen=True)
class JudgeBackendSpec:
    """A registered backend: its name and its class as ``"module:attr"`` (imported on use)."""

    name: str
    factory: str


_BACKENDS: Dict[str, JudgeBackendSpec] = {}


def register_judge_backend(name: str, *, factory: str) -> JudgeBackendSpec:
    """Add a judge backend (called from ``judges/registration.py``): ``factory`` names its class (``"module:attr"``)."""
    return add_registered(_BACKENDS, JudgeBackendSpec(name, factory))


def judge_backends() -> Mapping[str, JudgeBackendSpec]:
    load_registrations()
    return dict(_BACKENDS)


def backend_problem(name) -> Optional[str]:
    """Why ``name`` names no judge backend (``None``: it names one)."""
    known = judge_backends()
    return None if name in known else f"no judge backend {name!r} is registered (known: {sorted(known)})"


# the judges' judge_backend option: a registered backend's name
JudgeBackendName = Annotated[str, Satisfies(backend_problem, "'transformers' or a backend added with "
                                                             "register_judge_backend")]


def judge_backend_class(name: str) -> type:
    """The class of the registered backend ``name``."""
    problem = backend_problem(name)
    if problem:
        raise InputError(f"judge_backend: {problem}")
    return import_attr(judge_backends()[name].factory)


def backend_identity(name: str) -> Dict[str, str]:
    """``{"name", "version"}`` of the registered backend ``name``: what the judge cache key and the provenance
    name."""
    return {"name": name, "version": str(judge_backend_class(name).version())}
