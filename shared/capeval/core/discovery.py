"""Registration by discovery: every ``capeval/<family>/registration.py`` registers its weights, converters,
trainers and scorers when imported. Core imports them by name, so no core module imports a family; a registration
names its code as ``"module:attr"`` strings (:func:`import_attr`, on use), so registering imports no model code."""

from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, Tuple

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def registration_modules() -> Tuple[str, ...]:
    """``capeval.<family>.registration`` for every family folder holding a ``registration.py``, sorted."""
    return tuple(f"capeval.{d.name}.registration" for d in sorted(PACKAGE_DIR.iterdir())
                 if (d / "registration.py").is_file() and (d / "__init__.py").is_file())


@lru_cache(maxsize=1)
def load_registrations() -> Tuple[str, ...]:
    """Import every family's registration module once; return their names."""
    names = registration_modules()
    for name in names:
        importlib.import_module(name)
    return names


def import_attr(target: str):
    """``"package.module:attr"`` → the attribute."""
    module, _, attr = target.partition(":")
    if not attr:
        raise ValueError(f"{target!r} is not a 'module:attr' reference")
    return getattr(importlib.import_module(module), attr)


def add_registered(registry: Dict[str, Any], spec: Any) -> Any:
    """``spec`` added to ``registry`` under its ``name``: registering the same spec again does nothing, another spec
    under a registered name is a ``ValueError``."""
    if registry.get(spec.name, spec) != spec:
        raise ValueError(f"{spec.name!r} is already registered with a different spec")
    registry[spec.name] = spec
    return spec
