"""Judge caches cannot lie: every entry is bound to what it answers (its key is the sha256 of its inputs: image
content, caption, references, prompt, model id, generation), its outputs are a judge's (a finite score in [0, 1]),
a corrupt file is refused line by line, a local judge folder is named by its content, and a replay of tiny random
weights' records is marked as a live tiny run is. Real caches written by the tiny judge, the real scorer."""

import json
import shutil
import warnings

import numpy as np
import pytest
from PIL import Image

from capeval import InputError, load_scorer
from capeval.core.provenance import TinyWeightsWarning
from capeval.judges.cache import JudgeCache, inputs_key

CAPTIONS = ["a red square on a table", "a blue square"]
IMAGES = [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (30, 40), "blue")]


@pytest.fixture
def written(tiny_hub, tmp_path):
    """A FLEUR cache of two samples written by the tiny judge, and what it scored."""
    cache = tmp_path / "fleur.jsonl"
    scored = load_scorer("fleur", device="cpu", max_new_tokens=8, judge_cache=cache).score(CAPTIONS, images=IMAGES)
    assert scored["fleur_texts"][0] != scored["fleur_texts"][1]  # swapping them would show
    return cache, scored


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _one_line(error):
    message = str(error.value)
    assert "\n" not in message
    return message


def test_swapped_keys_are_refused_not_answered_with_the_other_sample(written):
    cache, _ = written
    records = _lines(cache)
    records[0]["key"], records[1]["key"] = records[1]["key"], records[0]["key"]
    _write(cache, records)
    with pytest.raises(InputError, match=rf"judge cache {cache} line 1: its key .* is not the key of its inputs"):
        load_scorer("fleur", device="cpu", max_new_tokens=8, replay=cache).score(CAPTIONS, images=IMAGES)
    with pytest.raises(InputError, match=rf"judge cache {cache} line 1: its key") as error:  # before any model
        load_scorer("fleur", device="cpu", max_new_tokens=8, judge_cache=cache)
    _one_line(error)


def test_an_entry_edited_to_answer_another_caption_is_refused(written):
    cache, _ = written
    records = _lines(cache)
    records[1]["inputs"]["caption"] = CAPTIONS[0]  # the second sample's answer moved to the first caption
    _write(cache, records)
    with pytest.raises(InputError, match=rf"judge cache {cache} line 2: its key"):
        load_scorer("fleur", device="cpu", max_new_tokens=8, replay=cache)


@pytest.mark.parametrize("edit, problem", [
    (lambda o: o.update(score="abc"), r"outputs.score is 'abc', not a finite number in \[0, 1\]"),
    (lambda o: o.update(score=7.5), r"outputs.score is 7.5, not a finite number in \[0, 1\]"),
    (lambda o: o.update(score=float("nan")), r"outputs.score is nan"),
    (lambda o: o.update(score=True), r"outputs.score is True"),
    (lambda o: o.pop("score"), r"outputs.score is missing"),
    (lambda o: o.update(raw_score=-0.5), r"outputs.raw_score is -0.5"),
    (lambda o: o.update(text=5), r"outputs.text must be a string or null"),
    (lambda o: o.update(digit_probabilities={"first": {"0": 2.0}}), r"outputs.digit_probabilities.first must map"),
], ids=["text-score", "out-of-range", "nan", "bool", "missing", "raw-score", "text", "probabilities"])
def test_bad_outputs_are_one_line_naming_file_and_line(written, edit, problem):
    cache, _ = written
    records = _lines(cache)
    edit(records[1]["outputs"])
    cache.write_text("".join(json.dumps(r, allow_nan=True) + "\n" for r in records))
    with pytest.raises(InputError, match=rf"judge cache {cache} line 2: {problem}") as error:
        load_scorer("fleur", device="cpu", max_new_tokens=8, replay=cache)
    _one_line(error)


@pytest.mark.parametrize("corrupt, problem", [
    (lambda data: data + b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary\n",
     r"line 3: not UTF-8 text \(byte 0: a binary or corrupt file\?\)"),
    (lambda data: data[:-20], r"line 2: not JSON \(.*\); the file ends inside this record \(truncated\?\)"),
    (lambda data: data + b"not json\n", r"line 3: not JSON"),
    (lambda data: data + b"[1, 2]\n", r"line 3: not a judge record \(a JSON list, not an object\)"),
    (lambda data: data + b'{"key": "k"}\n', r"line 3: not a judge record: no inputs, outputs"),
], ids=["binary", "truncated", "text", "array", "fields"])
def test_a_corrupt_file_is_one_line_naming_file_and_line(written, corrupt, problem):
    cache, _ = written
    cache.write_bytes(corrupt(cache.read_bytes()))
    for options in ({"replay": cache}, {"judge_cache": cache}):
        with pytest.raises(InputError, match=rf"judge cache {cache} {problem}") as error:
            load_scorer("fleur", device="cpu", max_new_tokens=8, **options)
        _one_line(error)


