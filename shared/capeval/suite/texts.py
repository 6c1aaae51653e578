"""The suite's texts checked before any model loads, each refusal naming the file and the record (or annotation
entry) the text was read from."""

from __future__ import annotations

from typing import Hashable, Sequence

from capeval.core.errors import InputError


def refuse_line_breaks(ground_truth, systems: Sequence, image_ids: Sequence[Hashable]) -> None:
    """Refuse a caption or reference of the scored images holding a line break other than ``"\\n"``
    (:data:`capeval.text.coco.LINE_BREAKS`): the COCO metrics' PTB tokenizer would end a line there and pair the
    following tokens with the wrong images. The error names the file and record (:class:`SystemCaptions` /
    :class:`EvalImage` locations)."""
    from capeval.text.coco import LINE_BREAKS

    for system in systems:
        for image_id in image_ids:
            _refuse(system.captions[image_id], system.caption_where(image_id), LINE_BREAKS)
    for image_id in image_ids:
        image = ground_truth.images[image_id]
        for j, reference in enumerate(image.references):
            _refuse(reference, image.reference_entry(j, ground_truth.source), LINE_BREAKS)


def _refuse(text: str, where: str, breaks: Sequence[str]) -> None:
    found = [b for b in breaks if b in text]
    if found:
        raise InputError(f"{where} holds the line break {found[0]!r}: the PTB tokenizer of the COCO metrics would "
                         "split it into two lines (only '\\n' is replaced by a space, as in pycocoevalcap)")
