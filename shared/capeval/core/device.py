"""Device and dtype: which names are accepted (:func:`device_problem`, :func:`dtype_problem`: checked at every door
before anything loads, torch imported only for a device other than ``auto`` / ``cpu``), and where and in which
floating-point type a model runs (:func:`resolve_device`, :func:`resolve_dtype`)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import torch

DTYPE_NAMES = ("float32", "float16", "bfloat16")
DTYPE_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
DEVICE = re.compile(r"(cpu|cuda|mps)(?::(\d+))?")
DEVICES = "auto, cpu, cuda, cuda:N or mps"


def device_problem(device) -> Optional[str]:
    """Why ``device`` is no device to run on here (``None``: it is one): ``None`` or ``"auto"`` (CUDA when available),
    ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"mps"`` (or such a ``torch.device``) that this machine has."""
    if device in (None, "auto", "cpu"):
        return None  # no torch import for the defaults
    if type(device).__module__ == "torch" and type(device).__name__ == "device":
        device = str(device)
    if not isinstance(device, str):
        return f"a device is a string ({DEVICES}), not {type(device).__name__}"
    named = DEVICE.fullmatch(device)
    if named is None or (named.group(1) == "mps" and named.group(2) is not None):
        return f"unknown device {device!r}: use {DEVICES}"
    kind, index = named.group(1), named.group(2)
    if kind == "cpu":
        return None
    import torch

    if kind == "mps":
        return None if torch.backends.mps.is_available() else "the Apple GPU backend (mps) is not available here"
    if not torch.cuda.is_available():
        return "no CUDA GPU is available here (use cpu or auto)"
    count = torch.cuda.device_count()
    if index is not None and int(index) >= count:
        return f"this machine has {count} CUDA device(s): cuda:0 to cuda:{count - 1}"
    return None


def dtype_problem(dtype) -> Optional[str]:
    """Why ``dtype`` is no model dtype (``None``: it is one): ``None`` or ``"auto"`` (the scorer's default), a name of
    :data:`DTYPE_NAMES` (or its short alias, ``fp16``...) or such a ``torch.dtype``."""
    if dtype in (None, "auto") or (isinstance(dtype, str) and (dtype in DTYPE_NAMES or dtype in DTYPE_ALIASES)):
        return None
    if type(dtype).__module__ == "torch" and type(dtype).__name__ == "dtype":
        name = str(dtype).replace("torch.", "")
        return None if name in DTYPE_NAMES else f"unsupported dtype {name}: use {', '.join(DTYPE_NAMES)}"
    return f"unsupported dtype {dtype!r}: use {', '.join(DTYPE_NAMES)}"


def resolve_device(device: Optional[str] = "auto") -> "torch.device":
    """``"auto"`` (or None) picks CUDA when available (this process's ``LOCAL_RANK`` GPU), else CPU."""
    import torch

    if device in (None, "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        return torch.device("cpu")
    return torch.device(device)


def resolve_dtype(dtype) -> "torch.dtype":
    """float32 unless asked otherwise: the official implementations score in fp32 on CPU."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.float32
    problem = dtype_problem(dtype)
    if problem:
        raise ValueError(problem)
    return getattr(torch, DTYPE_ALIASES.get(dtype, dtype))
