"""The report document's versioned schema: ``report.schema.json`` (JSON Schema draft 2020-12, shipped with the
package) and :func:`validate_report`, which checks a document against it and against what a schema cannot state
(every system scored on the document's keys, comparisons and clusters naming its systems and keys, ...).

The document names its schema (``"schema": SCHEMA_VERSION``); a change to its fields bumps the version in
``report.schema.json`` (its ``$id`` and the ``schema`` constant), which the suite writes from :data:`SCHEMA_VERSION`.
Validating needs the ``jsonschema`` package (the ``dev`` extra); nothing in capeval validates at run time.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Dict, Iterable, List, Mapping

from capeval.core.errors import InputError
from capeval.report.write import json_ready

SCHEMA_FILE = "report.schema.json"
SHOWN_ERRORS = 3


def report_schema() -> Dict:
    """The schema (a fresh copy of ``report.schema.json``)."""
    return json.loads(resources.files("capeval.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


SCHEMA_VERSION: str = report_schema()["properties"]["schema"]["const"]


@lru_cache(maxsize=1)
def _validator():
    try:
        from jsonschema import Draft202012Validator
    except ImportError as exc:
        raise ImportError("validating a report needs the jsonschema package: pip install jsonschema") from exc
    schema = report_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def validate_report(document: Mapping) -> None:
    """Check ``document`` (the report as :func:`capeval.suite.run.evaluate_captions` returns it, or ``report.json``
    loaded) against :data:`SCHEMA_VERSION`; an :class:`InputError` naming the field of the first problems and what
    is wrong with it. The document is checked in its JSON form (NaN as null)."""
    data = json_ready(document)
    if not isinstance(data, dict):
        raise InputError(f"report: expected a JSON object, not {type(document).__name__}")
    found = data.get("schema")
    if found != SCHEMA_VERSION:
        raise InputError(f"report: schema is {found!r}, expected {SCHEMA_VERSION!r} (a document of another version, "
                         "or none, does not follow this schema)")
    errors = sorted(_validator().iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    problems = [f"{_where(error.absolute_path)}: {error.message}" for error in errors] or _inconsistencies(data)
    if problems:
        shown = "; ".join(problems[:SHOWN_ERRORS])
        more = f" (and {len(problems) - SHOWN_ERRORS} more)" if len(problems) > SHOWN_ERRORS else ""
        raise InputError(f"report does not follow {SCHEMA_VERSION}: {shown}{more}")


def _where(path: Iterable) -> str:
    return "report" + "".join(f"[{part!r}]" for part in path)


def _inconsistencies(data: Mapping) -> List[str]:
    """What the schema cannot state: the fields that name systems and keys name the document's own."""
    keys, systems = list(data["keys"]), list(data["systems"])
    problems = []

    def same(where: str, names: Iterable, expected: List[str], what: str) -> None:
        names = list(names)
        if sorted(names) != sorted(expected):
            problems.append(f"{where}: {what} {sorted(names)}, expected the document's {what} {sorted(expected)}")

    def within(where: str, names: Iterable, expected: List[str], what: str) -> None:
        stray = [name for name in names if name not in expected]
        if stray:
            problems.append(f"{where}: {stray} are not among the document's {what} {expected}")

    same("report['metrics']", data["metrics"], keys, "keys")
    for name, system in data["systems"].items():
        same(_where(["systems", name, "scores"]), system["scores"], keys, "keys")
    if data["baseline"] is not None:
        within("report['baseline']", [data["baseline"]], systems, "systems")
    if data["significance"]["baseline"] != data["baseline"]:
        problems.append(f"report['significance']['baseline']: {data['significance']['baseline']!r}, expected "
                        f"report['baseline'] {data['baseline']!r}")
    within("report['tiny_random_weights']", data["tiny_random_weights"], keys, "keys")
    within("report['undefined_images']", data["undefined_images"], systems, "systems")
    for name, counts in data["undefined_images"].items():
        within(_where(["undefined_images", name]), counts, keys, "keys")
    for index, comparison in enumerate(data["comparisons"]):
        within(_where(["comparisons", index]), [comparison["system_a"], comparison["system_b"]], systems, "systems")
        within(_where(["comparisons", index, "metric"]), [comparison["metric"]], keys, "keys")
    within("report['clusters']", data["clusters"], keys, "keys")
    for key, ranks in data["clusters"].items():
        within(_where(["clusters", key]), ranks, systems, "systems")
    within("report['undefined']", data["undefined"], keys, "keys")
    same("report['statistics']", data["statistics"], systems, "systems")
    for name, saved in data["statistics"].items():
        same(_where(["statistics", name]), saved, keys, "keys")
        earlier: List[str] = []
        for key, entry in saved.items():
            where = ["statistics", name, key, "columns"]
            if isinstance(entry["columns"], str):
                within(_where(where), [entry["columns"]], earlier, f"keys before {key!r}")
            for index, column in enumerate(entry["columns"] if isinstance(entry["columns"], list) else []):
                if isinstance(column, list) and len(column) != len(data["images"]):
                    problems.append(f"{_where([*where, index])}: {len(column)} values, expected one per image "
                                    f"({len(data['images'])})")
            earlier.append(key)
    if len(data["images"]) != data["coverage"]["scored"]:
        problems.append(f"report['images']: {len(data['images'])} rows, expected coverage.scored "
                        f"{data['coverage']['scored']}")
    for index, image in enumerate(data["images"]):
        same(_where(["images", index, "captions"]), image["captions"], systems, "systems")
        same(_where(["images", index, "scores"]), image["scores"], systems, "systems")
        for name, scores in image["scores"].items():
            same(_where(["images", index, "scores", name]), scores, keys, "keys")
        within(_where(["images", index, "details"]), image["details"], systems, "systems")
        for name, records in image["details"].items():
            within(_where(["images", index, "details", name]), records, keys, "keys")
    return problems
