"""The Markdown table: systems × metrics, values ×100 with their CI, † / ‡ against the baseline, the best value
per metric in bold, the scale in the header and coverage/resampling facts in the footer. Expected cells are derived
from the fixture's raw numbers and its list of significant pairs, not from the report code."""

import pytest
from conftest import KEYS, SIGNIFICANT, SYSTEMS, rename_system

from capeval.core.errors import InputError
from capeval.report import markdown_table

TITLES = ["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr", "CLIP-S"]


def significant(first, second, key):
    return (first, second, key) in SIGNIFICANT or (second, first, key) in SIGNIFICANT


def expected_cell(report, system, key, baseline, factor=100.0, digits=1, lower_is_better=()):
    score = report["systems"][system]["scores"][key]
    values = [report["systems"][s]["scores"][key]["value"] for s in report["systems"]]
    pick = min if key in lower_is_better else max
    value = f"{score['value'] * factor:.{digits}f}"
    if score["value"] == pick(values):
        value = f"**{value}**"
    mark = ""
    if baseline and system != baseline and significant(system, baseline, key):
        higher = score["value"] > report["systems"][baseline]["scores"][key]["value"]
        mark = "†" if higher != (key in lower_is_better) else "‡"
    low, high = score["ci"]
    return f"{value}{mark} [{low * factor:.{digits}f}, {high * factor:.{digits}f}]"


def table_rows(text):
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in text.splitlines() if line.startswith("|")]


def test_every_cell_value_ci_mark_and_bold_against_the_documents_baseline(report):
    text = markdown_table(report)
    rows = table_rows(text)
    assert rows[0] == ["System", *TITLES] and rows[1] == [":--|" + "--:|" * (len(KEYS) - 1) + "--:"]
    labels = {"ClipCap": "ClipCap (baseline)", "ours_v1": r"ours\_v1", "ours & <v2>": "ours &amp; &lt;v2&gt;"}
    assert [r[0] for r in rows[2:]] == [labels[s] for s in SYSTEMS]
    for row, system in zip(rows[2:], SYSTEMS):
        assert row[1:] == [expected_cell(report, system, k, "ClipCap") for k in KEYS], system
    # the fixture has both directions and both orders of system_a/system_b
    assert "130.9" in text and rows[3][KEYS.index("cider") + 1].count("†") == 1
    assert rows[3][KEYS.index("clip_s") + 1].count("‡") == 1 and rows[3][KEYS.index("bleu_4") + 1].count("†") == 1
    assert sum(cell.count("†") + cell.count("‡") for row in rows[2:] for cell in row) == len(SIGNIFICANT)


def test_header_states_the_scale_and_marks_and_the_footer_the_facts(report):
    lines = markdown_table(report).splitlines()
    assert lines[0].startswith("Scores: All scores ×100.") and "95 % CI in brackets" in lines[0]
    assert "† / ‡: significantly better / worse than the baseline" in lines[0]
    assert "bold: best per metric" in lines[0]
    footer = lines[-1]
    for fact in ("scored 12 of 12 images of split test", "1000 resamples over images", "seed 12345",
                 "tests: paired-bs, paired-ar", "correction: holm", "alpha 0.05"):
        assert fact in footer, fact


def test_another_baseline_moves_the_marks(report):
    rows = table_rows(markdown_table(report, baseline="ours_v1"))
    assert rows[3][0] == r"ours\_v1 (baseline)" and rows[2][0] == "ClipCap"
    for row, system in zip(rows[2:], SYSTEMS):
        assert row[1:] == [expected_cell(report, system, k, "ours_v1") for k in KEYS], system
    clipcap = dict(zip(KEYS, rows[2][1:]))
    assert "‡" in clipcap["cider"] and "‡" in clipcap["bleu_4"] and "†" in clipcap["clip_s"]


def test_no_baseline_no_marks(report):
    report["baseline"] = None
    text = markdown_table(report)
    assert "†" not in text and "‡" not in text and "(baseline)" not in text
    for row, system in zip(table_rows(text)[2:], SYSTEMS):
        assert row[1:] == [expected_cell(report, system, k, None) for k in KEYS]


