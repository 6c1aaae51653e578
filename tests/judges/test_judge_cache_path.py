"""Where a judge cache is written does not change what the judge computes: the hashcode ignores the path."""

from PIL import Image

from capeval import load_scorer

CAPTIONS = ["a red square on a table", "a blue square"]
IMAGES = [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (30, 40), "blue")]


def test_the_judge_cache_path_is_not_in_the_hashcode(tiny_hub, tmp_path):
    first = load_scorer("fleur", device="cpu", max_new_tokens=8, judge_cache=tmp_path / "a.jsonl")
    second = load_scorer("fleur", device="cpu", max_new_tokens=8, judge_cache=tmp_path / "b" / "c.jsonl")
    a, b = first.score(CAPTIONS, images=IMAGES), second.score(CAPTIONS, images=IMAGES)
    assert a["fleur"] == b["fleur"]
    assert a["hashcode"] == b["hashcode"]
