"""The suite's texts checked before any model loads, each refusal naming the file and the record (or annotation
entry) the text was read from; the empty captions and references counted."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Callable, Dict, Hashable, List, Sequence

from capeval.core.errors import InputError
from capeval.core.inputs import is_empty_caption

EMPTY_CAPTION_POLICIES = ("score", "error")  # a suite scores every image of every system: no "skip"
SCORE_IT = ("empty_caption='score' (--empty-caption score) scores it as each metric's official implementation "
            "does")


def check_texts(checks: Sequence[Callable[[str, str], None]], ground_truth, systems: Sequence,
                image_ids: Sequence[Hashable]) -> None:
    """Every caption and reference of the scored images through each rule on texts of the suite's scorers
    (:attr:`~capeval.core.scoring.Scorer.text_rule`: the COCO metrics refuse a line break other than ``"\\n"``,
    which their PTB tokenizer would end a line at). The error names the file and record (:class:`SystemCaptions` /
    :class:`EvalImage` locations)."""
    for check in checks:
        for system in systems:
            for image_id in image_ids:
                check(system.captions[image_id], system.caption_where(image_id))
        for image_id in image_ids:
            image = ground_truth.images[image_id]
            for j, reference in enumerate(image.references):
                check(reference, image.reference_entry(j, ground_truth.source))


def check_empty_caption_policy(empty_caption) -> str:
    if isinstance(empty_caption, str) and empty_caption in EMPTY_CAPTION_POLICIES:
        return empty_caption
    raise InputError(f"empty_caption must be 'score' or 'error' in a suite, not {empty_caption!r} (a suite scores "
                     "every image of every system: 'skip' and fixed scores apply to one metric, `capeval score`)")


@dataclass
class EmptyTexts:
    """The empty (or whitespace-only) texts of the scored images: per system, the ids of the images whose caption is
    empty (every system listed), and the number of empty references."""

    captions: Dict[str, List[Hashable]] = field(default_factory=dict)
    references: int = 0
    images: int = 0

    def warning(self) -> str:
        """One plain line, or "" when there is no empty text."""
        parts = [f"{name} has {len(ids)} empty caption{'s' if len(ids) != 1 else ''} of {self.images}"
                 for name, ids in self.captions.items() if ids]
        if self.references:
            parts.append(f"the references hold {self.references} empty reference"
                         f"{'s' if self.references != 1 else ''}")
        if not parts:
            return ""
        return (f"capeval: {', '.join(parts)} (scored as pycocoevalcap scores them; --empty-caption error, or "
                "empty_caption='error', refuses them)")


def check_empty_texts(scorer_classes: Dict[str, type], ground_truth, systems: Sequence,
                      image_ids: Sequence[Hashable], empty_caption: str) -> EmptyTexts:
    """The empty captions and references of the scored images, counted; refused (an :class:`InputError` naming the
    file, the record and the option) under ``empty_caption="error"``, and under ``"score"`` when a metric of the suite
    (``scorer_classes``: name → scorer class) does not score them (:attr:`Scorer.scores_empty_text`)."""
    empty = EmptyTexts({system.name: [i for i in image_ids if is_empty_caption(system.captions[i])]
                        for system in systems}, images=len(image_ids))
    texts = [(system.caption_where(i), "caption") for system in systems for i in empty.captions[system.name]]
    for image_id in image_ids:
        image = ground_truth.images[image_id]
        for j, reference in enumerate(image.references):
            if is_empty_caption(reference):
                empty.references += 1
                texts.append((image.reference_entry(j, ground_truth.source), "reference"))
    if not texts:
        return empty
    where, kind = texts[0]
    if empty_caption == "error":
        raise InputError(f"{where} is an empty {kind} ({len(texts)} empty text{'s' if len(texts) != 1 else ''} in "
                         f"all); {SCORE_IT}")
    refusing = [name for name, cls in scorer_classes.items() if not cls.scores_empty_text]
    if refusing:
        raise InputError(f"{where} is an empty {kind}: {', '.join(refusing)} do{'es' if len(refusing) == 1 else ''} "
                         "not score empty texts; leave "
                         f"{'it' if len(refusing) == 1 else 'them'} out of the metrics or give every image a text "
                         "(the COCO metrics score them as pycocoevalcap does)")
    return empty


def warn_empty_texts(empty: EmptyTexts) -> None:
    """The one stderr line of a run that scored empty texts."""
    line = empty.warning()
    if line:
        print(line, file=sys.stderr)
