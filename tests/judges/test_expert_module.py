"""The EXPERT evaluate module and Space: the module computes what the registered scorer computes; the Space's panel
shows the judge's answer, the number, the smoothed score and the three criteria of its explanation."""

import math
import runpy
from pathlib import Path

import evaluate
import numpy as np
import pytest
from PIL import Image

from capeval import load_scorer
from capeval.demo import DemoScorer, Explanation

METRICS = Path(__file__).resolve().parents[2] / "metrics" / "expert"
CAPTIONS = ["on walks", "two people riding a bike down a long street", "a cat sits"]  # the first: scored by
# the tiny judge in llava_v0


@pytest.fixture(autouse=True)
def capeval_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))


def _images():
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)) for _ in CAPTIONS]


def test_the_module_from_the_checkout_computes_what_the_scorer_computes(tiny_hub):
    module = evaluate.load(str(METRICS / "expert.py"), device="cpu", max_new_tokens=16)
    result = module.compute(predictions=CAPTIONS, images=_images())
    direct = load_scorer("expert", device="cpu", max_new_tokens=16).score(CAPTIONS, images=_images())
    assert result["expert_texts"] == direct["expert_texts"]
    assert np.array_equal(np.array(result["expert_per_sample"]), np.array(direct["expert_per_sample"]),
                          equal_nan=True)
    assert result["hashcode"] == direct["hashcode"]


def test_the_app_builds_and_its_panel_shows_the_answer_and_the_criteria(tiny_hub):
    app = runpy.run_path(str(METRICS / "app.py"), run_name="expert_app")  # builds the demo, scores the example
    assert app["demo"] is not None
    demo_scorer = DemoScorer("expert", {"device": "cpu", "explanation": True, "max_new_tokens": 16},
                             Explanation("table", "What the judge said", app["judge_answer"]))
    image, caption = _images()[0], CAPTIONS[0]
    scores, panel = demo_scorer.score(image, caption, "")
    rows = dict(panel["data"])
    direct = demo_scorer.scorer.score([caption], images=[image])
    assert rows["judge's answer"] == direct["expert_texts"][0]
    score = direct["expert_per_sample"][0]
    assert rows["smoothed score (EXPERT)"] == score
    explanation = direct["expert_explanations"][0]
    assert not math.isnan(score) and isinstance(explanation, str)  # this example is scored and explained
    assert rows["explanation"] == explanation
    criteria = direct["expert_criteria"][0] or {}
    assert [rows[c] for c in ("fluency", "relevance", "descriptiveness")] == [
        criteria.get(c, "") for c in ("fluency", "relevance", "descriptiveness")]
