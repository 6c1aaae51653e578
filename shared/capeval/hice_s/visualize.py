"""Drawing of HICE-S reports, after the paper's figures: numbered regions colour-coded by status (green
mentioned, red unmentioned), and below the image the caption and its phrases, wrong ones in red, each linked to
the regions it names. The report is drawn at a working width between ``MIN_WIDTH`` and ``MAX_WIDTH`` pixels with
a font scaled to that width, so that it stays legible whatever the photo's size and the screen's."""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy.ndimage import distance_transform_edt

MENTIONED = (40, 180, 80)  # green: a region some phrase describes (recall ≥ threshold)
UNMENTIONED = (220, 50, 50)  # red: a region no phrase describes
CORRECT_TEXT = (20, 120, 50)  # darker shades of the same for text on white: a correct phrase, a mentioned region
WRONG_TEXT = (190, 20, 20)  # a wrong phrase (precision < threshold), an unmentioned region
NEUTRAL = (60, 60, 60)
TINT = 0.4
MIN_WIDTH, MAX_WIDTH = 320, 1280
MIN_FONT, CHARS_PER_WIDTH = 12, 28  # font = width / 28 (≥ 12 px): a report shown 350 px wide keeps ≥ 12-px text


def _outline(mask: np.ndarray, thickness: int) -> np.ndarray:
    """Pixels of ``mask`` within ``thickness`` pixels of its border."""
    inside = distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
    return mask & (inside <= thickness)


def _label_point(mask: np.ndarray) -> Tuple[int, int]:
    """The region's pixel farthest from its border (x, y): a label there sits on the region."""
    distance = distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
    y, x = np.unravel_index(int(np.argmax(distance)), distance.shape)
    return int(x), int(y)


def _working_size(image: Image.Image) -> Tuple[int, int]:
    width = min(max(image.width, MIN_WIDTH), MAX_WIDTH)
    return width, max(1, round(image.height * width / image.width))


def _wrap(text: str, font, width: float) -> List[str]:
    lines, line = [], ""
    for word in text.split():
        candidate = f"{line} {word}".strip()
        if line and font.getlength(candidate) > width:
            lines.append(line)
            line = word
            while font.getlength(line) > width:  # a single word wider than the panel is cut into pieces
                cut = max(1, int(len(line) * width / font.getlength(line)))
                lines.append(line[:cut])
                line = line[cut:]
        else:
            line = candidate
    return lines + ([line] if line else [])


def _is_unsegmented(masks: Sequence[np.ndarray]) -> bool:
    """No region was segmented: no masks, or only the whole-image stand-in the scorer uses then."""
    return len(masks) == 0 or (len(masks) == 1 and bool(np.asarray(masks[0]).all()))


def report_lines(report: Dict, unsegmented: bool) -> List[Tuple[str, Tuple[int, int, int]]]:
    """The text panel: ``(text, colour)`` rows for the caption, every phrase and every region."""
    regions_of = {}
    for region in report["regions"]:
        if region["mentioned"] and region["best_phrase"] is not None:
            regions_of.setdefault(region["best_phrase"], []).append(f"R{region['index'] + 1}")
    rows = [(f"Caption: {report['caption']}", NEUTRAL)]
    if not report["phrases"]:
        rows.append(("No phrases found in the caption: only the global score applies.", NEUTRAL))
    for phrase in report["phrases"]:
        status = "correct" if phrase["correct"] else "WRONG"
        named = f" -> {', '.join(regions_of[phrase['phrase']])}" if phrase["phrase"] in regions_of else ""
        rows.append((f"{status}: \"{phrase['phrase']}\" (precision {phrase['precision']:.2f}){named}",
                     CORRECT_TEXT if phrase["correct"] else WRONG_TEXT))
    if unsegmented:
        rows.append(("No region segmented: the whole image was scored as one region (not shown).", NEUTRAL))
        return rows
    for region in report["regions"]:
        best = f"; closest phrase \"{region['best_phrase']}\"" if region["best_phrase"] is not None else ""
        if region["mentioned"]:
            rows.append((f"R{region['index'] + 1} mentioned (recall {region['recall']:.2f}){best}", CORRECT_TEXT))
        else:
            rows.append((f"R{region['index'] + 1} UNMENTIONED (recall {region['recall']:.2f}){best}", WRONG_TEXT))
    return rows


def draw_hice_report(image: Image.Image, report: Dict, masks: Sequence[np.ndarray]) -> Image.Image:
    """The image with every region numbered ``R1…`` and tinted/outlined green (mentioned) or red (unmentioned),
    above a panel with the caption, each phrase (wrong ones in red, linked to the regions it names) and each region.
    ``masks`` are the regions' boolean masks at the image's size; none (or the single whole-image stand-in the
    scorer uses when nothing is segmented) leaves the image untinted and says so."""
    width, height = _working_size(image)
    picture = image.convert("RGB").resize((width, height), Image.LANCZOS)
    unsegmented = _is_unsegmented(masks)
    font_size = max(MIN_FONT, round(width / CHARS_PER_WIDTH))
    font = ImageFont.load_default(size=font_size)
    if not unsegmented:
        scaled = [np.asarray(Image.fromarray(np.asarray(m, bool)).resize((width, height), Image.NEAREST))
                  for m in masks]
        pixels = np.asarray(picture).astype(np.float32)
        colours = [MENTIONED if region["mentioned"] else UNMENTIONED for region in report["regions"]]
        for mask, colour in zip(scaled, colours):
            pixels[mask] = (1 - TINT) * pixels[mask] + TINT * np.array(colour, np.float32)
        for mask, colour in zip(scaled, colours):
            pixels[_outline(mask, max(2, width // 320))] = colour
        picture = Image.fromarray(pixels.round().astype(np.uint8))
        draw = ImageDraw.Draw(picture)
        for region, mask, colour in zip(report["regions"], scaled, colours):
            if mask.any():
                _badge(draw, _label_point(mask), f"R{region['index'] + 1}", colour, font, (width, height))

    margin = font_size // 2
    line_height = round(font_size * 1.3)
    lines = [(piece, colour) for text, colour in report_lines(report, unsegmented)
             for piece in _wrap(text, font, width - 2 * margin)]
    canvas = Image.new("RGB", (width, height + 2 * margin + line_height * len(lines)), (255, 255, 255))
    canvas.paste(picture, (0, 0))
    draw = ImageDraw.Draw(canvas)
    for k, (text, colour) in enumerate(lines):
        draw.text((margin, height + margin + k * line_height), text, fill=colour, font=font)
    return canvas


def _badge(draw: ImageDraw.ImageDraw, point: Tuple[int, int], text: str, colour, font, size: Tuple[int, int]):
    """A filled label centred on ``point``, kept inside the image."""
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    pad = max(2, (bottom - top) // 4)
    w, h = right - left + 2 * pad, bottom - top + 2 * pad
    x = min(max(point[0] - w // 2, 0), max(size[0] - w, 0))
    y = min(max(point[1] - h // 2, 0), max(size[1] - h, 0))
    draw.rectangle((x, y, x + w, y + h), fill=colour, outline=(255, 255, 255), width=max(1, pad // 2))
    draw.text((x + pad - left, y + pad - top), text, fill=(255, 255, 255), font=font)
