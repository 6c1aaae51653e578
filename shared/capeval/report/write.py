"""``write_report``: the report document and its renderings in one folder."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, Mapping, Optional

from capeval.core.errors import InputError
from capeval.report.cells import build_table
from capeval.report.html import render_html
from capeval.report.tables import latex_table, write_scores_csv, write_summary_csv

FILES = {"json": "report.json", "csv": "scores.csv", "summary": "summary.csv", "latex": "table.tex",
         "html": "report.html"}


def json_ready(value, where: str = "report"):
    """The document as strict JSON values: NaN/±inf become null (JSON has none), tuples lists, paths strings,
    numpy scalars and arrays Python numbers and lists; anything else unknown is refused, naming where it is."""
    if isinstance(value, Mapping):
        return {str(k): json_ready(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy scalar or array
        return json_ready(value.tolist(), where)
    raise InputError(f"report: {where} is a {type(value).__name__}, which JSON cannot hold")


def write_report(report: Mapping, out_dir, *, images_root=None, baseline: Optional[str] = None) -> Dict[str, Path]:
    """Write ``report.json`` (the whole document), ``scores.csv``, ``summary.csv``, ``table.tex`` and the
    self-contained ``report.html`` (thumbnails from ``images_root``, the folder the images' ``file`` paths are
    relative to; None: no thumbnails) into ``out_dir``. Returns ``{"json", "csv", "summary", "latex", "html"}``
    → path. Marks are against ``baseline`` (default: the document's)."""
    table = build_table(report, baseline)  # checks the document before anything is written
    document = json_ready(report)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {kind: out / name for kind, name in FILES.items()}
    with open(paths["json"], "w", encoding="utf-8") as handle:  # compact: the C encoder (100k images stay fast)
        json.dump(document, handle, ensure_ascii=False, allow_nan=False)
        handle.write("\n")
    write_scores_csv(report, paths["csv"])
    write_summary_csv(report, paths["summary"], table.baseline)
    paths["latex"].write_text(latex_table(table, report), encoding="utf-8")
    root = None if images_root is None else Path(images_root)
    paths["html"].write_text(render_html(report, table, root), encoding="utf-8")
    return paths
