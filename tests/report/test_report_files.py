"""write_report's files: report.json (the whole document, strict JSON), scores.csv (image × system, every metric,
as computed), summary.csv (system × metric with the comparison against the baseline) and table.tex (booktabs)."""

import csv
import json
import math

import numpy as np
import pytest
from conftest import INJECTION, KEYS, SIGNIFICANT, SYSTEMS, rename_system

from capeval.core.errors import InputError
from capeval.report import write_report


@pytest.fixture
def written(report, tmp_path, images_root):
    return write_report(report, tmp_path / "out", images_root=images_root)


def test_the_files_and_their_names(written, tmp_path):
    assert {k: p.name for k, p in written.items()} == {"json": "report.json", "csv": "scores.csv",
                                                      "summary": "summary.csv", "latex": "table.tex",
                                                      "html": "report.html"}
    assert all(p.parent == tmp_path / "out" and p.stat().st_size > 0 for p in written.values())


def test_json_is_the_whole_document_in_strict_json(report, tmp_path):
    report["systems"]["ours_v1"]["scores"]["meteor"]["ci"] = [float("nan"), float("inf")]
    report["undefined"] = {"meteor": {"ours_v1": "the CI is not finite"}}
    report["significance"]["seed"] = np.int64(12345)  # numpy scalars as the stats code may leave them
    written = write_report(report, tmp_path / "out")
    text = written["json"].read_text(encoding="utf-8")
    document = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-JSON constant {name}"))
    assert document["systems"]["ours_v1"]["scores"]["meteor"]["ci"] == [None, None]
    assert document["significance"]["seed"] == 12345 and document["undefined"] == report["undefined"]
    for key in ("capeval_version", "created", "coverage", "baseline", "metrics", "keys", "comparisons", "clusters"):
        assert document[key] == report[key], key
    assert document["images"] == report["images"]  # every per-image score, caption and reference
    assert document["metrics"]["cider"]["hashcode"] == "cider|capeval 0.9|abc6"
    assert INJECTION in text  # stored as written; escaping is the renderers' job


def test_json_refuses_what_it_cannot_hold(report, tmp_path):
    report["metrics"]["cider"]["provenance"] = {"weights": object()}
    with pytest.raises(InputError, match=r"report\.metrics\.cider\.provenance\.weights is a object"):
        write_report(report, tmp_path / "out")


