"""The report's tables as files: ``scores.csv`` (one row per image × system, every metric), ``summary.csv`` (one
row per system × metric: value, CI, cluster rank, the comparison with the baseline, the coverage text) and
``table.tex`` (booktabs).
CSV values are as computed (unscaled, full precision; empty where the document has none); the LaTeX table prints
what the Markdown table prints."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Mapping, Optional

from capeval.report.cells import BETTER, WORSE, Cell, Table, comparison, field, resolve_baseline, score_entry

LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                 "<": r"\textless{}", ">": r"\textgreater{}", "×": r"$\times$", BETTER: r"$\dagger$",
                 WORSE: r"$\ddagger$", "≤": r"$\leq$", "−": "$-$", "…": r"\dots{}"}
_LATEX_PATTERN = re.compile("|".join(map(re.escape, LATEX_SPECIAL)))
LATEX_MARKS = {BETTER: r"$^{\dagger}$", WORSE: r"$^{\ddagger}$", "": ""}
SUMMARY_COLUMNS = ("system", "metric", "value", "ci_low", "ci_high", "rank", "baseline", "delta_vs_baseline",
                   "p_bootstrap_adjusted", "p_randomization_adjusted", "significant", "coverage")


def latex_escape(text: str) -> str:
    return _LATEX_PATTERN.sub(lambda match: LATEX_SPECIAL[match.group(0)], " ".join(str(text).split()))


def _csv_value(value) -> str:
    return "" if value is None else str(value)


def write_scores_csv(report: Mapping, path: Path) -> None:
    keys = list(field(report, "keys", ""))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_id", "file", "system", "caption", *keys])
        for number, image in enumerate(field(report, "images", "")):
            where = f"images[{number}]."
            captions, scores = field(image, "captions", where), field(image, "scores", where)
            for system in report["systems"]:
                row = field(scores, system, f"{where}scores.")
                writer.writerow([image["image_id"], _csv_value(image.get("file")), system,
                                 field(captions, system, f"{where}captions."),
                                 *(_csv_value(row.get(key)) for key in keys)])


def _versus_baseline(report: Mapping, system: str, baseline: Optional[str], key: str) -> list:
    found = None if baseline is None or system == baseline else comparison(report, system, baseline, key)
    if found is None:
        return [_csv_value(baseline), "", "", "", ""]
    row, sign = found
    return [baseline, sign * row["delta"], _csv_value(row.get("p_bootstrap_adjusted")),
            _csv_value(row.get("p_randomization_adjusted")), row["significant"]]


def write_summary_csv(report: Mapping, path: Path, baseline: Optional[str] = None) -> None:
    baseline = resolve_baseline(report, baseline)
    clusters = report.get("clusters", {})
    coverage = field(field(report, "coverage", ""), "text", "coverage.")
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(SUMMARY_COLUMNS)
        for system in report["systems"]:
            for key in report["keys"]:
                score = score_entry(report, system, key)
                low, high = score.get("ci") or (None, None)
                writer.writerow([system, key, _csv_value(score.get("value")), _csv_value(low), _csv_value(high),
                                 _csv_value(clusters.get(key, {}).get(system)),
                                 *_versus_baseline(report, system, baseline, key), coverage])


def latex_cell(cell: Cell) -> str:
    value = rf"\textbf{{{cell.value}}}" if cell.best else cell.value
    ci = rf"~{{\scriptsize[{cell.ci[0]}, {cell.ci[1]}]}}" if cell.ci else ""
    return f"{value}{LATEX_MARKS[cell.mark]}{ci}"


def latex_table(table: Table, report: Mapping) -> str:
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs}``) followed by a note: scale, legend, coverage and
    the resampling facts (wrapped to the float's width)."""
    version = latex_escape(report.get("capeval_version", ""))
    lines = [f"% capeval {version} report table; needs \\usepackage{{booktabs}}",
             rf"\begin{{tabular}}{{l{'r' * len(table.keys)}}}", r"\toprule",
             " & ".join(["System", *map(latex_escape, table.titles)]) + r" \\", r"\midrule"]
    for system in table.systems:
        label = latex_escape(system) + (" (baseline)" if system == table.baseline else "")
        lines.append(" & ".join([label, *(latex_cell(table.cells[system][k]) for k in table.keys)]) + r" \\")
    notes = latex_escape(f"Scores: {table.scale_note} {table.legend} " + "; ".join(table.footer) + ".")
    lines += [r"\bottomrule", r"\end{tabular}", rf"\par\smallskip{{\footnotesize {notes}}}"]
    return "\n".join(lines) + "\n"