def test_lower_is_better_flips_bold_and_marks(report):
    report["metrics"]["cider"]["higher_is_better"] = False
    rows = table_rows(markdown_table(report))
    for row, system in zip(rows[2:], SYSTEMS):
        assert row[KEYS.index("cider") + 1] == expected_cell(report, system, "cider", "ClipCap",
                                                             lower_is_better={"cider"})
    assert "‡" in rows[3][KEYS.index("cider") + 1]


def test_title_and_scale_come_from_the_document_and_the_header_says_which_are_scaled(report):
    report["keys"] += ["vcrscore", "tenths"]
    report["metrics"]["vcrscore"] = {**report["metrics"]["cider"], "title": "My VCR", "scale": 1.0}
    report["metrics"]["tenths"] = {**report["metrics"]["cider"], "title": "Tenths", "scale": 10.0}
    for number, system in enumerate(SYSTEMS):
        report["systems"][system]["scores"]["vcrscore"] = {"value": 0.123456 + number, "ci": [0.1 + number, 0.2]}
        report["systems"][system]["scores"]["tenths"] = {"value": 0.123456 + number, "ci": None}
    report["metrics"]["cider"]["title"] = "CIDEr-D (ours)"
    text = markdown_table(report)
    assert text.splitlines()[0].startswith("Scores: BLEU-1, BLEU-2, BLEU-3, BLEU-4, METEOR, ROUGE-L, CIDEr-D (ours), "
                                           "CLIP-S ×100; Tenths ×10; My VCR as computed.")
    rows = table_rows(text)
    assert rows[0][-3:] == ["CLIP-S", "My VCR", "Tenths"] and rows[0][KEYS.index("cider") + 1] == "CIDEr-D (ours)"
    assert [r[-2] for r in rows[2:]] == ["0.1235 [0.1000, 0.2000]", "1.1235 [1.1000, 0.2000]",
                                         "**2.1235** [2.1000, 0.2000]"]
    assert [r[-1] for r in rows[2:]] == ["1.2", "11.2", "**21.2**"]


@pytest.mark.parametrize("field, value, problem", [
    ("title", None, "'title' is missing"), ("scale", None, "'scale' is missing"),
    ("higher_is_better", None, "'higher_is_better' is missing"), ("title", " ", "title must be a non-empty string"),
    ("scale", 0, "scale must be a finite positive number"), ("scale", "100", "scale must be a finite positive"),
    ("higher_is_better", "yes", "higher_is_better must be true or false")])
def test_a_key_without_its_display_fields_is_refused_naming_the_field(report, field, value, problem):
    if value is None:
        del report["metrics"]["rouge_l"][field]
    else:
        report["metrics"]["rouge_l"][field] = value
    with pytest.raises(InputError, match=rf"report: metrics\['rouge_l'\]\.{problem}"):
        markdown_table(report)


def test_missing_values_print_n_a_and_are_never_best_nor_marked(report):
    report["systems"]["ours & <v2>"]["scores"]["meteor"] = {"value": float("nan"), "ci": [float("nan")] * 2}
    report["systems"]["ours_v1"]["scores"]["rouge_l"] = {"value": None, "ci": None}
    rows = table_rows(markdown_table(report))
    assert rows[4][KEYS.index("meteor") + 1] == "n/a" and rows[3][KEYS.index("rouge_l") + 1] == "n/a"
    meteor = [r[KEYS.index("meteor") + 1] for r in rows[2:4]]
    best = max(report["systems"][s]["scores"]["meteor"]["value"] for s in ("ClipCap", "ours_v1"))
    assert f"**{best * 100:.1f}**" in " ".join(meteor)


def test_names_cannot_break_the_table(report):
    rename_system(report, "ours_v1", "a|b *c*")
    rows = table_rows(markdown_table(report))
    assert rows[-1][0] == r"a\|b \*c\*" and all(len(r) == len(KEYS) + 1 for r in rows[2:])


def test_bad_documents_are_refused_naming_the_field(report):
    with pytest.raises(InputError, match=r"baseline: 'nobody' is not one of the systems"):
        markdown_table(report, baseline="nobody")
    cider = report["systems"]["ours_v1"]["scores"].pop("cider")
    with pytest.raises(InputError, match=r"report: systems\['ours_v1'\].scores.'cider' is missing"):
        markdown_table(report)
    report["systems"]["ours_v1"]["scores"]["cider"] = cider
    del report["coverage"]["text"]
    with pytest.raises(InputError, match="coverage"):
        markdown_table(report)
