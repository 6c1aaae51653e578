"""The values a scorer option takes, declared once by its factory's annotation, and the one check of a value against
such a declaration (:func:`value_problem`), run at every door before anything loads.

A declaration is a type (``bool``; ``int``, not a bool; ``float``, any finite int or float; ``str``; a class, e.g.
``os.PathLike`` or ``ClipBackbone``: an instance of it; ``Callable``: anything callable), ``Literal[a, b]`` (one of
those values), ``Optional[T]`` / ``Union[...]`` (any member), ``Mapping[K, V]`` / ``Dict[K, V]`` / ``Sequence[T]`` /
``List[T]`` (the container, then each key and item), or ``Annotated[T, rule, ...]``: a ``T`` that every
:class:`Rule` accepts (:class:`OneOf` the choices a module keeps in one constant, :class:`AtLeast`,
:class:`Between`, :class:`Satisfies` a check function; the runtime's device and dtype rules). ``Any`` accepts
anything and is refused as a registered scorer's declaration (tests/core/test_scorer_contract.py).

The options many scorers share are declared here (:data:`Device`, :data:`Dtype`, :data:`BatchSize`,
:data:`Workers`, :data:`Bytes`, :data:`PathLike`, :data:`Precision`), and so is the suite's runtime
(:data:`RUNTIME_TYPES`). Pure Python: torch is imported only to check a device other than ``auto`` / ``cpu``.
"""

from __future__ import annotations

import collections.abc
import math
import numbers
import os
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Callable, Literal, Optional, Tuple, Union

from capeval.core.device import DTYPE_NAMES, device_problem, dtype_problem

UNIONS = (Union, getattr(types, "UnionType", Union))  # typing.Union and, from Python 3.10, X | Y


def _listed(values) -> str:
    return " or ".join(repr(value) for value in values) if len(values) <= 2 else \
        ", ".join(repr(value) for value in values[:-1]) + f" or {values[-1]!r}"


class Rule:
    """A condition an ``Annotated`` declaration adds to its type: :meth:`problem` says why a value fails it (``None``:
    it passes), :meth:`describe` what passes, given the type's own description."""

    def problem(self, value) -> Optional[str]:
        raise NotImplementedError

    def describe(self, base: str) -> str:
        raise NotImplementedError


@dataclass(frozen=True)
class OneOf(Rule):
    """One of ``choices`` (any iterable: a tuple, a dict's keys), stated where the scorer keeps them."""

    choices: Tuple

    def __init__(self, choices):
        object.__setattr__(self, "choices", tuple(choices))

    def problem(self, value) -> Optional[str]:
        if any(value == choice and type(value) is type(choice) for choice in self.choices):
            return None
        return f"must be one of {self.choices!r}, not {shown(value)}"

    def describe(self, base: str) -> str:
        return f"one of {self.choices!r}"


@dataclass(frozen=True)
class AtLeast(Rule):
    """A number ≥ ``minimum``."""

    minimum: float

    def problem(self, value) -> Optional[str]:
        return None if value >= self.minimum else f"must be {self.describe('a number')}, not {shown(value)}"

    def describe(self, base: str) -> str:
        return "a positive integer" if (base, self.minimum) == ("an int", 1) else f"{base} ≥ {self.minimum}"


@dataclass(frozen=True)
class Between(Rule):
    """A number in ``[low, high]``."""

    low: float
    high: float

    def problem(self, value) -> Optional[str]:
        return None if self.low <= value <= self.high else \
            f"must be in [{self.low}, {self.high}], not {shown(value)}"

    def describe(self, base: str) -> str:
        return f"{base} in [{self.low}, {self.high}]"


@dataclass(frozen=True)
class Satisfies(Rule):
    """A value ``check`` accepts: it returns ``None``, or the problem (a check a scorer states once, next to the
    option, and may call itself); ``description``: what passes."""

    check: Callable[[Any], Optional[str]]
    description: str

    def problem(self, value) -> Optional[str]:
        return self.check(value)

    def describe(self, base: str) -> str:
        return self.description


DEVICE_RULE = Satisfies(device_problem, "'auto', 'cpu', 'cuda', 'cuda:N' or 'mps' (a device this machine has)")
DTYPE_RULE = Satisfies(dtype_problem, _listed(DTYPE_NAMES))

# the options many scorers share
Device = Annotated[object, DEVICE_RULE]
Dtype = Annotated[object, DTYPE_RULE]  # None: the scorer's own default
BatchSize = Annotated[int, AtLeast(1)]
Workers = Annotated[int, AtLeast(0)]
Bytes = Annotated[int, AtLeast(0)]
PathLike = Union[str, os.PathLike]
PRECISIONS = (None, "official")  # a scorer's precision: None (capeval's fp32 numerics) or the official numerics
Precision = Annotated[Optional[str], OneOf(PRECISIONS)]
# the runtime of a suite (given to every scorer that accepts it; None: the scorer's default)
RUNTIME_TYPES = {"device": Device, "dtype": Dtype, "batch_size": Optional[BatchSize], "cache_dir": Optional[PathLike]}


