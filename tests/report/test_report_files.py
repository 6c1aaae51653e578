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
    assert list(rows[0]) == ["image_id", "file", "system", "caption", *KEYS]
    assert len(rows) == len(report["images"]) * len(SYSTEMS)
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
