"""From a judge's answer to FLEUR's outputs, the official conversation string, and the explanation turn."""

import math

import pytest
import torch
from PIL import Image

from capeval import InputError, load_scorer
from capeval.judges.generation import Generation
from capeval.judges.prompts import prompt_sha256, render_llava_v1
from capeval.judges.scorer import fleur_outputs, fleur_score_text

DIGITS = [40 + d for d in range(10)]
DOT = 60


def _generation(answer, ended=True, seed=0):
    ids = [DIGITS[int(c)] if c.isdigit() else DOT if c == "." else 70 for c in answer]
    probabilities = torch.softmax(torch.randn(len(ids), 10, generator=torch.Generator().manual_seed(seed)), dim=-1)
    return Generation(ids, answer, ended, probabilities), probabilities


def test_outputs_of_a_two_decimal_answer():
    generation, p = _generation("0.85")
    outputs = fleur_outputs(generation, DIGITS)
    first, second = p[2].tolist(), p[3].tolist()
    expected = sum(d * 0.1 * first[d] for d in range(10)) + sum(d * 0.01 * second[d] for d in range(10))
    assert outputs["raw_score"] == 0.85 and outputs["score"] == pytest.approx(expected, abs=1e-12)
    assert outputs["digit_probabilities"] == {"first": {str(d): first[d] for d in range(10)},
                                              "second": {str(d): second[d] for d in range(10)}}
    assert outputs["text"] == "0.85" and outputs["explanation"] is None


def test_an_unfinished_answer_loses_its_last_four_characters_as_officially():
    generation, p = _generation("0.7 xyz", ended=False)  # official: "0.7 xyz"[:-4] = "0.7"
    outputs = fleur_outputs(generation, DIGITS)
    assert outputs["raw_score"] == 0.7
    assert outputs["score"] == pytest.approx(sum(d * 0.1 * p[2, d].item() for d in range(10)), abs=1e-12)
    unreadable = fleur_outputs(_generation("0.75", ended=False)[0], DIGITS)  # "0.75"[:-4] is empty
    assert unreadable["raw_score"] is None and unreadable["score"] is None


def test_the_llava_v1_conversation_string():
    assert render_llava_v1([("user", "Rate it."), ("assistant", None)]) == (
        "A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, "
        "detailed, and polite answers to the human's questions. USER: <image>\nRate it. ASSISTANT:")
    assert render_llava_v1([("user", "Rate it."), ("assistant", "0.5</s>"), ("user", "Why?"),
                            ("assistant", None)]).endswith("USER: <image>\nRate it. ASSISTANT: 0.5</s></s>USER: Why? "
                                                           "ASSISTANT:")
    certain_four = {"raw_score": 0.4, "digit_probabilities": {"first": {str(d): float(d == 4) for d in range(10)},
                                                              "second": None}}
    assert fleur_score_text(certain_four) == "0.39990234375"  # str() of the float16 value 4 · 0.1


def test_explanations_follow_scored_answers(tiny_hub):
    images = [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (30, 40), "blue")]
    captions = ["a red square on a table", "a blue square"]
    plain = load_scorer("fleur", device="cpu", max_new_tokens=16).score(captions, images=images)
    explained = load_scorer("fleur", device="cpu", max_new_tokens=16, explanation=True)
    result = explained.score(captions, images=images)
    assert result["fleur_per_sample"][0] == plain["fleur_per_sample"][0]  # the score is FLEUR's, explained or not
    assert any(not math.isnan(s) for s in result["fleur_per_sample"])
    for score, reason in zip(result["fleur_per_sample"], result["fleur_explanations"]):
        assert (reason is None) == math.isnan(score) and (reason is None or isinstance(reason, str))
    assert result["provenance"]["judge"]["prompt_sha256"] == prompt_sha256("fleur", explanation=True)
    assert plain["provenance"]["judge"]["prompt_sha256"] == prompt_sha256("fleur") != prompt_sha256("ref_fleur")


def test_other_judges_are_asked_through_their_chat_template(tiny_hub):
    images = [Image.new("RGB", (40, 30), "red")]
    scorer = load_scorer("fleur", device="cpu", max_new_tokens=8, prompt_format="chat_template")
    prompt = scorer._prompt([("user", "Rate it."), ("assistant", None)])
    assert prompt == scorer.judge.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Rate it."}]}],
        add_generation_prompt=True, tokenize=False)
    assert prompt.count("<image>") == 1 and "A chat between" not in prompt
    result = scorer.score(["a red square"], images=images)
    assert len(result["fleur_texts"]) == 1
    assert result["provenance"]["judge"]["prompt_sha256"] == prompt_sha256("fleur", prompt_format="chat_template")
    assert prompt_sha256("fleur", prompt_format="chat_template") != prompt_sha256("fleur")
    with pytest.raises(InputError, match="prompt_format must be one of"):
        load_scorer("fleur", device="cpu", prompt_format="vicuna")


def test_bfloat16_and_a_device_map_run_and_are_recorded(tiny_hub, tmp_path):
    image = [Image.new("RGB", (40, 30), "red")]
    half = load_scorer("fleur", device="cpu", dtype="bfloat16", max_new_tokens=8, judge_cache=tmp_path / "bf16.jsonl")
    assert half.judge.model.dtype == torch.bfloat16
    result = half.score(["a red square"], images=image)
    assert result["provenance"]["judge"]["generation"]["dtype"] == "bfloat16"
    assert '"dtype":"bfloat16"' in (tmp_path / "bf16.jsonl").read_text()
    mapped = load_scorer("fleur", device_map={"": "cpu"}, max_new_tokens=8)
    assert mapped.judge.device is None and mapped.judge.input_device.type == "cpu"
    assert len(mapped.score(["a red square"], images=image)["fleur_texts"]) == 1
