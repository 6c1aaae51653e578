"""The FLEUR Space shows what the judge said: its answer, the number, the smoothed score and its explanation."""

import math
import runpy
from pathlib import Path

from PIL import Image

from capeval.demo import DemoScorer, Explanation

APP = Path(__file__).resolve().parents[2] / "metrics" / "fleur" / "app.py"


def test_the_app_builds_and_its_panel_shows_the_judges_answer_and_explanation(tiny_hub):
    app = runpy.run_path(str(APP), run_name="fleur_app")  # builds the demo: loads the judge, scores the example
    assert app["demo"] is not None
    demo_scorer = DemoScorer("fleur", {"device": "cpu", "explanation": True, "max_new_tokens": 16},
                             Explanation("table", "What the judge said", app["judge_answer"]))
    scores, panel = demo_scorer.score(Image.new("RGB", (40, 30), "red"), "a red square on a table", "")
    rows = dict(panel["data"])
    direct = demo_scorer.scorer.score(["a red square on a table"], images=[Image.new("RGB", (40, 30), "red")])
    assert rows["judge's answer"] == direct["fleur_texts"][0]
    score = direct["fleur_per_sample"][0]
    assert rows["smoothed score (FLEUR)"] == score or (math.isnan(score) and math.isnan(rows["smoothed score (FLEUR)"]))
    explanation = direct["fleur_explanations"][0]
    assert rows["explanation"] == (explanation if explanation is not None else "(no score: nothing to explain)")
    assert not math.isnan(score) and isinstance(explanation, str)  # this example is scored and explained
