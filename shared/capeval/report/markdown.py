"""The Markdown table for stdout and READMEs: systems × metrics, value with CI, marks against the baseline, the
best value per metric in bold, the scale in the header and the coverage/resampling facts in the footer."""

from __future__ import annotations

import html
import re
from typing import Mapping, Optional

from capeval.report.cells import TINY_MARK, Cell, Table, build_table

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|#~])")


def escape(text: str) -> str:
    """Text that Markdown prints as written: HTML characters as entities, Markdown's own characters escaped,
    line breaks as spaces (a cell is one line)."""
    one_line = " ".join(str(text).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(one_line, quote=False))


def cell_text(cell: Cell) -> str:
    value = f"**{cell.value}**" if cell.best else cell.value
    tiny = f" {TINY_MARK}" if cell.tiny else ""
    ci = f" [{cell.ci[0]}, {cell.ci[1]}]" if cell.ci else ""
    return f"{value}{cell.mark}{tiny}{ci}"


def system_label(system: str, baseline: Optional[str]) -> str:
    return escape(system) + (" (baseline)" if system == baseline else "")


def render(table: Table) -> str:
    warning = [escape(table.warning), ""] if table.warning else []
    lines = [*warning, f"Scores: {table.scale_note} {table.legend}", "",
             "| " + " | ".join(["System", *map(escape, table.titles)]) + " |",
             "|:--|" + "--:|" * len(table.keys)]
    for system in table.systems:
        row = [system_label(system, table.baseline), *(cell_text(table.cells[system][k]) for k in table.keys)]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", " · ".join(map(escape, table.footer))]
    return "\n".join(lines) + "\n"


def markdown_table(report: Mapping, *, baseline: Optional[str] = None) -> str:
    """The report document's table in Markdown (marks against ``baseline``, default: the document's baseline)."""
    return render(build_table(report, baseline))
