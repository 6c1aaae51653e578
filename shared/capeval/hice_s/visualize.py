"""Drawing of HICE-S reports: regions tinted and outlined by status, phrases listed with wrong ones marked."""

from __future__ import annotations

from typing import Dict, Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

MENTIONED = (40, 180, 80)  # green: a region some phrase describes (recall ≥ threshold)
UNMENTIONED = (220, 50, 50)  # red: a region no phrase describes
CORRECT = MENTIONED
WRONG = UNMENTIONED
TINT = 0.35
LINE_HEIGHT = 14


def _outline(mask: np.ndarray) -> np.ndarray:
    """Pixels of ``mask`` with a 4-neighbour outside the mask."""
    padded = np.pad(mask, 1)
    interior = padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    return mask & ~interior


def draw_hice_report(image: Image.Image, report: Dict, masks: Sequence[np.ndarray]) -> Image.Image:
    """The image with each region tinted/outlined green (mentioned) or red (unmentioned), above a text panel
    listing every phrase with its precision, wrong phrases in red and marked ``✗``."""
    pixels = np.asarray(image.convert("RGB")).astype(np.float32)
    for region, mask in zip(report["regions"], masks):
        colour = np.array(MENTIONED if region["mentioned"] else UNMENTIONED, dtype=np.float32)
        pixels[mask] = (1 - TINT) * pixels[mask] + TINT * colour
    for region, mask in zip(report["regions"], masks):
        pixels[_outline(mask)] = MENTIONED if region["mentioned"] else UNMENTIONED
    picture = Image.fromarray(pixels.round().astype(np.uint8))

    lines = [("caption: " + report["caption"], (0, 0, 0))]
    lines += [(f"{'ok' if p['correct'] else 'WRONG'}  {p['phrase']}  ({p['precision']:.2f})",
               CORRECT if p["correct"] else WRONG) for p in report["phrases"]]
    if not report["phrases"]:
        lines.append(("no phrases found in the caption", (0, 0, 0)))
    unmentioned = len(report["unmentioned_regions"])
    lines.append((f"{unmentioned} of {len(report['regions'])} regions unmentioned (red)", (0, 0, 0)))
    canvas = Image.new("RGB", (picture.width, picture.height + LINE_HEIGHT * len(lines) + 8), (255, 255, 255))
    canvas.paste(picture, (0, 0))
    draw = ImageDraw.Draw(canvas)
    font = ImageFont.load_default()
    for k, (text, colour) in enumerate(lines):
        draw.text((4, picture.height + 4 + k * LINE_HEIGHT), text, fill=colour, font=font)
    return canvas
