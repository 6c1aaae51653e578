"""Registry of training pipelines for ``capeval train <name>``.

A family registers ``configure(parser)`` (adds its CLI arguments) and ``run(args)`` (does the work, returns
the output directory). The same ``run`` is callable from Python with an ``argparse.Namespace``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable, Dict


@dataclass(frozen=True)
class TrainerSpec:
    name: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], object]
    help: str


_TRAINERS: Dict[str, TrainerSpec] = {}


def register_trainer(name: str, *, configure: Callable[[argparse.ArgumentParser], None], help: str):
    """Decorator registering ``run(args)`` for ``capeval train <name>``."""

    def wrap(run: Callable[[argparse.Namespace], object]):
        _TRAINERS[name] = TrainerSpec(name, configure, run, help)
        return run

    return wrap


def trainers() -> Dict[str, TrainerSpec]:
    import capeval.models  # noqa: F401  (registers every family's trainers)

    return dict(_TRAINERS)
