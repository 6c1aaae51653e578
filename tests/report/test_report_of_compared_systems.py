"""The report reads what ``capeval.statistics.systems.compare_systems`` returns (the agreed contract, on the
production path, no hand-made comparisons): a system clearly better than the baseline gets †, one clearly worse ‡,
in Markdown, LaTeX and HTML, and summary.csv's delta is value(system) − value(baseline)."""

import csv

import numpy as np
from conftest import display, parse_html

from capeval.core.corpus_statistics import mean_statistics
from capeval.statistics.systems import compare_systems
from capeval.report import markdown_table, write_report

KEYS = ["cider", "clip_s"]


def compared_report():
    rng = np.random.default_rng(3)
    base = {k: rng.normal(1.0 if k == "cider" else 0.75, 0.1, 40) for k in KEYS}
    scores = {"base": base,
              "better": {k: v + 0.15 + rng.normal(0, 0.02, 40) for k, v in base.items()},
              "worse": {k: v - 0.15 + rng.normal(0, 0.02, 40) for k, v in base.items()}}
    compared = compare_systems({s: {k: mean_statistics(v) for k, v in per_key.items()}
                                for s, per_key in scores.items()}, baseline="base", resamples=500, seed=5)
    images = [{"image_id": i, "file": None, "references": ["a reference"],
               "captions": {s: f"{s} caption {i}" for s in scores},
               "scores": {s: {k: float(scores[s][k][i]) for k in KEYS} for s in scores}} for i in range(40)]
    return {"capeval_version": "test", "created": "now", "baseline": "base", "keys": KEYS,
            "coverage": {"scored": 40, "total": 40, "split": None, "text": "scored 40 of 40 images"},
            "metrics": {k: {"scorer": k, "hashcode": k, "provenance": {}, "corpus_level": False, **display(k)}
                        for k in KEYS},
            "systems": {s: {"source": f"{s}.json", "scores": compared["systems"][s]} for s in scores},
            "comparisons": compared["comparisons"], "clusters": compared["clusters"],
            "significance": compared["significance"], "undefined": compared["undefined"], "images": images}


def test_marks_follow_compare_systems_decisions(tmp_path):
    report = compared_report()
    assert all(c["significant"] for c in report["comparisons"])  # the data make every difference clear
    rows = {line.split(" | ")[0].strip("| "): line for line in markdown_table(report).splitlines()
            if line.startswith("| ")}
    assert rows["base (baseline)"].count("†") + rows["base (baseline)"].count("‡") == 0
    assert rows["better"].count("†") == 2 and "‡" not in rows["better"]
    assert rows["worse"].count("‡") == 2 and "†" not in rows["worse"]
    written = write_report(report, tmp_path)
    latex = written["latex"].read_text(encoding="utf-8")
    assert latex.count("$^{\\dagger}$") == 2 and latex.count("$^{\\ddagger}$") == 2
    dom = parse_html(written["html"].read_text(encoding="utf-8"))
    marks = {r.find("th").text(): [s.text() for s in r.find_all("sup")]
             for r in dom.find("table", id="scores").find("tbody").find_all("tr")}
    assert marks == {"base (baseline)": [], "better": ["†", "†"], "worse": ["‡", "‡"]}
    with open(written["summary"], newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["system"] != "base":
                expected = (report["systems"][row["system"]]["scores"][row["metric"]]["value"]
                            - report["systems"]["base"]["scores"][row["metric"]]["value"])
                assert np.isclose(float(row["delta_vs_baseline"]), expected, rtol=1e-12, atol=0)
                assert (float(row["delta_vs_baseline"]) > 0) == (row["system"] == "better")
