"""The per-image statistics each key of a report is resampled from, kept in the report (``report["statistics"]``)
and read back, so that a saved report's CIs and p-values can be recomputed without scoring again
(:func:`capeval.suite.run.compare_report`).

``statistics[system][key]`` holds one :class:`~capeval.core.corpus_statistics.CorpusStatistics`:

- ``combine``: its function as ``"capeval.module:function"`` (a ``functools.partial`` as its function, with its
  keyword ``arguments``); read back, only a function of capeval is imported.
- ``dtype``: the per-image statistics' numpy dtype.
- ``columns``: one entry per statistic column, in the report's image order: an array of numbers (a float column whose
  values are all integers is written as integers; ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` stand for the values
  JSON has no number for), or one number, the column's value on every image. A string instead of the list names an
  earlier key of the same system with the same statistics, bit for bit (BLEU-1..4 share their n-gram counts).

Read back, every column is the same bits it was: a recomputation gives the original numbers exactly.
"""

from __future__ import annotations

import functools
from typing import Dict, List, Mapping, Union

import numpy as np

from capeval.core.corpus_statistics import CorpusStatistics
from capeval.core.discovery import import_attr
from capeval.core.errors import InputError

DTYPES = ("float64", "float32", "int64", "int32")
NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
EXACT_INTEGERS = 2.0 ** 53  # float integers below this are written as JSON integers without loss

Column = Union[List, int, float, str]


def saved_statistics(statistics: Mapping[str, Mapping[str, CorpusStatistics]]) -> Dict[str, Dict[str, Dict]]:
    """``{system: {key: saved statistics}}`` (the module docstring's form) of ``{system: {key: CorpusStatistics}}``,
    in their order."""
    saved: Dict[str, Dict[str, Dict]] = {}
    for system, per_key in statistics.items():
        written: Dict[str, np.ndarray] = {}
        saved[system] = {}
        for key, stats in per_key.items():
            per_unit = np.asarray(stats.per_unit)
            same = next((earlier for earlier, seen in written.items() if _same_bits(seen, per_unit)), None)
            if same is None:
                written[key] = per_unit
            columns = same if same is not None else [_column(per_unit[:, c]) for c in range(per_unit.shape[1])]
            saved[system][key] = {**_combine_name(stats.combine), "dtype": str(per_unit.dtype), "columns": columns}
    return saved


def read_statistics(saved, n_units: int, source: str = "report") -> Dict[str, Dict[str, CorpusStatistics]]:
    """The ``{system: {key: CorpusStatistics}}`` of a report's ``statistics`` (:func:`saved_statistics`), each with
    ``n_units`` rows; an :class:`InputError` naming the field and the problem when one is malformed."""
    if not isinstance(saved, Mapping) or not saved:
        raise InputError(f"{source}: 'statistics' is not an object of systems")
    statistics: Dict[str, Dict[str, CorpusStatistics]] = {}
    for system, per_key in saved.items():
        if not isinstance(per_key, Mapping):
            raise InputError(f"{source}: statistics[{system!r}] is not an object of keys")
        statistics[system] = {}
        for key, entry in per_key.items():
            where = f"{source}: statistics[{system!r}][{key!r}]"
            if not isinstance(entry, Mapping) or set(entry) != {"combine", "arguments", "dtype", "columns"}:
                raise InputError(f"{where}: expected the fields combine, arguments, dtype and columns")
            columns = entry["columns"]
            if isinstance(columns, str):
                if columns not in statistics[system]:
                    raise InputError(f"{where}.columns: {columns!r} is no earlier key of {system!r}")
                per_unit = statistics[system][columns].per_unit
            else:
                per_unit = _per_unit(columns, entry["dtype"], n_units, where)
            statistics[system][key] = CorpusStatistics(per_unit, _combine(entry["combine"], entry["arguments"], where))
    return statistics


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _combine_name(combine) -> Dict:
    arguments = {}
    if isinstance(combine, functools.partial) and not combine.args:
        combine, arguments = combine.func, dict(combine.keywords)
    module = getattr(combine, "__module__", None) or type(combine).__module__
    name = getattr(combine, "__qualname__", None) or type(combine).__qualname__
    return {"combine": f"{module}:{name}", "arguments": arguments}


def _column(values: np.ndarray) -> Column:
    """One statistic column as JSON: one number when every image has the same bits, else an array."""
    bits = np.ascontiguousarray(values).view(np.uint8).reshape(len(values), -1)
    if len(values) and (bits == bits[0]).all():
        return _numbers(values[:1])[0]
    return _numbers(values)


def _numbers(values: np.ndarray) -> List:
    finite = np.isfinite(values) if values.dtype.kind == "f" else np.ones(len(values), dtype=bool)
    if not finite.all():
        return [v if ok else _non_finite(v) for v, ok in zip(values.tolist(), finite.tolist())]
    if (values.dtype.kind == "f" and (np.floor(values) == values).all() and (np.abs(values) < EXACT_INTEGERS).all()
            and not (np.signbit(values) & (values == 0)).any()):
        return values.astype(np.int64).tolist()
    return values.tolist()


def _non_finite(value: float) -> str:
    return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"


def _per_unit(columns, dtype, n_units: int, where: str) -> np.ndarray:
    if dtype not in DTYPES:
        raise InputError(f"{where}.dtype: {dtype!r} is not one of {DTYPES}")
    if not isinstance(columns, list):
        raise InputError(f"{where}.columns: expected a list of columns or an earlier key's name")
    built = []
    for index, column in enumerate(columns):
        values = column if isinstance(column, list) else [column] * n_units
        if len(values) != n_units:
            raise InputError(f"{where}.columns[{index}]: {len(values)} values, expected one per image ({n_units})")
        try:
            built.append(np.array([NON_FINITE[v] if isinstance(v, str) else v for v in values], dtype=dtype))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}.columns[{index}]: not numbers of dtype {dtype} ({exc})") from exc
        if isinstance(column, bool) or any(isinstance(v, bool) or v is None for v in values):
            raise InputError(f"{where}.columns[{index}]: not numbers of dtype {dtype}")
    return np.column_stack(built) if built else np.empty((n_units, 0), dtype=dtype)


def _combine(name, arguments, where: str):
    """The combine function a report names: a function of capeval only, with its keyword arguments."""
    module, _, attr = name.partition(":") if isinstance(name, str) else ("", "", "")
    if not (module == "capeval" or module.startswith("capeval.")) or not attr.isidentifier():
        raise InputError(f"{where}.combine: {name!r} is not a capeval function ('capeval.module:function'): a "
                         "report's statistics are recomputed only with capeval's own functions")
    if not isinstance(arguments, Mapping):
        raise InputError(f"{where}.arguments: expected an object of keyword arguments")
    try:
        combine = import_attr(name)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"{where}.combine: {name!r} is not in this capeval ({exc})") from exc
    if not callable(combine):
        raise InputError(f"{where}.combine: {name!r} is not a function")
    return functools.partial(combine, **arguments) if arguments else combine