def test_a_published_record_asked_with_another_prompt_is_refused(tiny_hub, tmp_path):
    image_file = tmp_path / "1056338697_4f7d7ce270.png"
    IMAGES[0].save(image_file)
    cache = JudgeCache(tmp_path / "published.jsonl")
    inputs = {"judge": "fleur", "model": "liuhaotian/llava-v1.5-13b", "prompt_sha256": "0" * 64,
              "image": {"sha256": None, "file": "Flickr8k_Dataset/1056338697_4f7d7ce270.png"},
              "caption": "A girl smiles .", "references": None, "generation": {}}
    cache.put(inputs, {"text": "0.5", "raw_score": 0.5, "score": 0.43, "digit_probabilities": None,
                       "explanation": None}, "published:x")
    with pytest.raises(InputError, match=rf"sample 0: the replay cache .* line 1 holds its image file and caption "
                                         r"'A girl smiles \.' asked with other prompt_sha256"):
        load_scorer("fleur", replay=cache.path).score(["A girl smiles ."], images=[str(image_file)])


def _local_judge(tiny_hub, folder):
    snapshot = next(tiny_hub.glob("models--llava-hf--llava-1.5-13b-hf/snapshots/*"))
    shutil.copytree(snapshot, folder, symlinks=False)
    return folder


def test_a_local_judge_folder_is_named_by_its_content_so_new_weights_get_new_answers(tiny_hub, tmp_path):
    from capeval.testing.tiny_judges import write_tiny_llava

    folder = _local_judge(tiny_hub, tmp_path / "judge")
    cache = tmp_path / "fleur.jsonl"
    first = load_scorer("fleur", judge_model=str(folder), device="cpu", max_new_tokens=8, judge_cache=cache)
    old = first.score(CAPTIONS, images=IMAGES)
    assert first.model_id.startswith("local:") and first.model_id.endswith("+tiny-random")
    config, index = ((folder / name).read_bytes() for name in ("config.json", "model.safetensors.index.json"))
    write_tiny_llava(folder, seed=1)  # other weights, the same config and index
    assert (folder / "config.json").read_bytes() == config
    assert (folder / "model.safetensors.index.json").read_bytes() == index
    with pytest.raises(InputError, match="sample 0: not in the replay cache"):
        load_scorer("fleur", judge_model=str(folder), device="cpu", max_new_tokens=8, replay=cache).score(
            CAPTIONS, images=IMAGES)
    second = load_scorer("fleur", judge_model=str(folder), device="cpu", max_new_tokens=8, judge_cache=cache)
    new = second.score(CAPTIONS, images=IMAGES)
    assert second.model_id != first.model_id
    assert new["provenance"]["judge"]["model"] == second.model_id != old["provenance"]["judge"]["model"]
    assert len(_lines(cache)) == 4  # judged again, not answered from the old weights' records
    assert new["fleur_texts"] != old["fleur_texts"]


def test_a_changed_merged_expert_folder_is_named_by_its_content(tiny_hub, tmp_path, monkeypatch):
    from capeval.core.convert import convert
    from capeval.testing.tiny_expert import write_tiny_expert_adapter

    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    judges = {}
    for seed in (None, 3):
        adapter = tmp_path / f"adapter-{seed}"
        write_tiny_expert_adapter(adapter, **({} if seed is None else {"seed": seed}))
        judges[seed] = convert("expert-llava-hf", adapter, tmp_path / f"judge-{seed}")
    folder, cache = judges[None], tmp_path / "expert.jsonl"
    merged = load_scorer("expert", judge_model=str(folder), device="cpu", max_new_tokens=8, judge_cache=cache)
    merged.score(["on walks"], images=IMAGES[:1])
    assert merged.model_id.startswith("local:") and "+llava-hf/llava-1.5-13b-hf@" in merged.model_id
    for shard in json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values():
        shutil.copyfile(judges[3] / shard, folder / shard)  # the other adapter's weights, the record left as it was
    with pytest.raises(InputError, match="sample 0: not in the replay cache"):
        load_scorer("expert", judge_model=str(folder), device="cpu", max_new_tokens=8, replay=cache).score(
            ["on walks"], images=IMAGES[:1])
    changed = load_scorer("expert", judge_model=str(folder), device="cpu", max_new_tokens=8)
    assert changed.model_id != merged.model_id and "+" not in changed.model_id.removesuffix("+tiny-random")


def test_a_replay_of_tiny_weights_records_is_marked_as_a_live_tiny_run(written):
    cache, scored = written
    assert scored["provenance"]["tiny_random_weights"] and scored["hashcode"].endswith("|TINY-RANDOM-WEIGHTS")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        replayer = load_scorer("fleur", device="cpu", max_new_tokens=8, replay=cache)
    assert any(issubclass(w.category, TinyWeightsWarning) for w in caught)
    replayed = replayer.score(CAPTIONS, images=IMAGES)
    assert replayed["fleur_texts"] == scored["fleur_texts"]
    assert replayed["provenance"]["tiny_random_weights"] is True
    assert replayed["hashcode"].endswith("|TINY-RANDOM-WEIGHTS")
    assert all(r["key"] == inputs_key(r["inputs"]) and r["inputs"]["model"].endswith("+tiny-random")
               for r in _lines(cache))
