"""A scorer's card, a table of a TOML file of its family (``module_cards.toml``) named at the registration
(``register_scorer(..., card="capeval.<family>:module_cards.toml")``) and read on use: what its evaluate module shows
(``evaluate``'s ``MetricInfo`` and the class docstring; ``capeval.evaluate_module`` builds the module's info from it
and from the scorer's needs and options), and in ``[<scorer>.options]`` the help of its own options."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, fields
from importlib import resources
from typing import Dict, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib

OPTIONS = "options"  # a card's sub-table of option help


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


@functools.lru_cache(maxsize=32)
def _tables(reference: str) -> Dict[str, Dict]:
    """The tables of the TOML file ``reference`` (``"package:file.toml"``), read once."""
    package, _, name = reference.partition(":")
    with resources.files(package).joinpath(name).open("rb") as handle:
        return tomllib.load(handle)


def _table(reference: str, scorer_name: str) -> Dict:
    tables = _tables(reference)
    if scorer_name not in tables:
        raise ValueError(f"{reference} has no table [{scorer_name}]")
    return tables[scorer_name]


def card_options(reference: str, scorer_name: str) -> Dict[str, str]:
    """The help of ``scorer_name``'s own options: its card's ``[<scorer_name>.options]`` table (``{}``: none)."""
    return dict(_table(reference, scorer_name).get(OPTIONS, {}))


def has_module_card(reference: str, scorer_name: str) -> bool:
    """Whether ``scorer_name``'s card holds an evaluate module's text (not only option help)."""
    return any(key != OPTIONS for key in _table(reference, scorer_name))


def module_card(reference: str, scorer_name: str) -> ModuleCard:
    """The evaluate module card of ``scorer_name``: its table in the TOML file ``reference``
    (``"package:file.toml"``)."""
    table = {key: value for key, value in _table(reference, scorer_name).items() if key != OPTIONS}
    unknown = sorted(set(table) - {f.name for f in fields(ModuleCard)})
    if unknown:
        raise ValueError(f"{reference} [{scorer_name}]: unknown field(s) {unknown}")
    return ModuleCard(**{key: tuple(value) if isinstance(value, list) else value for key, value in table.items()})
