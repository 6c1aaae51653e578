"""The suite's texts checked before any model loads, each refusal naming the file and the record (or annotation
entry) the text was read from."""

from __future__ import annotations

from typing import Hashable, Sequence


def check_texts(checks: Sequence[type], ground_truth, systems: Sequence, image_ids: Sequence[Hashable]) -> None:
    """Every caption and reference of the scored images through each scorer class's
    :meth:`~capeval.core.scoring.Scorer.check_text` (the COCO metrics refuse a line break other than ``"\\n"``,
    which their PTB tokenizer would end a line at). The error names the file and record (:class:`SystemCaptions` /
    :class:`EvalImage` locations)."""
    for check in checks:
        for system in systems:
            for image_id in image_ids:
                check.check_text(system.captions[image_id], system.caption_where(image_id))
        for image_id in image_ids:
            image = ground_truth.images[image_id]
            for j, reference in enumerate(image.references):
                check.check_text(reference, image.reference_entry(j, ground_truth.source))
