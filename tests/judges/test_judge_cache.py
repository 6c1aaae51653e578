"""Judge caches: every call recorded, the in-memory index bounded, and a replay that loads no model and reproduces
the scores bitwise (tiny random LLaVA, real loader and scorer)."""

import hashlib
import json
import math

import pytest
import transformers
from PIL import Image

from capeval import InputError, load_scorer
from capeval.judges.cache import JudgeCache, image_identity, inputs_key

CAPTIONS = ["a red square on a table", "a blue square", "a cat sits", "kids play"]
IMAGES = [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (30, 40), "blue"), Image.new("RGB", (36, 36), "green"),
          Image.new("RGB", (50, 20), "white")]


def _same(a, b):
    return len(a) == len(b) and all((x != x and y != y) or x == y for x, y in zip(a, b))


@pytest.fixture
def loader_calls(monkeypatch):
    """Calls of the real model loader (counted, then passed through)."""
    calls = []
    real = transformers.AutoModelForImageTextToText.from_pretrained.__func__

    def counting(cls, *args, **kwargs):
        calls.append(args[0] if args else kwargs)
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoModelForImageTextToText, "from_pretrained", classmethod(counting))
    return calls


def test_a_replay_loads_no_model_and_reproduces_the_scores_bitwise(tiny_hub, tmp_path, loader_calls):
    cache = tmp_path / "fleur.jsonl"
    generated = load_scorer("fleur", device="cpu", max_new_tokens=24, judge_cache=cache).score(CAPTIONS, images=IMAGES)
    assert len(loader_calls) == 1
    records = [json.loads(line) for line in cache.read_text().splitlines()]
    assert len(records) == len(CAPTIONS)
    for record, caption, image in zip(records, CAPTIONS, IMAGES):
        assert record["key"] == inputs_key(record["inputs"]) and record["origin"] == "generated"
        assert record["inputs"]["caption"] == caption and record["inputs"]["image"] == image_identity(image)
        assert record["inputs"]["model"].startswith("llava-hf/llava-1.5-13b-hf@5dda2880")
        assert set(record["outputs"]) == {"text", "raw_score", "score", "digit_probabilities", "explanation"}
    assert any(r["outputs"]["score"] is not None for r in records)  # the smoothing path ran
    snapshot = next(tiny_hub.glob("models--llava-hf--llava-1.5-13b-hf/snapshots/*"))
    shards = json.loads((snapshot / "model.safetensors.index.json").read_text())["weight_map"].values()
    assert generated["provenance"]["judge"]["shards_sha256"] == {  # the weights' content is in the hashcode
        name: hashlib.sha256((snapshot / name).read_bytes()).hexdigest() for name in set(shards)}

    replayer = load_scorer("fleur", device="cpu", max_new_tokens=24, replay=cache)
    replayed = replayer.score(CAPTIONS, images=IMAGES)
    assert len(loader_calls) == 1  # no model loaded for the replay
    for key in ("fleur_per_sample", "fleur_raw_per_sample"):
        assert _same(replayed[key], generated[key])
    assert replayed["fleur_texts"] == generated["fleur_texts"]
    assert replayed["fleur"] == generated["fleur"] or math.isnan(generated["fleur"])
    replay = replayed["provenance"]["replayed"]
    assert replay == {"replayed": True, "cache": str(cache), "cache_sha256": JudgeCache(cache).sha256()}
    assert "replayed" not in generated["provenance"]
    assert replayed["hashcode"] != generated["hashcode"]


def test_a_sample_missing_from_the_replay_cache_is_named(tiny_hub, tmp_path):
    cache = tmp_path / "fleur.jsonl"
    load_scorer("fleur", device="cpu", max_new_tokens=8, judge_cache=cache).score(CAPTIONS[:2], images=IMAGES[:2])
    replayer = load_scorer("fleur", device="cpu", max_new_tokens=8, replay=cache)
    with pytest.raises(InputError, match=r"sample 1: not in the replay cache .*caption 'a different caption'"):
        replayer.score([CAPTIONS[0], "a different caption"], images=IMAGES[:2])
    with pytest.raises(InputError, match=r"sample 0: not in the replay cache"):  # other settings, other records
        load_scorer("fleur", device="cpu", max_new_tokens=9, replay=cache).score(CAPTIONS[:1], images=IMAGES[:1])
    with pytest.raises(InputError, match="judge cache .* not found"):
        load_scorer("fleur", replay=tmp_path / "none.jsonl")


def test_published_records_join_by_image_file_and_caption(tiny_hub, tmp_path):
    cache = JudgeCache(tmp_path / "published.jsonl")
    image_file = tmp_path / "1056338697_4f7d7ce270.png"
    IMAGES[0].save(image_file)
    outputs = {"text": "0.5", "raw_score": 0.5, "score": 0.436767578125, "digit_probabilities": None,
               "explanation": None}
    cache.put({"judge": "fleur", "model": "liuhaotian/llava-v1.5-13b", "prompt_sha256": None,
               "image": {"sha256": None, "file": "Flickr8k_Dataset/1056338697_4f7d7ce270.png"},
               "caption": "A girl smiles .", "references": None, "generation": {}}, outputs,
              "published:Yebin46/FLEUR@b9cd6c9/results/fleur_flickr8k_expert.txt", published={"line": 5})
    result = load_scorer("fleur", replay=cache.path).score(["A girl  smiles ."], images=[str(image_file)])
    assert result["fleur_per_sample"] == [0.436767578125] and result["fleur_raw_per_sample"] == [0.5]
    assert result["replay"]["models"] == ["liuhaotian/llava-v1.5-13b"]
    assert next(cache.records())["published"] == {"line": 5}


def test_the_index_is_bounded_and_the_file_keeps_every_record(tmp_path):
    cache = JudgeCache(tmp_path / "c.jsonl", max_bytes=2000)
    calls = [{"judge": "fleur", "caption": f"caption {i} " + "x" * 100} for i in range(40)]
    for i, call in enumerate(calls):
        cache.put(call, {"score": i / 40})
        assert cache._index.nbytes <= 2000
    assert len(cache._index) < 40
    assert [cache.get(call)["score"] for call in calls] == [i / 40 for i in range(40)]  # evicted ones: from the file
    cache.put(calls[39], {"score": 39 / 40})  # the same record as the indexed one: not appended
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 40
    assert JudgeCache(tmp_path / "c.jsonl").find("fleur", None, calls[3]["caption"])["outputs"] == {"score": 3 / 40}
    other = {"judge": "fleur", "caption": "not recorded"}
    found = cache.lookup([calls[5], other, calls[0]])  # one pass over the file: (by key, by join) per call
    assert [exact and exact["outputs"] for exact, _ in found] == [{"score": 5 / 40}, None, {"score": 0 / 40}]
    assert [joined and joined["outputs"] for _, joined in found] == [{"score": 5 / 40}, None, {"score": 0 / 40}]


def test_image_identity_is_the_decoded_pixels(tmp_path):
    image = Image.new("RGB", (20, 10), (10, 20, 30))
    image.save(tmp_path / "a.png")
    assert image_identity(Image.open(tmp_path / "a.png"), str(tmp_path / "a.png")) == {
        "sha256": image_identity(image)["sha256"], "file": "a.png"}
    assert image_identity(image.resize((10, 20)))["sha256"] != image_identity(image)["sha256"]
