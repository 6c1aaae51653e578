"""The report's tables as files: ``scores.csv`` (one row per image × system, every metric and the counts of its
detail records: ``capture_objects_missed``, ...), ``summary.csv`` (one row per system × metric: value, CI, cluster
rank, the comparison with the baseline, the coverage text) and ``table.tex`` (booktabs).

CSV values are as computed (unscaled, full precision; empty where the document has none). A text cell that a
spreadsheet program would take for a formula (first character ``=``, ``+``, ``-``, ``@``, a tab or a carriage
return: OWASP's rule against CSV injection) is written with a leading ``'``; numbers are written as numbers,
negative ones included (report.json keeps the raw text). Both files name the metrics scored with tiny random test
weights in a ``tiny_random_weights`` column. The LaTeX table prints what the Markdown table prints, with every
character LaTeX treats specially escaped (``|``, quotes and the ligatures ``--`` and ``,,`` included)."""

from __future__ import annotations

import csv
import numbers
import re
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from capeval.report.cells import (BETTER, TINY_MARK, WORSE, Cell, Table, comparison, field, resolve_baseline,
                                  score_entry, tiny_weight_keys)
from capeval.report.details import count_columns, count_row

LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                 "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}", '"': r"\texttt{\char34}",
                 "`": r"\textasciigrave{}", "'": r"\textquotesingle{}", "×": r"$\times$", BETTER: r"$\dagger$",
                 WORSE: r"$\ddagger$", "≤": r"$\leq$", "−": "$-$", "…": r"\dots{}"}
_LATEX_PATTERN = re.compile("|".join(map(re.escape, LATEX_SPECIAL)))
_LATEX_LIGATURE = re.compile(r"([-,])(?=\1)")  # "--" (en dash), ",," (low quote): broken by {}
LATEX_MARKS = {BETTER: r"$^{\dagger}$", WORSE: r"$^{\ddagger}$", "": ""}
SCORES_COLUMNS = ("image_id", "file", "system", "caption")  # then the document's keys, then tiny_random_weights
SUMMARY_COLUMNS = ("system", "metric", "value", "ci_low", "ci_high", "rank", "baseline", "delta_vs_baseline",
                   "p_bootstrap_adjusted", "p_randomization_adjusted", "significant", "coverage",
                   "tiny_random_weights")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def latex_escape(text: str) -> str:
    """``text`` on one line, printed by LaTeX as written (specials as commands, ligatures broken by ``{}``)."""
    escaped = _LATEX_PATTERN.sub(lambda match: LATEX_SPECIAL[match.group(0)], " ".join(str(text).split()))
    return _LATEX_LIGATURE.sub(r"\1{}", escaped)


def csv_cell(value) -> str:
    """A CSV cell: empty for None, a number as it is, text with a leading ``'`` when it starts like a formula."""
    if value is None:
        return ""
    if isinstance(value, numbers.Number):
        return str(value)
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([csv_cell(name) for name in header])
        writer.writerows([csv_cell(value) for value in row] for row in rows)


def write_scores_csv(report: Mapping, path: Path) -> None:
    """One row per image × system: its caption, every key's score, the counts of its detail records (no element
    lists: :func:`capeval.report.details.count_columns`), the keys scored with tiny random weights."""
    keys = list(field(report, "keys", ""))
    tiny = " ".join(tiny_weight_keys(report))
    counts = count_columns(report)

    def rows():
        for number, image in enumerate(field(report, "images", "")):
            where = f"images[{number}]."
            captions, scores = field(image, "captions", where), field(image, "scores", where)
            for system in report["systems"]:
                row = field(scores, system, f"{where}scores.")
                yield [image["image_id"], image.get("file"), system, field(captions, system, f"{where}captions."),
                       *(row.get(key) for key in keys), *count_row(image, system, counts), tiny]

    _write_csv(path, [*SCORES_COLUMNS, *keys, *(f"{key}_{count}" for key, count in counts), "tiny_random_weights"],
               rows())


def _versus_baseline(report: Mapping, system: str, baseline: Optional[str], key: str) -> list:
    found = None if baseline is None or system == baseline else comparison(report, system, baseline, key)
    if found is None:
        return [baseline, None, None, None, None]
    row, sign = found
    return [baseline, sign * row["delta"], row.get("p_bootstrap_adjusted"), row.get("p_randomization_adjusted"),
            row["significant"]]


def write_summary_csv(report: Mapping, path: Path, baseline: Optional[str] = None) -> None:
    baseline = resolve_baseline(report, baseline)
    clusters = report.get("clusters", {})
    coverage = field(field(report, "coverage", ""), "text", "coverage.")
    tiny = tiny_weight_keys(report)

    def rows():
        for system in report["systems"]:
            for key in report["keys"]:
                score = score_entry(report, system, key)
                low, high = score.get("ci") or (None, None)
                yield [system, key, score.get("value"), low, high, clusters.get(key, {}).get(system),
                       *_versus_baseline(report, system, baseline, key), coverage, key in tiny]

    _write_csv(path, SUMMARY_COLUMNS, rows())


def latex_cell(cell: Cell) -> str:
    value = rf"\textbf{{{cell.value}}}" if cell.best else cell.value
    tiny = f"~{latex_escape(TINY_MARK)}" if cell.tiny else ""
    ci = rf"~{{\scriptsize[{cell.ci[0]}, {cell.ci[1]}]}}" if cell.ci else ""
    return f"{value}{LATEX_MARKS[cell.mark]}{tiny}{ci}"


def latex_table(table: Table, report: Mapping) -> str:
    """A booktabs ``tabular`` (needs ``\\usepackage{booktabs}``) followed by a note: scale, legend, coverage and
    the resampling facts (wrapped to the float's width); a bold warning line above it when a metric ran with tiny
    random test weights."""
    version = latex_escape(report.get("capeval_version", ""))
    lines = [f"% capeval {version} report table; needs \\usepackage{{booktabs}}"]
    if table.warning:
        lines.append(rf"\noindent\textbf{{{latex_escape(table.warning)}}}\par\smallskip")
    lines += [rf"\begin{{tabular}}{{l{'r' * len(table.keys)}}}", r"\toprule",
              " & ".join(["System", *map(latex_escape, table.titles)]) + r" \\", r"\midrule"]
    for system in table.systems:
        label = latex_escape(system) + (" (baseline)" if system == table.baseline else "")
        lines.append(" & ".join([label, *(latex_cell(table.cells[system][k]) for k in table.keys)]) + r" \\")
    notes = latex_escape(f"{table.warning} Scores: {table.scale_note} {table.legend} " + "; ".join(table.footer)
                         + ".")
    lines += [r"\bottomrule", r"\end{tabular}", rf"\par\smallskip{{\footnotesize {notes}}}"]
    return "\n".join(lines) + "\n"
