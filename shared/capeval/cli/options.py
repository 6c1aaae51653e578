"""The argparse types of the options that several commands share. A bad value is a one-line usage error (exit 2)
while the command line is parsed, before any model loads. :func:`check_shared_options` gives every command's
``--device``, ``--dtype``, ``--batch-size`` and ``--resamples`` these types, wherever the option is declared (a
command's own stricter type stays), and lists every ``--output`` under that one spelling."""

from __future__ import annotations

import argparse
import os
import re

DTYPES = ("float32", "float16", "bfloat16", "fp32", "fp16", "bf16")  # the names core.device.resolve_dtype reads
CUDA = re.compile(r"cuda(?::(\d+))?")


def positive_int(text: str) -> int:
    """An integer ≥ 1."""
    number = _integer(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, not {number}")
    return number


def non_negative_int(text: str) -> int:
    """An integer ≥ 0."""
    number = _integer(text)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be ≥ 0, not {number}")
    return number


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def dtype(text: str) -> str:
    """A model dtype name."""
    if text not in DTYPES:
        raise argparse.ArgumentTypeError(f"unsupported dtype {text!r}: use one of {', '.join(DTYPES[:3])}")
    return text


def device(text: str) -> str:
    """``auto``, ``cpu``, or a torch device that this machine has (``cuda``, ``cuda:N``, ``mps``, ...)."""
    if text in ("auto", "cpu"):
        return text  # no torch import for the defaults
    import torch

    cuda = CUDA.fullmatch(text)
    if cuda:
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text}: no CUDA GPU is available here (use --device cpu or auto)")
        count = torch.cuda.device_count()
        if cuda.group(1) is not None and int(cuda.group(1)) >= count:
            raise argparse.ArgumentTypeError(f"{text}: this machine has {count} CUDA device(s): cuda:0 to "
                                             f"cuda:{count - 1}")
        return text
    if text == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError("mps: the Apple GPU backend is not available here (use --device cpu or auto)")
    try:
        torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"unknown device {text!r}: use auto, cpu, cuda, cuda:N or mps") from None
    return text


def output_file(text: str) -> str:
    """A file to write: not a directory, in a directory that exists."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a directory: give the path of the file to write")
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"cannot write {text}: folder {folder} does not exist")
    return text


# option dest -> its type; `--resamples` takes 0 (no CI) where a command declares no stricter type (`evaluate` and
# `leaderboard` need at least one resample: they declare positive_int)
SHARED_TYPES = {"device": device, "dtype": dtype, "batch_size": positive_int, "resamples": non_negative_int}
UNCHECKED = (None, int, str)  # declared types that a shared type replaces


def check_shared_options(parser: argparse.ArgumentParser) -> None:
    """Give the shared options of ``parser`` and of its sub-commands (``capeval train <name>``) their types."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                check_shared_options(sub)
        elif action.dest in SHARED_TYPES and action.option_strings and action.type in UNCHECKED:
            action.type = SHARED_TYPES[action.dest]
