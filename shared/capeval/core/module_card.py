"""What a scorer's evaluate module shows (``evaluate``'s ``MetricInfo`` and the class docstring), stated once at
the scorer's registration (``register_scorer(..., card=ModuleCard(...))``); ``capeval.evaluate_module`` builds the
module's info from it and from the scorer's needs and options. Pure data."""

from __future__ import annotations

from dataclasses import dataclass
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
