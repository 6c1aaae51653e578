"""The suite's texts checked before any model loads, each refusal naming the file and the record (or annotation
entry) the text was read from."""

from __future__ import annotations

from typing import Hashable, Sequence


def refuse_line_breaks(ground_truth, systems: Sequence, image_ids: Sequence[Hashable]) -> None:
    """Refuse a caption or reference of the scored images holding a line break other than ``"\\n"``
    (:data:`capeval.text.ptb.LINE_BREAKS`): the COCO metrics' PTB tokenizer would end a line there and pair the
    following tokens with the wrong images. The error names the file and record (:class:`SystemCaptions` /
    :class:`EvalImage` locations)."""
    from capeval.text.ptb import refuse_line_break

    for system in systems:
        for image_id in image_ids:
            refuse_line_break(system.captions[image_id], system.caption_where(image_id))
    for image_id in image_ids:
        image = ground_truth.images[image_id]
        for j, reference in enumerate(image.references):
            refuse_line_break(reference, image.reference_entry(j, ground_truth.source))
