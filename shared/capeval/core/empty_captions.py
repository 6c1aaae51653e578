"""Empty (or whitespace-only) captions follow one policy at every entry point (every scorer's :meth:`~capeval.core.scoring.Scorer.score`,
the suite, the CLI, the integrations), ``empty_caption`` (:func:`empty_caption_policy`):

* ``"score"`` (default): scored as the metric's official implementation scores them, by the scorers that say so
  (``scores_empty_text``: the COCO metrics, as pycocoevalcap, empty and whitespace-only references included); any
  other scorer refuses them with an :class:`InputError` naming ``predictions[i]`` and the options below;
* ``"error"``: :class:`InputError` naming ``predictions[i]`` (and ``references[i][j]``) for every scorer;
* ``"skip"``: those samples get no score (``None`` in every per-sample list); means and corpus-level statistics
  (BLEU's n-gram counts, METEOR's alignments, CIDEr's document frequencies) are those of the other samples, scored
  as a corpus of their own; ``skipped_empty_captions`` counts them;
* a finite number ``x``: each empty caption scores ``x`` in every per-sample list and the means count it
  (``empty_captions`` counts them). A corpus-level scorer refuses a fixed score: its corpus value is not a mean
  of per-sample values, so no per-sample score can stand for a caption in it (use ``"skip"``).

Images and references of empty-caption samples are validated like any other. When every caption is empty,
nothing is scored: every score the scorer would return (:meth:`~capeval.core.scoring.Scorer.score_keys`) is the fixed score (or ``None``,
means included, when skipped), so a chunk of empty captions reads like any other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from capeval.core.errors import InputError
from capeval.core.inputs import ValidInputs, as_list, is_empty_caption, validate_inputs

EmptyCaption = Union[str, float]
EMPTY_CAPTION_POLICIES = ("score", "error", "skip")


def empty_caption_policy(value, *, metric: str = "", corpus_level: bool = False) -> EmptyCaption:
    """``"score"``, ``"error"``, ``"skip"`` or a finite score (a float); anything else is an :class:`InputError`, and so
    is a
    fixed score for a ``corpus_level`` metric (see the module docstring)."""
    if isinstance(value, str) and value in EMPTY_CAPTION_POLICIES:
        return value
    if not (isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
            and math.isfinite(value)):
        raise InputError(f"empty_caption must be 'score', 'error', 'skip' or a finite score, not {value!r}")
    if corpus_level:
        raise InputError(f"{metric} is corpus-level: a fixed score for empty captions has no place in its corpus "
                         "value; use empty_caption='skip' (the other captions scored as a corpus)")
    return float(value)


def empty_caption_refusal(metric: str, scores_empty: bool) -> str:
    """What an empty-caption error adds: the option that scores it (a metric that scores empty captions, refused
    under ``"error"``), or why this metric does not and what leaves it out."""
    if scores_empty:
        return (" (empty_caption='score', the default, scores it as the official implementation does; "
                "--empty-caption score on the command line)")
    return (f": {metric or 'this metric'} does not score empty captions; empty_caption='skip' (--empty-caption "
            "skip) leaves them unscored, or a finite score stands for them, or give every image a caption")


def validate_allowing_empty(predictions, images=None, references=None, *, empty_caption: EmptyCaption,
                            scores_empty: bool = False, **validate_options) -> Tuple[ValidInputs, List[int]]:
    """The whole input validated by :func:`validate_inputs` (images and references of every sample), with the
    positions of its empty captions when ``empty_caption`` allows them (they stay in ``predictions`` as given).
    ``scores_empty``: the scorer scores empty captions and references (``"score"`` lets them through)."""
    if empty_caption in ("score", "error") or predictions is None or isinstance(predictions, str):
        refusal = empty_caption_refusal(validate_options.get("metric", ""), scores_empty)
        return validate_inputs(predictions, images, references, empty=empty_caption == "score" and scores_empty,
                               refusal=refusal, reference_refusal=refusal if scores_empty else "",
                               **validate_options), []
    given = as_list(predictions, "predictions")
    empty = [i for i, caption in enumerate(given) if is_empty_caption(caption)]
    placeholders = ["empty caption" if is_empty_caption(caption) else caption for caption in given]
    valid = validate_inputs(placeholders, images, references, **validate_options)
    return ValidInputs([given[i] if is_empty_caption(given[i]) else c for i, c in enumerate(valid.predictions)],
                       valid.images, valid.references), empty


@dataclass(frozen=True)
class PolicyInputs(ValidInputs):
    """Validated input under a ``"skip"`` or fixed-score policy: every sample (empty captions as given) and the
    positions of the empty captions (``empty``), which :meth:`scored` leaves out."""

    empty: Tuple[int, ...] = ()
    empty_caption: EmptyCaption = "skip"

    def scored(self) -> ValidInputs:
        """The samples with a caption, in order."""
        skipped = set(self.empty)
        kept = [i for i in range(len(self)) if i not in skipped]
        return ValidInputs([self.predictions[i] for i in kept], _pick(self.images, kept), _pick(self.references, kept))


def _pick(values: Optional[List], positions: Sequence[int]) -> Optional[List]:
    return None if values is None else [values[i] for i in positions]


def with_empty_captions(result: Dict[str, object], empty: Sequence[int], size: int, empty_caption: EmptyCaption,
                        score_keys: Sequence[str] = ()) -> Dict[str, object]:
    """A result on the non-empty samples of an input of ``size`` samples (empty captions at positions ``empty``) as a
    result on the whole input under the ``"skip"`` or fixed-score policy: every per-sample list gets the empty
    captions back in place (``None`` when skipped, else the fixed score in score lists and ``None`` in other lists
    such as reports), the means count the fixed scores, and the count is added. When every caption is empty, each
    of ``score_keys`` gets its column all the same (its mean: the fixed score, or ``None`` when skipped)."""
    skipped = set(empty)
    kept = [i for i in range(size) if i not in skipped]
    fixed = empty_caption if isinstance(empty_caption, float) else None
    if not kept:
        result = {**result, **{k: fixed for k in score_keys},
                  **{f"{k}_per_sample": [] for k in score_keys}}
    out = dict(result)
    for key, value in result.items():
        if not isinstance(value, list) or len(value) != len(kept) or len(kept) == size:
            continue
        is_score = key.endswith("_per_sample")
        column: List = [fixed if is_score else None] * size
        for position, v in zip(kept, value):
            column[position] = v
        out[key] = column
        mean_key = key[: -len("_per_sample")]
        if is_score and fixed is not None and kept and isinstance(result.get(mean_key), float):
            out[mean_key] = _mean_with_fixed(result[mean_key], column)
    out["empty_captions" if fixed is not None else "skipped_empty_captions"] = len(skipped)
    return out


def _mean_with_fixed(own_mean: float, column: List[float]) -> float:
    """The mean of a score column holding fixed scores, as the scorer averages: a NaN mean (a NaN value averaged in)
    stays NaN; otherwise the mean over the defined values (a scorer that leaves undefined NaN values out, such as
    HICE-S's local terms, leaves them out still)."""
    if math.isnan(own_mean):
        return own_mean
    return float(np.mean([v for v in column if v == v]))