def value_problem(declared, value) -> Optional[str]:
    """Why ``value`` is not a value of the declaration ``declared`` (``None``: it is one): ``"must be ..., not
    <value>"``, or a rule's own reason (``"unknown device 'gpu': ..."``); :func:`option_refusal` words it for an
    option."""
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if origin is Annotated:
        found = value_problem(args[0], value)
        for rule in args[1:]:
            if found is None and isinstance(rule, Rule):
                found = rule.problem(value)
        # the whole declaration says what the value must be ("a positive integer", not "an int" or "≥ 1")
        return f"must be {describe(declared)}, not {shown(value)}" if found and found.startswith("must be") else found
    if origin in UNIONS:
        if any(value_problem(member, value) is None for member in args):
            return None
        # the member whose type the value has says what is wrong with it (a batch size of -3: "must be a positive
        # integer"; a misspelt choice: "must be one of ...")
        shaped = [member for member in args if _has_type(member, value)]
        return value_problem(shaped[0], value) if len(shaped) == 1 else \
            f"must be {describe(declared)}, not {shown(value)}"
    if origin is Literal:
        return OneOf(args).problem(value)
    if not _has_type(declared, value):
        return f"must be {describe(declared)}, not {shown(value)}"
    if origin is not None and args and isinstance(value, collections.abc.Mapping):
        key_type, item_type = args if len(args) == 2 else (Any, Any)
        for key, item in value.items():
            found = value_problem(key_type, key) or value_problem(item_type, item)
            if found:
                return f"[{key!r}]: {found}"
    elif origin is not None and args and origin is not collections.abc.Callable and args[-1] is not Ellipsis:
        for i, item in enumerate(value):
            found = value_problem(args[0], item)
            if found:
                return f"[{i}]: {found}"
    return None


def _has_type(declared, value) -> bool:
    """Whether ``value`` has the type of ``declared``, its rules and items aside."""
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if origin is Annotated:
        return _has_type(args[0], value)
    if origin in UNIONS:
        return any(_has_type(member, value) for member in args)
    if origin is Literal:
        return any(type(value) is type(choice) for choice in args)
    if declared in (Any, object):
        return True
    if declared in (None, type(None)):
        return value is None
    if declared is bool:
        return isinstance(value, bool)
    if declared is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if declared is float:
        return (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value))
    if origin is collections.abc.Callable or declared is collections.abc.Callable:
        return callable(value)
    kind = origin or declared
    if kind in (collections.abc.Sequence, list, tuple) and isinstance(value, (str, bytes)):
        return False
    if isinstance(kind, type):
        return isinstance(value, kind)
    raise TypeError(f"cannot check a value against the declaration {declared!r}")


def describe(declared) -> str:
    """What the declaration ``declared`` accepts, in words (``"an int ≥ 1"``, ``"None or 'official'"``)."""
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if origin is Annotated:
        text = describe(args[0])
        for rule in args[1:]:
            if isinstance(rule, Rule):
                text = rule.describe(text)
        return text
    if origin in UNIONS:
        return " or ".join(dict.fromkeys(describe(member) for member in args))
    if origin is Literal:
        return f"one of {args!r}"
    if declared in (Any, object):
        return "anything"
    if declared in (None, type(None)):
        return "None"
    if declared is str:
        return "a string"
    if declared is int:
        return "an int"
    if declared is float:
        return "a finite number"
    if declared is bool:
        return "true or false"
    if origin is collections.abc.Callable or declared is collections.abc.Callable:
        return "a callable"
    if origin in (dict, collections.abc.Mapping) or declared in (dict, collections.abc.Mapping):
        return f"a mapping of {describe(args[0])} to {describe(args[1])}" if len(args) == 2 else "a mapping"
    if origin in (list, tuple, collections.abc.Sequence) or declared in (list, tuple, collections.abc.Sequence):
        return f"a list of {describe(args[0])}" if args and args[-1] is not Ellipsis else "a list"
    if declared is os.PathLike:
        return "a path"
    if isinstance(declared, type):
        return f"{'an' if declared.__name__[0] in 'AEIOU' else 'a'} {declared.__name__}"
    return repr(declared)


def option_refusal(option: str, value, problem: str) -> str:
    """The words refusing ``value`` of ``option`` for ``problem`` (:func:`value_problem`): ``"batch_size must be a
    positive integer, not -3"``, or ``"device='gpu': unknown device 'gpu': ..."`` for a rule's own reason."""
    return f"{option} {problem}" if problem.startswith("must be") else f"{option}={shown(value)}: {problem}"


def shown(value) -> str:
    """A value as a message shows it (long ones cut)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_checkable(declared) -> bool:
    """Whether ``declared`` is a declaration :func:`value_problem` reads, stating more than ``Any`` (somewhere in it
    a type or rule)."""
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if origin is Annotated:
        return is_checkable(args[0]) or any(isinstance(rule, Rule) for rule in args[1:])
    if origin in UNIONS:
        return all(member not in (Any, object) and is_checkable(member) for member in args)
    if declared in (Any, object):
        return False
    try:
        _has_type(declared, object())
    except TypeError:
        return False
    return True
