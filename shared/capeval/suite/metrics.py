"""The metric names a suite accepts: the ``coco`` group and every registered scorer, in any spelling capeval knows."""

from __future__ import annotations

from typing import List, Sequence

from capeval.core.errors import InputError
from capeval.core.scoring import canonical_metric, scorer_of, scorers

COCO = "coco"


def expand_metrics(names: Sequence[str]) -> List[str]:
    """Scorer names to run for ``names``, in order, each once: ``"coco"`` → the COCO group available here
    (:func:`capeval.text.coco.coco_group_names`), a metric → its registered scorer (``"bleu_4"`` → ``"bleu"``,
    ``"CLIPScore"`` → ``"clip_s"``). An unknown name is an :class:`InputError` listing the known ones (no model
    loads)."""
    if isinstance(names, str) or not names:
        raise InputError(f"metrics must be a non-empty list of metric names, not {names!r}")
    known = scorers()
    expanded: List[str] = []
    for name in names:
        if not isinstance(name, str):
            raise InputError(f"metric names must be strings, not {name!r}")
        if canonical_metric(name) == COCO:
            from capeval.text.coco import coco_group_names

            group = list(coco_group_names())
        elif scorer_of(name) in known:
            group = [scorer_of(name)]
        else:
            raise InputError(f"unknown metric {name!r}; known: {COCO} (the group), {', '.join(sorted(known))}")
        expanded += [scorer for scorer in group if scorer not in expanded]
    return expanded
