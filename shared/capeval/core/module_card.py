"""What a scorer's evaluate module shows (``evaluate``'s ``MetricInfo`` and the class docstring): a table of a TOML
file of its family (``module_cards.toml``), named at the registration (``register_scorer(...,
card="capeval.<family>:module_cards.toml")``) and read on use; ``capeval.evaluate_module`` builds the module's info
from it and from the scorer's needs and options."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from importlib import resources
from typing import Tuple


@dataclass(frozen=True)
class ModuleCard:
    """``description`` and ``citation`` (BibTeX) as evaluate shows them; ``returns``: the ``Returns:`` block and
    ``examples``: the ``Examples:`` block (a doctest the tests run), both without their indentation;
    ``references_note``: what the references argument's line adds (e.g. the score they enable);
    ``arguments``: more arguments, one ``"name (`type`): what it does"`` each (e.g. a compute keyword);
    ``codebase_urls`` / ``reference_urls``: the official code and the papers."""

    description: str
    citation: str
    returns: str
    examples: str
    references_note: str = ""
    arguments: Tuple[str, ...] = ()
    codebase_urls: Tuple[str, ...] = ()
    reference_urls: Tuple[str, ...] = ()


def module_card(reference: str, scorer_name: str) -> ModuleCard:
    """The card of ``scorer_name``: its table in the TOML file ``reference`` (``"package:file.toml"``)."""
    package, _, name = reference.partition(":")
    with resources.files(package).joinpath(name).open("rb") as handle:
        tables = tomllib.load(handle)
    if scorer_name not in tables:
        raise ValueError(f"{reference} has no table [{scorer_name}]")
    table = tables[scorer_name]
    unknown = sorted(set(table) - {f.name for f in fields(ModuleCard)})
    if unknown:
        raise ValueError(f"{reference} [{scorer_name}]: unknown field(s) {unknown}")
    return ModuleCard(**{key: tuple(value) if isinstance(value, list) else value for key, value in table.items()})
