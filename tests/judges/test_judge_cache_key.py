"""A judge call is keyed by the image's content, not by the name of the file it came from: the same pixels
replay from a cache whether they arrive as a path, under another name or as an in-memory image (tiny random
LLaVA, real loader and scorer)."""

from PIL import Image

from capeval import load_scorer
from capeval.judges.cache import JudgeCache, inputs_key

CAPTIONS = ["a red square on a table", "a blue square"]
IMAGES = [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (30, 40), "blue")]


def test_the_same_pixels_replay_under_any_file_name_or_none(tiny_hub, tmp_path):
    paths = [tmp_path / "first.png", tmp_path / "second.png"]
    for image, path in zip(IMAGES, paths):
        image.save(path)
    cache = tmp_path / "fleur.jsonl"
    generated = load_scorer("fleur", device="cpu", max_new_tokens=8, judge_cache=cache).score(
        CAPTIONS, images=[str(p) for p in paths])
    records = list(JudgeCache(cache).records())
    assert [r["inputs"]["image"]["file"] for r in records] == ["first.png", "second.png"]  # kept for people
    assert all(r["key"] == inputs_key(r["inputs"]) for r in records)

    renamed = [tmp_path / "copy_a.png", tmp_path / "copy_b.png"]
    for image, path in zip(IMAGES, renamed):
        image.save(path)
    replayer = load_scorer("fleur", device="cpu", max_new_tokens=8, replay=cache)
    for images in ([str(p) for p in renamed], IMAGES):
        replayed = replayer.score(CAPTIONS, images=images)
        assert replayed["fleur_texts"] == generated["fleur_texts"]
