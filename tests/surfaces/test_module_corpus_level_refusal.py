"""An evaluate module refuses a fixed empty-caption score for a corpus-level metric before any model loads."""

from pathlib import Path

import pytest

import capeval.evaluate_module as evaluate_module
from capeval import InputError

REPO = Path(__file__).resolve().parents[2]


def test_fixed_score_for_official_cider_ensembeval_is_refused_before_loading(tiny_hub, monkeypatch):
    import evaluate

    loaded = []
    real_load_scorer = evaluate_module.load_scorer

    def spy(name, **options):
        loaded.append(name)
        return real_load_scorer(name, **options)

    monkeypatch.setattr(evaluate_module, "load_scorer", spy)
    with pytest.raises(InputError, match="ensembeval is corpus-level.*empty_caption='skip'"):
        evaluate.load(str(REPO / "metrics" / "ensembeval"), device="cpu", empty_caption=0.0)
    assert loaded == []
    evaluate.load(str(REPO / "metrics" / "ensembeval"), device="cpu", empty_caption="skip")  # the spy sees loads
    assert loaded == ["ensembeval"]