def test_scores_csv_has_a_row_per_image_and_system_with_every_metric(report, written):
    with open(written["csv"], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["image_id", "file", "system", "caption", *KEYS, "tiny_random_weights"]
    assert len(rows) == len(report["images"]) * len(SYSTEMS)
    assert {row["tiny_random_weights"] for row in rows} == {""}  # no metric of the fixture ran with test weights
    for row, (image, system) in zip(rows, [(i, s) for i in report["images"] for s in SYSTEMS]):
        assert row["image_id"] == str(image["image_id"]) and row["file"] == image["file"]
        assert row["system"] == system and row["caption"] == image["captions"][system]
        for key in KEYS:
            expected = image["scores"][system][key]
            assert (row[key] == "") if expected is None else float(row[key]) == expected  # full precision
    assert sum(row["bleu_4"] == "" for row in rows) == 1  # the one missing per-image score stays empty


def test_summary_csv_has_values_cis_ranks_and_the_comparison_with_the_baseline(report, written):
    with open(written["summary"], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(SYSTEMS) * len(KEYS)
    for row in rows:
        system, key = row["system"], row["metric"]
        score = report["systems"][system]["scores"][key]
        assert float(row["value"]) == score["value"]
        assert [float(row["ci_low"]), float(row["ci_high"])] == score["ci"]
        assert int(row["rank"]) == report["clusters"][key][system] and row["baseline"] == "ClipCap"
        assert row["coverage"] == report["coverage"]["text"]  # #28 item 6: coverage in every output
        assert row["tiny_random_weights"] == "False"
        if system == "ClipCap":
            assert row["delta_vs_baseline"] == row["significant"] == ""
            continue
        expected = score["value"] - report["systems"]["ClipCap"]["scores"][key]["value"]
        assert math.isclose(float(row["delta_vs_baseline"]), expected, rel_tol=1e-12)
        flagged = (system, "ClipCap", key) in SIGNIFICANT or ("ClipCap", system, key) in SIGNIFICANT
        assert row["significant"] == str(flagged)
        assert float(row["p_bootstrap_adjusted"]) == (0.024 if flagged else 1.0)


def latex_rows(text):
    body = text.split("\\midrule\n")[1].split("\\bottomrule")[0]
    return [line[:-len(" \\\\")].split(" & ") for line in body.strip().splitlines()]


def test_latex_is_booktabs_with_escaped_names_marks_as_superscripts_and_bold_best(report, written):
    text = written["latex"].read_text(encoding="utf-8")
    assert text.index("\\toprule") < text.index("\\midrule") < text.index("\\bottomrule") < text.index(
        "\\end{tabular}")
    assert "\\begin{tabular}{l" + "r" * len(KEYS) + "}" in text
    header = text.split("\\toprule\n")[1].split("\n")[0]
    assert header == "System & BLEU-1 & BLEU-2 & BLEU-3 & BLEU-4 & METEOR & ROUGE-L & CIDEr & CLIP-S \\\\"
    rows = latex_rows(text)
    assert [r[0] for r in rows] == ["ClipCap (baseline)", "ours\\_v1", "ours \\& \\textless{}v2\\textgreater{}"]
    for row, system in zip(rows, SYSTEMS):
        assert len(row) == len(KEYS) + 1
        for cell, key in zip(row[1:], KEYS):
            score = report["systems"][system]["scores"][key]
            best = score["value"] == max(report["systems"][s]["scores"][key]["value"] for s in SYSTEMS)
            value = f"{score['value'] * 100:.1f}"
            assert cell.startswith(f"\\textbf{{{value}}}" if best else value), (system, key, cell)
            assert cell.endswith(f"~{{\\scriptsize[{score['ci'][0] * 100:.1f}, {score['ci'][1] * 100:.1f}]}}")
    ours = dict(zip(KEYS, rows[1][1:]))
    assert "$^{\\dagger}$" in ours["cider"] and "$^{\\ddagger}$" in ours["clip_s"] and "$^{\\dagger}$" in ours["bleu_4"]
    assert "$^{\\dagger}$" in dict(zip(KEYS, rows[2][1:]))["meteor"]
    assert text.count("$^{\\dagger}$") + text.count("$^{\\ddagger}$") == len(SIGNIFICANT)
    note = text.split("\\end{tabular}")[1]
    assert "$\\times$100" in note and "scored 12 of 12 images of split test" in note and "seed 12345" in note
    assert "95 \\% CI" in note and "$\\dagger$ / $\\ddagger$" in note
    assert "%" not in note.replace("\\%", "") and "≤" not in note and "×" not in note  # escaped for LaTeX


def test_latex_escapes_every_special_character_in_names(report, tmp_path):
    rename_system(report, "ours_v1", "a_b%c$d#e{f}g~h^i\\j")
    written = write_report(report, tmp_path / "out")
    label = latex_rows(written["latex"].read_text(encoding="utf-8"))[-1][0]
    assert label == ("a\\_b\\%c\\$d\\#e\\{f\\}g\\textasciitilde{}h\\textasciicircum{}i\\textbackslash{}j")


def test_latex_escapes_the_bar_quotes_and_ligatures(report, tmp_path):
    """#34 item 5: ``|`` (an em dash in LaTeX's default OT1 encoding), straight quotes, backquotes and the ``--`` /
    ``,,`` ligatures print as written."""
    rename_system(report, "ours_v1", 'a|b "c" `d\' e--f ,,g')
    written = write_report(report, tmp_path / "out")
    label = latex_rows(written["latex"].read_text(encoding="utf-8"))[-1][0]
    assert label == ("a\\textbar{}b \\texttt{\\char34}c\\texttt{\\char34} \\textasciigrave{}d\\textquotesingle{} "
                     "e-{}-f ,{},g")


NASTY_NAME = 'x|y_z "q" `b\' --- ,,c %$#&{}~^\\ <t> … × ≤ −'


def test_latex_prints_every_special_character_as_written(report, tmp_path):
    """pdflatex (OT1, the default encoding) typesets table.tex; pdftotext reads the system name back as written."""
    import shutil
    import subprocess

    if not (shutil.which("pdflatex") and shutil.which("pdftotext")):
        pytest.skip("pdflatex/pdftotext not installed (Debian: texlive-latex-recommended, poppler-utils)")
    rename_system(report, "ours_v1", NASTY_NAME)
    written = write_report(report, tmp_path / "out")
    document = tmp_path / "doc.tex"
    document.write_text("\\documentclass{article}\\usepackage{booktabs}\\usepackage[landscape]{geometry}"
                        "\\begin{document}\\tiny\\input{out/table.tex}\\end{document}\n", encoding="utf-8")
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", document.name], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "unavailable in encoding" not in run.stdout and "Missing character" not in run.stdout
    text = subprocess.run(["pdftotext", "-layout", "doc.pdf", "-"], cwd=tmp_path, capture_output=True,
                          text=True, check=True).stdout
    # pdftotext's names for LaTeX's glyphs: the underscore is a rule (no text), the tilde/circumflex accents, the
    # \dots's three dots, the minus sign
    shown = (NASTY_NAME.replace("_", " ").replace("~", "˜").replace("^", "ˆ").replace("…", ". . .")
             .replace("−", "−"))
    assert shown in text, text
    assert written["latex"].read_text(encoding="utf-8").count(r"\textbar{}") == 1


FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\tleading tab", "\rleading CR"]


def test_csv_text_cells_that_start_like_formulas_get_a_quote_and_numbers_stay_numbers(report, tmp_path):
    """#34 item 5 (OWASP's CSV-injection rule): text cells starting with = + - @ tab CR get a leading ', in
    scores.csv and summary.csv; numbers (negative differences included) are written as numbers; report.json keeps
    the raw text."""
    rename_system(report, "ours_v1", FORMULAS[0])
    report["coverage"]["text"] = "-scored 12 of 12 images"
    for number, image in enumerate(report["images"]):
        image["captions"]["ClipCap"] = FORMULAS[number % len(FORMULAS)]
    report["images"][0]["file"] = "=evil.jpg"
    report["images"][1]["image_id"] = "-5"  # a text id: text, so protected
    written = write_report(report, tmp_path / "out")
    with open(written["csv"], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        image = next(i for i in report["images"] if str(i["image_id"]).lstrip("'") == row["image_id"].lstrip("'"))
        caption = image["captions"][row["system"].lstrip("'")]
        assert row["caption"] == ("'" + caption if caption[0] in "=+-@\t\r" else caption)
        assert row["system"] in ("ClipCap", "'" + FORMULAS[0], "ours & <v2>")
    assert rows[0]["file"] == "'=evil.jpg" and rows[3 * 1]["image_id"] == "'-5"
    assert rows[3 * 2]["image_id"] == str(report["images"][2]["image_id"])  # a number id stays a number
    with open(written["summary"], newline="", encoding="utf-8") as handle:
        summary = list(csv.DictReader(handle))
    assert {row["coverage"] for row in summary} == {"'-scored 12 of 12 images"}
    deltas = [row["delta_vs_baseline"] for row in summary if row["delta_vs_baseline"]]
    negative = [d for d in deltas if d.startswith("-")]
    assert negative and all(float(d) < 0 for d in negative)  # a negative number is a number, unprotected
    expected = {report["systems"][s]["scores"][k]["value"] - report["systems"]["ClipCap"]["scores"][k]["value"]
                for s in ("ours & <v2>",) for k in KEYS}
    shown = {float(r["delta_vs_baseline"]) for r in summary if r["system"] == "ours & <v2>"}
    assert all(any(math.isclose(a, b, rel_tol=1e-12) for b in expected) for a in shown)
    document = json.loads(written["json"].read_text(encoding="utf-8"))
    assert FORMULAS[0] in document["systems"] and document["images"][0]["file"] == "=evil.jpg"
    assert [image["captions"]["ClipCap"] for image in document["images"][:6]] == FORMULAS


def _tiny(report, keys, how):
    for key in keys:
        metric = report["metrics"][key]
        if how == "provenance":
            metric["provenance"]["tiny_random_weights"] = True
        else:  # only the hashcode says so (as a replayed judge cache's)
            metric["hashcode"] += "|TINY-RANDOM-WEIGHTS"


@pytest.mark.parametrize("how", ["provenance", "hashcode"])
def test_tiny_weights_are_marked_in_the_csvs_and_latex(report, tmp_path, how):
    _tiny(report, ["clip_s", "cider"], how)
    written = write_report(report, tmp_path / "out")
    with open(written["csv"], newline="", encoding="utf-8") as handle:
        assert {row["tiny_random_weights"] for row in csv.DictReader(handle)} == {"cider clip_s"}
    with open(written["summary"], newline="", encoding="utf-8") as handle:
        flags = {(row["system"], row["metric"]): row["tiny_random_weights"] for row in csv.DictReader(handle)}
    assert flags == {(s, k): str(k in ("clip_s", "cider")) for s in SYSTEMS for k in KEYS}
    text = written["latex"].read_text(encoding="utf-8")
    warning = text.splitlines()[1]
    assert warning.startswith("\\noindent\\textbf{WARNING: CIDEr, CLIP-S were scored with TINY RANDOM TEST WEIGHTS")
    header = text.split("\\toprule\n")[1].split("\n")[0]
    assert header.endswith("CIDEr (tiny) & CLIP-S (tiny) \\\\") and "ROUGE-L &" in header
    for row in latex_rows(text):
        cells = dict(zip(KEYS, row[1:]))
        assert all(("~(tiny)" in cell) == (key in ("clip_s", "cider")) for key, cell in cells.items()), row
    bold = [cell for row in latex_rows(text) for key, cell in zip(KEYS, row[1:]) if key in ("clip_s", "cider")
            and "\\textbf" in cell]
    assert len(bold) == 2 and all("~(tiny)" in cell for cell in bold)  # never "best" without the mark
