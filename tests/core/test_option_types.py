"""The one check of an option value against its declaration (:mod:`capeval.core.option_types`) and the runtime's
device and dtype rules (:mod:`capeval.core.device`), on plain declarations; every registered scorer's declarations
are checked in tests/core/test_scorer_contract.py and through every door in tests/test_input_contract.py."""

import math
import os
from pathlib import Path
from typing import Annotated, Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Union

import pytest
import torch

from capeval.core.device import device_problem, dtype_problem
from capeval.core.option_types import (AtLeast, BatchSize, Between, Device, Dtype, OneOf, PathLike, Precision,
                                       Satisfies, describe, is_checkable, option_refusal, value_problem)

CHOICES = {"paper": None, "torchmetrics": (100.0, "")}  # choices kept in a module's mapping, as clip_s's DEFINITIONS


@pytest.mark.parametrize("declared, good, bad", [
    (int, [0, -3, 10**20], [True, 2.0, "2", None]),
    (float, [0, 2, 0.5, -1e300], [True, math.nan, math.inf, "0.5", None]),
    (bool, [True, False], [0, 1, "true", None]),
    (str, ["", "x"], [1, None, b"x"]),
    (Optional[str], [None, "x"], [1]),
    (Literal["a", 1], ["a", 1], ["b", 2, True, 1.0]),  # True == 1 and 1.0 == 1, but neither is the value 1
    (Annotated[str, OneOf(CHOICES)], ["paper", "torchmetrics"], ["Paper", "", None]),
    (Annotated[int, AtLeast(1)], [1, 64], [0, -3, 1.5, True]),
    (Annotated[float, Between(0, 1)], [0, 0.5, 1], [-0.1, 1.5, math.nan]),
    (PathLike, ["x", Path("x")], [1, None]),
    (Mapping[str, int], [{}, {"a": 1}], [{"a": "1"}, {1: 1}, [("a", 1)], "a"]),
    (Dict[str, Mapping], [{"a": {}}], [{"a": 1}]),
    (Sequence[int], [[], [1, 2], (1,)], [[1, "2"], "12", {1: 1}]),
    (List[str], [["a"]], [("a",), "a"]),
    (Callable[..., float], [len, lambda: 1.0], [1, "len"]),
    (Union[int, str], [1, "x"], [1.5, None]),
    (Annotated[object, Satisfies(lambda v: None if v == 3 else "not 3", "3")], [3], [4]),
    (Precision, [None, "official"], ["offcial", "Official", 1]),
    (BatchSize, [1, 8], [0, -3, 2.0, "8", None]),
])
def test_values_are_checked_against_their_declaration(declared, good, bad):
    assert is_checkable(declared)
    for value in good:
        assert value_problem(declared, value) is None, (declared, value)
    for value in bad:
        problem = value_problem(declared, value)
        assert isinstance(problem, str) and problem, (declared, value)


def test_the_problem_says_what_is_wrong_with_the_value_given():
    assert value_problem(BatchSize, -3) == "must be a positive integer, not -3"
    assert value_problem(Optional[BatchSize], -3) == "must be a positive integer, not -3"  # the value's member speaks
    assert value_problem(Optional[BatchSize], "8") == "must be a positive integer or None, not '8'"
    assert value_problem(Precision, "offcial") == "must be one of (None, 'official'), not 'offcial'"
    assert value_problem(Annotated[str, OneOf(CHOICES)], "x") == "must be one of ('paper', 'torchmetrics'), not 'x'"
    assert value_problem(Mapping[str, BatchSize], {"a": 1, "b": 0}) == "['b']: must be a positive integer, not 0"
    assert value_problem(Sequence[int], [1, "2"]) == "[1]: must be an int, not '2'"
    assert value_problem(Annotated[int, AtLeast(0)], -1) == "must be an int ≥ 0, not -1"
    assert describe(Optional[Annotated[int, AtLeast(0)]]) == "an int ≥ 0 or None"
    assert describe(Union[PathLike, Mapping]) == "a string or a path or a mapping"
    assert option_refusal("batch_size", -3, value_problem(BatchSize, -3)) == \
        "batch_size must be a positive integer, not -3"
    assert option_refusal("device", "gpu", value_problem(Device, "gpu")) == \
        "device='gpu': unknown device 'gpu': use auto, cpu, cuda, cuda:N or mps"


def test_any_is_no_declaration():
    """A declaration must state something: ``Any`` (alone or as a member of a union) is not checkable."""
    assert not is_checkable(Any)
    assert not is_checkable(Union[Callable, Any])
    assert is_checkable(Mapping[str, Any])  # the container is checked
    assert is_checkable(Device)  # Annotated[object, rule]: the rule checks


def test_devices_are_checked_without_loading_anything():
    for good in (None, "auto", "cpu", "cpu:0", torch.device("cpu")):
        assert device_problem(good) is None, good
    for bad, problem in (("gpu", "unknown device 'gpu'"), ("cuda:x", "unknown device"), ("mps:0", "unknown device"),
                         ("", "unknown device"), (0, "a device is a string")):
        assert problem in device_problem(bad), bad
    if not torch.cuda.is_available():
        assert device_problem("cuda") == "no CUDA GPU is available here (use cpu or auto)"
        assert "no CUDA GPU" in device_problem(torch.device("cuda", 0))
    else:
        count = torch.cuda.device_count()
        assert device_problem("cuda") is None and device_problem(f"cuda:{count - 1}") is None
        assert f"this machine has {count} CUDA device(s)" in device_problem(f"cuda:{count}")
    assert value_problem(Device, "gpu") == device_problem("gpu")


def test_dtypes_are_the_three_model_dtypes():
    for good in (None, "auto", "float32", "float16", "bfloat16", "fp32", "fp16", "bf16", torch.float16,
                 torch.bfloat16):
        assert dtype_problem(good) is None, good
    for bad in ("float64", "half", torch.float64, torch.int8, 16):
        assert "unsupported dtype" in dtype_problem(bad), bad
    assert value_problem(Optional[Dtype], "float64") == "unsupported dtype 'float64': use float32, float16, bfloat16"


def test_the_path_declaration_takes_what_os_fspath_takes():
    for value in ("x", Path("x")):
        assert value_problem(PathLike, value) is None and os.fspath(value) == "x"
