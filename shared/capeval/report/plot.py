"""Inline SVG plots for the HTML report: one panel per metric, each system's score as a dot with its CI as a
whisker, on the table's scale. Plain SVG text (escaped), no script, scales with its container."""

from __future__ import annotations

import html
import math
from typing import List, Mapping, Sequence

from capeval.report.cells import column_title, finite, format_score, scale, score_entry, tiny_weight_keys

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
BASELINE_COLOR = "#555555"
WIDTH, LABEL_WIDTH, RIGHT, ROW, TOP, BOTTOM = 360, 112, 14, 24, 26, 28


def system_colors(systems: Sequence[str], baseline) -> dict:
    others = [s for s in systems if s != baseline]
    colors = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(others)}
    return {**colors, **({baseline: BASELINE_COLOR} if baseline in systems else {})}


def nice_ticks(low: float, high: float, count: int = 4) -> List[float]:
    """Round tick values inside [low, high], at least three (steps of 1, 2 or 5 × a power of ten)."""
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    while True:
        first = math.ceil(low / step) * step
        ticks = [round(first + i * step, 10) for i in range(int((high - first) / step + 1e-9) + 1)]
        if len(ticks) >= 3:
            return ticks
        step /= 2


def _label(text: str, limit: int = 15) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def metric_plot(report: Mapping, key: str, systems: Sequence[str], colors: Mapping[str, str],
                tiny: Sequence[str] = ()) -> str:
    factor = scale(report, key)
    rows = []
    for system in systems:
        entry = score_entry(report, system, key)
        ci = entry.get("ci") or (None, None)
        rows.append((system, entry.get("value"), *ci))
    points = [v * factor for _, value, low, high in rows for v in (value, low, high) if finite(v)]
    low, high = (min(points), max(points)) if points else (0.0, 1.0)
    pad = (high - low) * 0.08 or max(abs(high) * 0.05, 0.05)
    low, high = low - pad, high + pad
    height = TOP + ROW * len(rows) + BOTTOM
    plot_width = WIDTH - LABEL_WIDTH - RIGHT

    def x(value: float) -> float:
        return round(LABEL_WIDTH + (value - low) / (high - low) * plot_width, 2)

    scaled = f" (×{factor:g})" if factor != 1 else ""
    name = html.escape(column_title(report, key, tiny) + scaled)
    parts = [f'<svg class="plot" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{name}">',
             f"<title>{name}: score and CI per system</title>",
             f'<text x="4" y="16" class="plot-title">{name}</text>']
    axis_y = TOP + ROW * len(rows)
    for tick in nice_ticks(low, high):
        parts.append(f'<line x1="{x(tick)}" x2="{x(tick)}" y1="{TOP - 4}" y2="{axis_y}" class="grid"/>'
                     f'<text x="{x(tick)}" y="{axis_y + 16}" text-anchor="middle" class="tick">{tick:g}</text>')
    for row, (system, value, ci_low, ci_high) in enumerate(rows):
        y = TOP + ROW * row + ROW / 2
        color = colors[system]
        shown = format_score(report, key, value)
        ci_text = (f" [{format_score(report, key, ci_low)}, {format_score(report, key, ci_high)}]"
                   if finite(ci_low, ci_high) else "")
        parts.append(f'<g><title>{html.escape(system)}: {shown}{ci_text}</title>'
                     f'<text x="{LABEL_WIDTH - 6}" y="{y + 4}" text-anchor="end" class="label">'
                     f"{html.escape(_label(system))}</text>")
        if finite(ci_low, ci_high):
            left, right = x(ci_low * factor), x(ci_high * factor)
            parts.append(f'<line x1="{left}" x2="{right}" y1="{y}" y2="{y}" stroke="{color}" stroke-width="2"/>'
                         f'<line x1="{left}" x2="{left}" y1="{y - 5}" y2="{y + 5}" stroke="{color}" stroke-width="2"/>'
                         f'<line x1="{right}" x2="{right}" y1="{y - 5}" y2="{y + 5}" stroke="{color}" '
                         f'stroke-width="2"/>')
        if finite(value):
            parts.append(f'<circle cx="{x(value * factor)}" cy="{y}" r="4.5" fill="{color}"/>')
        else:
            parts.append(f'<text x="{LABEL_WIDTH + 4}" y="{y + 4}" class="tick">n/a</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def score_plots(report: Mapping, keys: Sequence[str], systems: Sequence[str], baseline) -> str:
    colors, tiny = system_colors(systems, baseline), tiny_weight_keys(report)
    return "".join(f'<figure class="panel">{metric_plot(report, key, systems, colors, tiny)}</figure>'
                   for key in keys)
