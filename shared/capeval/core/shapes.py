"""Fixed forward shapes: a model's output for one row depends on the shapes of its forward (matrix kernels are
chosen by shape), so images run in forwards of a fixed number of rows and each text at a width of its own length in
forwards of a fixed number of rows: a feature is bitwise the same in any batch, batch size or order."""

from __future__ import annotations

import hashlib
import inspect
import math
import sys
from typing import Callable, List, Optional, Sequence

import torch

# images per image-model forward (padded): on CPU the most of IMAGE_ROWS_CPU within IMAGE_TOKENS_CPU tokens
IMAGE_ROWS_CPU = (8, 4)
IMAGE_TOKENS_CPU = 512
IMAGE_ROWS_ACCELERATOR = 32


def image_rows(device: torch.device, tokens: Optional[int] = None) -> int:
    """Rows of every image-model forward on ``device`` (see :func:`in_fixed_rows`), for images of ``tokens`` tokens
    each (None: unknown): on CPU the most of :data:`IMAGE_ROWS_CPU` within :data:`IMAGE_TOKENS_CPU` tokens (8 ViT-B/32
    images, 4 of anything larger), on an accelerator :data:`IMAGE_ROWS_ACCELERATOR`."""
    if device.type != "cpu":
        return IMAGE_ROWS_ACCELERATOR
    return next((rows for rows in IMAGE_ROWS_CPU if tokens is not None and rows * tokens <= IMAGE_TOKENS_CPU),
                IMAGE_ROWS_CPU[-1])


def in_fixed_rows(forward: Callable[..., torch.Tensor], *tensors: torch.Tensor, rows: int) -> torch.Tensor:
    """``forward`` on ``tensors`` (aligned on dim 0) in chunks of exactly ``rows`` rows, the last chunk padded with
    zeros and the padding's outputs dropped. Matrix kernels are chosen by shape, and the shape is then fixed: a row's
    output is bitwise the same in any batch, batch size or order (a CPU ViT forward of 1, 2, 3 or 5 images differs in
    the last bits from the same images among 16)."""
    outputs = []
    for start in range(0, len(tensors[0]), rows):
        chunk = [tensor[start:start + rows] for tensor in tensors]
        used = len(chunk[0])
        if used < rows:
            chunk = [torch.cat([c, c.new_zeros((rows - used, *c.shape[1:]))]) for c in chunk]
        outputs.append(forward(*chunk)[:used])
    return torch.cat(outputs)

TEXT_WIDTH_STEP = 4  # a text runs at its token count rounded up to a multiple of this (see text_width)
# rows of text forwards on CPU, the most that hold at most TEXT_TOKENS_CPU tokens: a CPU's throughput per token is
# about the same from 128 tokens a forward up (benchmarks/text_forward_shapes.py), so a forward holds few more tokens
# than a short call needs, and a text over 128 tokens runs alone
TEXT_ROWS_CPU = (24, 16, 8, 4, 2, 1)
TEXT_TOKENS_CPU = 256
TEXT_ROWS_ACCELERATOR = 256  # at most; fewer for wide texts (about TEXT_TOKENS_ACCELERATOR tokens per forward)
TEXT_TOKENS_ACCELERATOR = 16384


