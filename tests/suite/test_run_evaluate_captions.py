"""``evaluate_captions``: the report document it returns is the ``report.json`` it writes, states the coverage (so do
the table, report.html, table.tex and summary.csv), holds each system's suite values (equal to ``score_suite`` on the
same inputs) with the comparison's CIs and tests, and one row per scored image; inputs are checked before any model
loads."""

import json
from pathlib import Path

import pytest

from capeval import InputError
from capeval.core.coco_files import read_ground_truth, read_results
from capeval.statistics.systems import compare_systems
from capeval.report import markdown_table
from capeval.report.write import json_ready
from capeval.suite import resolve_plan, score_suite
from capeval.suite.run import evaluate_captions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coco_small"
RESULTS = [EXAMPLE / f"{name}.json" for name in ("baseline", "model_a", "model_b")]


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "report"
    report = evaluate_captions(RESULTS, annotations=EXAMPLE / "captions_val2014.json",
                               images=EXAMPLE / "images" / "val2014", metrics=["bleu", "rouge_l"], baseline="baseline",
                               resamples=100, seed=7, output=out)
    return report, out


def test_the_returned_document_is_the_written_report(evaluated):
    report, out = evaluated
    assert json.loads((out / "report.json").read_text()) == json_ready(report)


def test_coverage_is_stated_in_the_document_the_table_and_the_renderings(evaluated):
    report, out = evaluated
    text = "scored 6 of 12 annotated images"  # the COCO file annotates all 12; the results cover the 6 test ones
    assert report["coverage"] == {"scored": 6, "total": 12, "split": None, "text": text, "empty_references": 0}
    assert text in markdown_table(report)
    for name in ("report.html", "table.tex", "summary.csv"):
        assert text in (out / name).read_text(), name


def test_values_are_the_suites_and_the_tests_the_comparisons(evaluated):
    report, _ = evaluated
    truth = read_ground_truth(EXAMPLE / "captions_val2014.json")
    systems = [read_results(path, truth) for path in RESULTS]
    scores = score_suite(truth, systems, resolve_plan(["bleu", "rouge_l"]), show_progress=False)
    comparison = compare_systems(scores.statistics, baseline="baseline", resamples=100, seed=7)
    assert report["keys"] == scores.keys and report["baseline"] == "baseline"
    for system in scores.corpus:
        for key in scores.keys:
            entry = report["systems"][system]["scores"][key]
            assert entry["value"] == scores.corpus[system][key]
            assert entry["ci"] == comparison["systems"][system][key]["ci"]
    assert report["comparisons"] == comparison["comparisons"] and report["clusters"] == comparison["clusters"]
    assert report["significance"]["seed"] == 7 and report["significance"]["resamples"] == 100
    assert [row["image_id"] for row in report["images"]] == scores.image_ids
    first = report["images"][0]
    assert first["file"] == truth.images[scores.image_ids[0]].file
    assert first["references"] == list(truth.images[scores.image_ids[0]].references)
    assert first["scores"]["model_a"]["rouge_l"] == scores.per_image["model_a"]["rouge_l"][0]
    assert first["captions"] == {s.name: s.captions[scores.image_ids[0]] for s in systems}


@pytest.mark.parametrize("kwargs, message", [
    ({"results": RESULTS}, "give either annotations .* or records"),
    ({"results": RESULTS, "annotations": EXAMPLE / "captions_val2014.json", "records": [RESULTS[0]]},
     "give either annotations .* or records"),
    ({"results": [], "annotations": EXAMPLE / "captions_val2014.json"}, "no results files given"),
    ({"results": RESULTS, "annotations": EXAMPLE / "captions_val2014.json", "fields": {"caption": "text"}},
     "fields, image_format and config apply to records sources"),
    ({"results": RESULTS, "annotations": EXAMPLE / "captions_val2014.json", "metrics": ["clip_s"]},
     r"clip_s score\(s\) images: give the image root"),
    ({"results": RESULTS, "annotations": EXAMPLE / "captions_val2014.json", "metrics": ["bleu"],
      "options": {"rouge_l": {}}}, "not among the suite's metrics"),
    ({"results": RESULTS, "annotations": EXAMPLE / "captions_val2014.json", "resamples": 0},
     "resamples: 0 is too few for a 95% percentile interval"),
])
def test_inputs_are_refused_before_any_model_loads(kwargs, message, monkeypatch):
    import capeval.core.scoring

    def refuse(*args, **options):
        raise AssertionError("a model loaded before the inputs were checked")

    monkeypatch.setattr(capeval.core.scoring, "load_scorer", refuse)
    monkeypatch.setattr(capeval.core.scoring.ScorerSpec, "load", refuse)  # how a suite loads its plan's scorers
    with pytest.raises(InputError, match=message):
        evaluate_captions(**{"metrics": ["bleu"], **kwargs})
