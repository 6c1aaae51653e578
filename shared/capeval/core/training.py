"""Registry of training pipelines for ``capeval train <name>``.

A family registers ``configure(parser)`` (adds its CLI arguments) and ``run(args)`` (does the work, returns
the output directory) as ``"module:attr"`` strings, imported on use. The same ``run`` is callable from Python
with an ``argparse.Namespace``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Dict

from capeval.core.discovery import import_attr, load_registrations


@dataclass(frozen=True)
class TrainerSpec:
    name: str
    configure: str  # "module:attr" of configure(parser)
    run: str  # "module:attr" of run(args)
    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        import_attr(self.configure)(parser)

    def __call__(self, args: argparse.Namespace):
        return import_attr(self.run)(args)


_TRAINERS: Dict[str, TrainerSpec] = {}


def register_trainer(name: str, *, configure: str, run: str, help: str) -> TrainerSpec:
    """Register ``capeval train <name>``."""
    _TRAINERS[name] = TrainerSpec(name, configure, run, help)
    return _TRAINERS[name]


def trainers() -> Dict[str, TrainerSpec]:
    load_registrations()
    return dict(_TRAINERS)
