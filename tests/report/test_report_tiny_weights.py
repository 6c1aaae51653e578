"""#34 item 3 on the production path: `capeval evaluate` with CLIP-S on tiny random test weights (the tiny hub) and
ROUGE-L (no weights) marks CLIP-S and RefCLIP-S, and only them, in every output: the stdout table, table.tex,
summary.csv, scores.csv, the visible top of report.html (a banner, not a collapsed section) and report.json; a tiny
value is never bold as "best" without the mark. Which metrics are tiny is known from the inputs: every weight of the
tiny hub is a test weight, ROUGE-L loads none."""

import csv
import json
import warnings
from pathlib import Path

import pytest
from conftest import parse_html

from capeval.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coco_small"
SYSTEMS = ("baseline", "model_a", "model_b")
TINY = {"clip_s": "CLIP-S", "refclip_s": "RefCLIP-S"}
WARNING = "WARNING: CLIP-S, RefCLIP-S were scored with TINY RANDOM TEST WEIGHTS: their values, marked (tiny), mean"


@pytest.fixture(scope="module")
def run(tiny_hub, tmp_path_factory):
    """One CLI run: stdout, and the output folder."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("tiny") / "report"
    argv = ["evaluate", "--annotations", str(EXAMPLE / "captions_val2014.json"), "--results",
            *[str(EXAMPLE / f"{s}.json") for s in SYSTEMS], "--images", str(EXAMPLE / "images" / "val2014"),
            "--metrics", "rouge_l", "clip_s", "--baseline", "baseline", "--resamples", "200", "--output", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0, stderr.getvalue()
    return stdout.getvalue(), out


def markdown_rows(text):
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in text.splitlines() if line.startswith("|")]


def test_report_json_names_the_tiny_metrics(run):
    _, out = run
    document = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert document["keys"] == ["rouge_l", *TINY]
    assert document["tiny_random_weights"] == list(TINY)
    for key in TINY:
        assert document["metrics"][key]["hashcode"].endswith("|TINY-RANDOM-WEIGHTS")
        assert document["metrics"][key]["provenance"]["tiny_random_weights"] is True
    assert not document["metrics"]["rouge_l"]["hashcode"].endswith("TINY-RANDOM-WEIGHTS")


def test_the_stdout_table_opens_with_the_warning_and_marks_every_tiny_value(run):
    stdout, _ = run
    lines = stdout.splitlines()
    assert lines[0].startswith(WARNING)
    rows = markdown_rows(stdout)
    assert rows[0] == ["System", "ROUGE-L", "CLIP-S (tiny)", "RefCLIP-S (tiny)"]
    bold = 0
    for row in rows[2:]:
        assert "(tiny)" not in row[1]
        for cell in row[2:]:
            assert " (tiny)" in cell, cell  # every tiny value, bold "best" included, carries the mark
            bold += cell.startswith("**")
    assert bold >= 2  # each tiny column has a best value, and it is marked


def test_table_tex_warns_and_marks(run):
    _, out = run
    text = (out / "table.tex").read_text(encoding="utf-8")
    assert text.splitlines()[1].startswith("\\noindent\\textbf{" + WARNING)
    body = text.split("\\midrule\n")[1].split("\\bottomrule")[0].strip().splitlines()
    header = text.split("\\toprule\n")[1].split("\n")[0]
    assert header == "System & ROUGE-L & CLIP-S (tiny) & RefCLIP-S (tiny) \\\\"
    for line in body:
        cells = line[:-len(" \\\\")].split(" & ")
        assert "(tiny)" not in cells[1] and all("~(tiny)" in cell for cell in cells[2:]), line
    assert sum("\\textbf" in cell for line in body for cell in line.split(" & ")[2:]) >= 2


def test_both_csvs_name_the_tiny_metrics(run):
    _, out = run
    with open(out / "summary.csv", newline="", encoding="utf-8") as handle:
        summary = list(csv.DictReader(handle))
    assert {(row["metric"], row["tiny_random_weights"]) for row in summary} == {
        ("rouge_l", "False"), ("clip_s", "True"), ("refclip_s", "True")}
    with open(out / "scores.csv", newline="", encoding="utf-8") as handle:
        scores = list(csv.DictReader(handle))
    assert len(scores) == 6 * len(SYSTEMS) and {row["tiny_random_weights"] for row in scores} == {"clip_s refclip_s"}


def test_report_html_opens_with_a_visible_banner_and_marks_the_table(run):
    _, out = run
    dom = parse_html((out / "report.html").read_text(encoding="utf-8"))
    first = dom.find("main").children[0]
    assert first.attrs.get("id") == "tiny-weights" and first.text().startswith(WARNING)
    assert not any(first in details.find_all() for details in dom.find_all("details"))  # not collapsed
    table = dom.find("table", id="scores")
    assert [th.text() for th in table.find("thead").find_all("th")] == ["System", "ROUGE-L", "CLIP-S (tiny)",
                                                                       "RefCLIP-S (tiny)"]
    for row in table.find("tbody").find_all("tr"):
        rouge, *tiny = row.find_all("td")
        assert not rouge.find_all("span", class_="tiny")
        assert all(cell.find("span", class_="tiny").text() == "(tiny)" for cell in tiny)
