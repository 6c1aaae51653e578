"""The argparse types of the options that several commands share. A bad value is a one-line usage error (exit 2)
while the command line is parsed, before any model loads. :func:`check_shared_options` gives every command's
``--device``, ``--dtype``, ``--batch-size`` and ``--resamples`` these types, wherever the option is declared (a
command's own stricter type stays), and lists every ``--output`` under that one spelling."""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from capeval.core.device import device_problem, dtype_problem

METRIC_NAME = re.compile(r"[A-Za-z][\w-]*")  # a metric as the command line names it (any spelling)


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
    """A model dtype name (:func:`capeval.core.device.dtype_problem`)."""
    return _checked(text, dtype_problem)


def device(text: str) -> str:
    """``auto``, ``cpu``, or a device this machine has (:func:`capeval.core.device.device_problem`: ``cuda``,
    ``cuda:N``, ``mps``)."""
    return _checked(text, device_problem)


def _checked(text: str, problem_of) -> str:
    problem = problem_of(text)
    if problem:
        raise argparse.ArgumentTypeError(problem if repr(text) in problem else f"{text}: {problem}")
    return text


@dataclass(frozen=True)
class OptionSetting:
    """One ``--option [METRIC.]NAME=VALUE``: the metric as written (``None``: the one metric scored), the option,
    the value and the text given."""

    metric: Optional[str]
    name: str
    value: Any
    text: str


def option_setting(text: str) -> OptionSetting:
    """argparse type of ``--option``: ``METRIC.NAME=VALUE`` (or ``NAME=VALUE``), VALUE read as JSON when it parses
    (``8``, ``true``, ``null``, ``{"points_per_side": 4}``), else as text (``official``, ``a/path``)."""
    target, sep, raw = text.partition("=")
    metric, dot, name = target.rpartition(".")
    if not sep or not name.isidentifier() or (dot and not METRIC_NAME.fullmatch(metric)):
        raise argparse.ArgumentTypeError(f"{text!r}: use METRIC.NAME=VALUE (e.g. clip_s.precision=official)")
    return OptionSetting(metric if dot else None, name, json_or_text(raw), text)


def json_or_text(raw: str) -> Any:
    """``raw`` as JSON when it parses, else the text itself."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@dataclass(frozen=True)
class OptionsFile:
    """An ``--options`` file: its path and its mapping of metric → {option: value}."""

    path: str
    options: Mapping[str, Mapping]


def options_file(text: str) -> OptionsFile:
    """argparse type of ``--options``: a TOML file (``.toml``: a table per metric) or a JSON file (an object of
    metric → object of options), read now."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such file")
    content = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".toml":
            try:
                import tomllib
            except ModuleNotFoundError:  # Python < 3.11
                import tomli as tomllib
            options: Dict = tomllib.loads(content)
        else:
            options = json.loads(content)
    except ValueError as error:  # tomllib.TOMLDecodeError and json.JSONDecodeError are ValueErrors
        kind = "TOML" if path.suffix.lower() == ".toml" else "JSON (or name it .toml)"
        raise argparse.ArgumentTypeError(f"{text} is not valid {kind}: {error}") from None
    if not isinstance(options, dict) or not all(isinstance(values, dict) for values in options.values()):
        raise argparse.ArgumentTypeError(f"{text}: give a mapping of metric names to mappings of their options")
    return OptionsFile(text, options)


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