def text_width(length: int, limit: int, *, keep_padding: bool = False) -> int:
    """The width a text of ``length`` tokens runs at: a function of the text alone, so its feature does not depend on
    the other texts of its batch. ``length`` rounded up to a multiple of :data:`TEXT_WIDTH_STEP`, at most ``limit``;
    with ``keep_padding`` (transformers encoders) at least one padding position after the text, ``limit`` or not:
    transformers drops an attention mask that is all ones and may run another kernel (flash attention on CUDA; the
    same bits on CPU, measured), so a text's bits could otherwise depend on whether its forward held padding."""
    if keep_padding:
        return -(-(length + 1) // TEXT_WIDTH_STEP) * TEXT_WIDTH_STEP
    return min(-(-length // TEXT_WIDTH_STEP) * TEXT_WIDTH_STEP, limit)


def text_rows(device: torch.device, width: int) -> int:
    """Rows of every text forward ``width`` tokens wide on ``device`` (a function of nothing else): on CPU the most of
    :data:`TEXT_ROWS_CPU` within :data:`TEXT_TOKENS_CPU` tokens (at least 1); on an accelerator the largest power of two
    up to :data:`TEXT_ROWS_ACCELERATOR` within :data:`TEXT_TOKENS_ACCELERATOR` tokens (at least 8)."""
    if device.type == "cpu":
        return next((rows for rows in TEXT_ROWS_CPU if rows * width <= TEXT_TOKENS_CPU), TEXT_ROWS_CPU[-1])
    fits = max(TEXT_TOKENS_ACCELERATOR // width, 8)
    return min(TEXT_ROWS_ACCELERATOR, 1 << (fits.bit_length() - 1))


def text_batch_size(batch_size: int, device: torch.device) -> int:
    """``batch_size`` rounded up to a multiple of every :func:`text_rows` on ``device`` (48 on CPU, 256 on an
    accelerator): with batches of one width (``encode_cached(group_key=...)``), only a width's last forward is partly
    padding."""
    rows = math.lcm(*TEXT_ROWS_CPU) if device.type == "cpu" else TEXT_ROWS_ACCELERATOR
    return -(-batch_size // rows) * rows


def in_text_shapes(forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], ids: Sequence[Sequence[int]], *,
                   width_of: Callable[[int], int], device: torch.device, pad_id: int = 0) -> torch.Tensor:
    """``forward(input_ids, attention_mask)`` (CPU tensors, one output row per input row) on token ``ids``: each text
    ``width_of(its length)`` wide, padded with ``pad_id`` (mask 0), in forwards of exactly :func:`text_rows` rows
    (missing rows all padding, their outputs dropped). The shapes depend on nothing but the text and the device, so a
    text's output is bitwise the same in any batch, batch size or order."""
    widths = [width_of(len(row)) for row in ids]
    outputs: List[Optional[torch.Tensor]] = [None] * len(ids)
    for width in sorted(set(widths)):
        group = [i for i, w in enumerate(widths) if w == width]
        rows = text_rows(device, width)
        for start in range(0, len(group), rows):
            members = group[start:start + rows]
            tokens = torch.full((rows, width), pad_id, dtype=torch.long)
            mask = torch.zeros(rows, width, dtype=torch.long)
            for row, i in enumerate(members):
                tokens[row, :len(ids[i])] = torch.as_tensor(ids[i])
                mask[row, :len(ids[i])] = 1
            for i, output in zip(members, forward(tokens, mask)):
                outputs[i] = output
    return torch.stack(outputs)

# the fixed-shape code above, by name: what a cached feature's forwards tag fingerprints (clip_pooled.forwards_tag)
FIXED_SHAPE_CODE = ("IMAGE_ROWS_CPU", "IMAGE_TOKENS_CPU", "IMAGE_ROWS_ACCELERATOR", "image_rows", "in_fixed_rows",
                    "TEXT_WIDTH_STEP", "TEXT_ROWS_CPU", "TEXT_TOKENS_CPU", "TEXT_ROWS_ACCELERATOR",
                    "TEXT_TOKENS_ACCELERATOR", "text_width", "text_rows", "text_batch_size", "in_text_shapes")


def shapes_tag(device_type: str) -> str:
    """A fingerprint of :data:`FIXED_SHAPE_CODE` (sources and values) and the device type: a feature's bits depend on
    both, so a persisted feature is keyed by it (a cache written under other shapes, or on another device, is not
    reused)."""
    module = sys.modules[__name__]
    parts = [device_type] + [inspect.getsource(value) if inspect.isfunction(value) else repr(value)
                             for value in (getattr(module, name) for name in FIXED_SHAPE_CODE)]
    return "shapes-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
