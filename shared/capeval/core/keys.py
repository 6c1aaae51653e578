"""What each score key means to a reader, declared once on the scorer class that returns it.

A scorer class states, in its ``key_metadata`` class attribute (as torchmetrics states ``higher_is_better``), a
:class:`ScoreKey` for every key its results can hold (``k`` for ``k`` and ``k_per_sample``). The suite copies
``title``, ``scale`` and ``higher_is_better`` into the report document; the report's tables, ``COCOEvalCap`` and the
significance clusters read them from there. ``tests/core/test_scorer_contract.py`` checks that every registered
scorer declares every key it returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Union


@dataclass(frozen=True)
class ScoreKey:
    """``title``: the key's name as papers print it ("CIDEr", "RefCLIP-S"); ``scale``: the factor tables print
    the value with (100.0 for the COCO percentages; 1.0: as computed); ``higher_is_better``: the direction of a
    better caption; ``coco_method``: the key's name in ``COCOEvalCap.eval`` (pycocoevalcap's "Bleu_1", "ROUGE_L";
    ``None``: the key itself)."""

    title: str
    scale: float = 1.0
    higher_is_better: bool = True
    coco_method: Optional[str] = None

    def __post_init__(self):
        if not isinstance(self.title, str) or not self.title.strip():
            raise ValueError(f"ScoreKey title must be a non-empty string, not {self.title!r}")
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)) or not math.isfinite(self.scale) \
                or self.scale <= 0:
            raise ValueError(f"ScoreKey {self.title!r}: scale must be a finite positive number, not {self.scale!r}")
        if not isinstance(self.higher_is_better, bool):
            raise ValueError(f"ScoreKey {self.title!r}: higher_is_better must be a bool, not {self.higher_is_better!r}")
        if self.coco_method is not None and (not isinstance(self.coco_method, str) or not self.coco_method):
            raise ValueError(f"ScoreKey {self.title!r}: coco_method must be a non-empty string or None")

    def report_fields(self) -> Dict[str, Union[str, float, bool]]:
        """What the report document holds about the key (its ``metrics[key]`` entry's display fields)."""
        return {"title": self.title, "scale": float(self.scale), "higher_is_better": self.higher_is_better}


class UndeclaredKeyError(LookupError):
    """A scorer returned (or was asked about) a score key its ``key_metadata`` does not declare."""


def score_key(scorer, key: str) -> ScoreKey:
    """The :class:`ScoreKey` that ``scorer`` (a scorer class or instance) declares for ``key``; an
    :class:`UndeclaredKeyError` naming the class and the key when it declares none."""
    declared = getattr(scorer, "key_metadata", None) or {}
    if key in declared:
        return declared[key]
    owner = scorer if isinstance(scorer, type) else type(scorer)
    raise UndeclaredKeyError(f"{owner.__module__}.{owner.__qualname__} declares no metadata for score key {key!r} "
                             f"(it declares {sorted(declared)}): add {key!r}: ScoreKey(title=...) to its "
                             "key_metadata")


def coco_method(scorer, key: str) -> str:
    """``key``'s name in ``COCOEvalCap.eval``: its declared ``coco_method``, else the key itself."""
    return score_key(scorer, key).coco_method or key
