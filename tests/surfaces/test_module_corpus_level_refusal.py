"""An evaluate module refuses a fixed empty-caption score for a corpus-level metric before any model loads."""

from pathlib import Path

import pytest

from capeval import InputError
from capeval.core.scoring import ScorerSpec

REPO = Path(__file__).resolve().parents[2]


def test_fixed_score_for_official_cider_ensembeval_is_refused_before_loading(tiny_hub, monkeypatch):
    import evaluate

    loaded = []
    real_load = ScorerSpec.load

    def spy(spec, **options):
        loaded.append(spec.name)
        return real_load(spec, **options)

    monkeypatch.setattr(ScorerSpec, "load", spy)
    with pytest.raises(InputError, match="ensembeval is corpus-level.*empty_caption='skip'"):
        evaluate.load(str(REPO / "metrics" / "ensembeval"), device="cpu", empty_caption=0.0)
    assert loaded == []
    evaluate.load(str(REPO / "metrics" / "ensembeval"), device="cpu", empty_caption="skip")  # the spy sees loads
    assert loaded[0] == "ensembeval"  # then its components, loaded by it
