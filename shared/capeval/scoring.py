"""Registry of scorers for the CLI and the integrations: ``name -> factory(**options) -> scorer``.

A scorer has ``score(predictions, images=None, references=None) -> dict`` returning, for each of its
scores ``k``, the corpus mean under ``k`` and the per-sample list under ``f"{k}_per_sample"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence

import numpy as np


@dataclass(frozen=True)
class ScorerSpec:
    name: str
    factory: Callable
    needs_images: bool
    needs_references: bool
    help: str
    corpus_level: bool = False  # per-sample values depend on the whole scored corpus (e.g. CIDEr's IDF)


_SCORERS: Dict[str, ScorerSpec] = {}


def register_scorer(name: str, *, needs_images: bool, needs_references: bool, help: str, corpus_level: bool = False):
    """Decorator registering a scorer factory under ``name``."""

    def wrap(factory: Callable) -> Callable:
        _SCORERS[name] = ScorerSpec(name, factory, needs_images, needs_references, help, corpus_level)
        return factory

    return wrap


def scorers() -> Dict[str, ScorerSpec]:
    import capeval.models  # noqa: F401  (registers every family's scorers)

    return dict(_SCORERS)


def load_scorer(name: str, **options):
    available = scorers()
    if name not in available:
        raise KeyError(f"unknown metric {name!r}; known: {sorted(available)}")
    return available[name].factory(**options)


def summarize(per_sample: Dict[str, Sequence[float]]) -> Dict[str, object]:
    """``{k: list}`` → ``{k: mean, k_per_sample: list}`` (plain Python floats)."""
    out: Dict[str, object] = {}
    for key, values in per_sample.items():
        values: List[float] = [float(v) for v in values]
        out[key] = float(np.mean(values)) if values else float("nan")
        out[f"{key}_per_sample"] = values
    return out
