"""Device and dtype resolution: where and in which floating-point type a model runs."""

from __future__ import annotations

import os
from typing import Optional

import torch

_DTYPES = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
           "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}


def resolve_device(device: Optional[str] = "auto") -> torch.device:
    """``"auto"`` (or None) picks CUDA when available (this process's ``LOCAL_RANK`` GPU), else CPU."""
    if device in (None, "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        return torch.device("cpu")
    return torch.device(device)


def resolve_dtype(dtype) -> torch.dtype:
    """float32 unless asked otherwise: the official implementations score in fp32 on CPU."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        return torch.float32
    if dtype not in _DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}; use one of {sorted(_DTYPES)}")
    return _DTYPES[dtype]
