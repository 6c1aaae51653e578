"""EXPERT's provenance names what the judge is made of: the registered base and adapter as they resolved (hub id at
commit, their files' sha256), never capeval's merged copy in the local cache."""

from PIL import Image

from capeval.core.hub import registered_weights
from capeval.core.scoring import load_scorer
from capeval.judges.expert_weights import ADAPTER_WEIGHT, BASE_WEIGHT


def test_the_weights_in_the_provenance_are_the_base_and_the_adapter(tiny_hub, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    scorer = load_scorer("expert", device="cpu", max_new_tokens=4)
    result = scorer.score(["a red square"], [Image.new("RGB", (32, 32), (200, 10, 10))])
    weights = result["provenance"]["weights"]
    expected = {registered_weights()[name].repo_id for name in (BASE_WEIGHT, ADAPTER_WEIGHT)}
    assert {entry["source"].split("@")[0] for entry in weights} == expected, weights
    assert all(entry["sha256"] and entry["tiny_random_weights"] for entry in weights)
    assert not any("local:" in str(entry) for entry in weights)
