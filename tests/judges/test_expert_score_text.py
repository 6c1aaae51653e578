"""The score the explanation turn writes as the judge's answer: expert.py's ``str(score.cpu().item())`` of the
score it accumulated from ``output_dict.scores``, which transformers 4.37.2 (LLaVA's pin) gives in float32
(``LlamaForCausalLM.forward``: ``logits = logits.float()``): the softmax and the sum are float32 tensors.
Checked on the arithmetic and on the second-turn prompts the tiny judge is asked."""

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import load_scorer
from capeval.judges.expert import EXPERT_EXPLANATION_PROMPT, EXPERT_PROMPT, expert_score_text
from capeval.judges.prompts import render_llava_v1
from judge_records import official_answers


def _official_text(number, first, second):
    """expert.py's arithmetic on float32 probability tensors (rate2token in digit order)."""
    probs, probs2 = torch.tensor(first, dtype=torch.float32), None
    if second is not None:
        probs2 = torch.tensor(second, dtype=torch.float32)
    if number >= 1.0:
        score = 0.9 * probs[0] + probs[1]
    else:
        score = 0.
        for rate in range(10):
            score += probs[rate] * rate * 0.1
        if probs2 is not None:
            for rate in range(10):
                score += probs2[rate] * rate * 0.01
    return str(score.cpu().item())


def _distribution(generator):
    logits = torch.randn(10, generator=generator) * 3
    return torch.softmax(logits, dim=-1).tolist()


def test_the_explanation_turn_writes_the_score_as_the_official_float32_sum():
    generator = torch.Generator().manual_seed(0)
    for n in range(300):
        first, second = _distribution(generator), _distribution(generator)
        for number, two in ((0.7, None), (0.25, second), (0.05, second), (1.0, None)):
            outputs = {"raw_score": number, "digit_probabilities": {
                "first": {str(d): first[d] for d in range(10)},
                "second": None if two is None else {str(d): two[d] for d in range(10)}}}
            assert expert_score_text(outputs) == _official_text(number, first, two), (n, number)


def test_the_written_score_is_not_the_float16_rounding():
    first = [0.0] * 10
    first[7], first[8] = 0.6, 0.4
    outputs = {"raw_score": 0.7, "digit_probabilities": {"first": {str(d): first[d] for d in range(10)},
                                                         "second": None}}
    assert expert_score_text(outputs) == str(float(np.float32(np.float32(0.6) * np.float32(7) * np.float32(0.1)
                                                              + np.float32(0.4) * np.float32(8) * np.float32(0.1))))
    assert expert_score_text(outputs) != str(float(np.float16(0.74)))


@pytest.fixture
def capeval_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    return tmp_path / "capeval"


def test_the_tiny_judge_is_asked_the_explanation_after_the_official_score_text(tiny_hub, capeval_cache, tmp_path):
    captions = ["a dog", "two people riding a bike down a long street", "a cat sits", "red car", "a man in a field",
                "a woman with a blue umbrella walks in the rain near a shop"]
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)) for _ in captions]
    record = tmp_path / "calls.jsonl"
    scorer = load_scorer("expert", device="cpu", max_new_tokens=12, explanation=True, judge_cache=record,
                         prompt_format="llava_v1")  # the default llava_v0: test_expert_conversation.py
    asked, generate = [], scorer.judge.generate
    scorer.judge.generate = lambda prompts, *args, **kwargs: asked.append(prompts) or generate(prompts, *args, **kwargs)
    scorer.score(captions, images=images)
    second_turns = [prompt for prompts in asked[1:] for prompt in prompts]
    expected = []
    for caption, answer in official_answers(record, _official_text):
        expected.append(render_llava_v1([("user", EXPERT_PROMPT.format(caption=caption)), ("assistant", answer),
                                         ("user", EXPERT_EXPLANATION_PROMPT.format(caption=caption)),
                                         ("assistant", None)]))
    assert expected and sorted(second_turns) == sorted(expected)
