"""A report where no significance test ran prints and stores no p-value (#40 item 6): a one-system ``capeval
evaluate`` says so in its footer (Markdown on stdout, report.html, table.tex) instead of "0 tests, smallest adjusted
p 0.0001", and its report.json has ``smallest_p`` and ``smallest_adjusted_p`` null; two systems on one image alike.
The schema refuses a p-value outside [0, 1] and a smallest p where the family is empty."""

import contextlib
import io
import json
import re
import warnings
from pathlib import Path

import pytest

from capeval import InputError
from capeval.cli import main
from capeval.report.schema import validate_report
from capeval.report.write import json_ready
from capeval.suite.run import evaluate_captions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coco_small"
P_TEXT = re.compile(r"smallest|adjusted p|\bp = |tests:|correction:", re.IGNORECASE)


def footers(out, stdout):
    """The footer line of the Markdown table, report.html's footer and table.tex's note."""
    markdown = stdout.strip().splitlines()[-1]
    page = (out / "report.html").read_text(encoding="utf-8")
    footer = re.search(r'<p class="note" id="footer">(.*?)</p>', page).group(1)
    latex = (out / "table.tex").read_text(encoding="utf-8").splitlines()[-1]
    return markdown, footer, latex, page


def test_one_system_run_prints_and_stores_no_p_value(tmp_path):
    out = tmp_path / "report"
    argv = ["evaluate", "--annotations", str(EXAMPLE / "captions_val2014.json"), "--results",
            str(EXAMPLE / "model_a.json"), "--metrics", "bleu", "rouge_l", "--resamples", "100", "--output", str(out)]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        assert main(argv) == 0, stderr.getvalue()
    significance = json.loads((out / "report.json").read_text(encoding="utf-8"))["significance"]
    assert significance["family_size"] == 0
    assert significance["smallest_p"] is None and significance["smallest_adjusted_p"] is None
    markdown, footer, latex, page = footers(out, stdout.getvalue())
    for text in (markdown, footer, latex):
        assert "no significance test ran (one system: nothing to compare)" in text
        assert not P_TEXT.search(text), text
    assert "100 resamples over images, seed 12345" in markdown  # the CIs' bootstrap still ran
    assert 'id="comparisons"' not in page and "p bootstrap" not in page


def test_two_systems_on_one_image_store_no_p_value(tmp_path):
    sources = []
    for name, caption in (("a", "a dog on the grass"), ("b", "a cat on a mat")):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps({"caption": caption, "references": ["a dog runs on the grass", "a pet"]}) + "\n")
        sources.append(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # every CI and p-value undefined on one image: announced
        report = evaluate_captions(records=sources, metrics=["bleu"], resamples=100, show_progress=False,
                                   output=tmp_path / "out")
    document = json_ready(report)
    validate_report(document)
    assert document["significance"]["family_size"] == 0 and document["significance"]["smallest_p"] is None
    assert all(c[f] is None for c in document["comparisons"]
               for f in ("p_bootstrap", "p_randomization", "p_bootstrap_adjusted", "p_randomization_adjusted"))
    from capeval.report import markdown_table

    footer = markdown_table(report).strip().splitlines()[-1]
    assert "no significance test ran (1 image: a test needs at least 2)" in footer and not P_TEXT.search(footer)


@pytest.fixture(scope="module")
def two_systems():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 6 images: no difference can be marked, announced
        report = evaluate_captions([EXAMPLE / "baseline.json", EXAMPLE / "model_a.json"],
                                   annotations=EXAMPLE / "captions_val2014.json", metrics=["bleu"], resamples=100,
                                   show_progress=False)
    document = json_ready(report)
    validate_report(document)
    assert document["significance"]["family_size"] == len(document["keys"]) and document["significance"]["smallest_p"]
    return document


def changed(document, change):
    copy = json.loads(json.dumps(document))
    change(copy)
    return copy


@pytest.mark.parametrize("change, message", [
    (lambda d: d["significance"]["smallest_p"].update({"paired-ar": 2.0}),
     r"\['significance'\]\['smallest_p'\]\['paired-ar'\]: 2\.0 is greater than the maximum of 1"),
    (lambda d: d["significance"].update(smallest_adjusted_p=2.0),
     r"\['significance'\]\['smallest_adjusted_p'\]: 2\.0 is greater than the maximum of 1"),
    (lambda d: d["comparisons"][0].update(p_randomization=2.0),
     r"\['comparisons'\]\[0\]\['p_randomization'\]: 2\.0 is greater than the maximum of 1"),
    (lambda d: d["comparisons"][1].update(p_bootstrap_adjusted=-0.1),
     r"\['comparisons'\]\[1\]\['p_bootstrap_adjusted'\]: -0\.1 is less than the minimum of 0"),
    (lambda d: d["significance"].update(family_size=0),
     r"\['significance'\]\['smallest_p'\]: \{.*\} is not of type 'null'"),
    (lambda d: d["significance"].update(smallest_p=None),
     r"\['significance'\]\['smallest_p'\]: None is not of type 'object'"),
])
def test_the_schema_refuses_a_p_that_is_no_probability_or_has_no_test(two_systems, change, message):
    with pytest.raises(InputError, match=message):
        validate_report(changed(two_systems, change))
