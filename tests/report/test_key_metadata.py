"""A new metric reaches the report with the title, scale and direction its scorer declares (``key_metadata``), with
no table to edit: a scorer registered here (words per caption: printed as computed, lower is better, a COCOEvalCap
name of its own) runs through ``evaluate_captions`` and ``COCOEvalCap`` on the production path, beside CIDEr-D
(×100). Expected values come from the example files' captions, counted here."""

import json
from pathlib import Path

import numpy as np
import pytest

from capeval.cocoevalcap import COCOEvalCap
from capeval.core import scoring
from capeval.core.evaluation_sets import EvalImage, GroundTruth, SystemCaptions
from capeval.core.keys import ScoreKey
from capeval.core.scoring import Scorer, register_scorer, summarize
from capeval.report import markdown_table
from capeval.suite import resolve_plan, score_suite
from capeval.suite.run import evaluate_captions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coco_small"
SYSTEMS = ("baseline", "model_a", "model_b")
RESULTS = [EXAMPLE / f"{name}.json" for name in SYSTEMS]


class WordCountScorer(Scorer):
    """Words per caption (whitespace-separated): a per-sample metric where fewer is better."""

    name, images, references = "word_count", "unused", "optional"
    key_metadata = {"word_count": ScoreKey("Words per caption", higher_is_better=False, coco_method="WordCount")}

    def __init__(self, *, device=None, dtype=None, batch_size=None):
        pass

    def _score(self, inputs):
        return summarize({"word_count": [len(caption.split()) for caption in inputs.predictions]})


@pytest.fixture
def word_count(monkeypatch):
    """``word_count`` in the registry for this test only (the registry as it was afterwards)."""
    scoring.scorers()  # every family registered first, into the registry restored afterwards
    monkeypatch.setattr(scoring, "_SCORERS", dict(scoring._SCORERS))
    register_scorer("word_count", factory=WordCountScorer, images="unused", references="optional",
                    help="words per caption")
    return "word_count"


def mean_words(system):
    captions = [record["caption"] for record in json.loads((EXAMPLE / f"{system}.json").read_text())]
    return float(np.mean([len(caption.split()) for caption in captions]))


def table_rows(text):
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in text.splitlines() if line.startswith("|")]


def test_a_new_metric_reaches_every_table_with_its_title_scale_and_direction(word_count, tmp_path):
    report = evaluate_captions(RESULTS, annotations=EXAMPLE / "captions_val2014.json", metrics=[word_count, "cider"],
                               baseline="baseline", resamples=50, seed=3, output=tmp_path / "report",
                               show_progress=False)
    shown = {key: {k: report["metrics"][key][k] for k in ("title", "scale", "higher_is_better")}
             for key in ("word_count", "cider")}
    assert shown == {"word_count": {"title": "Words per caption", "scale": 1.0, "higher_is_better": False},
                     "cider": {"title": "CIDEr", "scale": 100.0, "higher_is_better": True}}
    means = {system: mean_words(system) for system in SYSTEMS}
    assert {s: report["systems"][s]["scores"]["word_count"]["value"] for s in SYSTEMS} == pytest.approx(means)

    text = markdown_table(report)
    assert text.splitlines()[0].startswith("Scores: CIDEr ×100; Words per caption as computed.")
    rows = table_rows(text)
    assert rows[0] == ["System", "Words per caption", "CIDEr"]
    fewest = min(means.values())
    for row, system in zip(rows[2:], SYSTEMS):
        value = f"{means[system]:.4f}"
        assert row[1].startswith(f"**{value}**" if means[system] == fewest else value), row  # bold: the fewest
        cider = report["systems"][system]["scores"]["cider"]["value"]
        assert row[2].split(" [")[0].strip("*†‡") == f"{cider * 100:.1f}"

    latex = (tmp_path / "report" / "table.tex").read_text()
    assert "Words per caption" in latex and f"{means['model_a']:.4f}" in latex
    page = (tmp_path / "report" / "report.html").read_text()
    assert "<th>Words per caption</th>" in page and f"{means['model_b']:.4f}" in page


def test_cocoevalcap_names_a_new_metric_as_its_scorer_declares(word_count):
    annotations = json.loads((EXAMPLE / "captions_val2014.json").read_text())
    results = json.loads((EXAMPLE / "model_a.json").read_text())
    evaluator = COCOEvalCap(annotations, results, metrics=["bleu", word_count], quiet=True)
    evaluator.params["image_id"] = [record["image_id"] for record in results]
    evaluator.evaluate()
    assert set(evaluator.eval) == {"Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "WordCount"}
    assert evaluator.eval["WordCount"] == pytest.approx(mean_words("model_a"))
    assert all("WordCount" in row for row in evaluator.evalImgs)


def test_torchmetrics_clip_s_is_printed_as_computed_its_scores_being_x100_already(tiny_hub):
    """``definition="torchmetrics"`` scores 100·max(cos, 0) (reference-free only): the loaded scorer declares scale
    1, so a table does not multiply by 100 again; the paper definition keeps ×100."""
    files = sorted((EXAMPLE / "images" / "val2014").iterdir())[:3]
    truth = GroundTruth({n: EvalImage(n, file.name, ()) for n, file in enumerate(files)}, source="test")
    system = SystemCaptions("s", {n: f"a picture number {n}" for n in range(len(files))}, source="test")
    scales = {definition: score_suite(truth, [system], resolve_plan(["clip_s"], {"clip_s": {"definition": definition}},
                                                                    device="cpu"),
                                      images_root=files[0].parent, show_progress=False).metrics["clip_s"]["scale"]
              for definition in ("torchmetrics", "paper")}
    assert scales == {"torchmetrics": 1.0, "paper": 100.0}
