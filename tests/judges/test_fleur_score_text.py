"""The score FLEUR's explanation turn writes as the judge's answer: fleur_exp.py's ``str(score.item())`` of the score
its loop accumulates term by term on float16 tensors (LLaVA's float16 logits and softmax: ``score = 0.``, then
``score += probs[token] * rate * 0.1`` over the digits, ``... * 0.01`` for a second decimal, ``0.9 * probs[0] +
probs[1]`` for 1.0). Checked bit for bit against that loop on torch float16 tensors, and on the second-turn prompts
the tiny judge is asked."""

import numpy as np
import torch
from PIL import Image

from capeval import load_scorer
from capeval.judges.scorer import fleur_score_text
from judge_records import official_answers

SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, "
          "detailed, and polite answers to the human's questions.")


def _official_text(number, first, second):
    """fleur_exp.py's loop on float16 probability tensors (the stored float32 probabilities rounded to float16)."""
    probs = torch.tensor(first, dtype=torch.float32).half()
    if number >= 1.0:
        score = 0.9 * probs[0] + probs[1]
    else:
        score = 0.
        for rate in range(10):
            score += probs[rate] * rate * 0.1
        if second is not None:
            probs2 = torch.tensor(second, dtype=torch.float32).half()
            for rate in range(10):
                score += probs2[rate] * rate * 0.01
    assert score.dtype == torch.float16
    return str(score.item())


def _outputs(number, first, second):
    return {"raw_score": number, "digit_probabilities": {
        "first": {str(d): first[d] for d in range(10)},
        "second": None if second is None else {str(d): second[d] for d in range(10)}}}


def _distributions(n, seed=0):
    """n float32 distributions over the ten digits, from flat to peaked (as stored: float32 values as floats)."""
    generator = torch.Generator().manual_seed(seed)
    scales = torch.rand(n, 1, generator=generator) * 12
    return torch.softmax(torch.randn(n, 10, generator=generator) * scales, dim=-1).tolist()


def test_the_explanation_turn_writes_the_official_float16_sum_on_1200_distributions():
    firsts, seconds = _distributions(1200, seed=0), _distributions(1200, seed=1)
    cases = 0
    for first, second in zip(firsts, seconds):
        for number, two in ((0.7, None), (0.85, second), (0.05, second), (1.0, None)):
            assert fleur_score_text(_outputs(number, first, two)) == _official_text(number, first, two), (
                number, first, two)
            cases += 1
    assert cases == 4800


def test_the_float16_sum_is_not_the_float16_rounding_of_the_exact_sum():
    """What capeval wrote before: str(float16(the float64 sum)); it differs from the official loop on many answers."""
    firsts, seconds = _distributions(1000, seed=2), _distributions(1000, seed=3)
    differing = 0
    for first, second in zip(firsts, seconds):
        exact = sum(d * 0.1 * first[d] for d in range(10)) + sum(d * 0.01 * second[d] for d in range(10))
        differing += str(float(np.float16(exact))) != _official_text(0.85, first, second)
    assert differing > 100


def _llava_v1(first_turn, answer=None, second_turn=None):
    """LLaVA's conv_llava_v1 (SeparatorStyle.TWO, roles USER/ASSISTANT, sep " ", sep2 "</s>") rendered by
    get_prompt: the system text and sep, then "ROLE: message" + the separator of its position, "ROLE:" to answer."""
    text = SYSTEM + " " + "USER: <image>\n" + first_turn + " "
    if answer is None:
        return text + "ASSISTANT:"
    return text + "ASSISTANT: " + answer + "</s>" + "USER: " + second_turn + " " + "ASSISTANT:"


def test_the_tiny_judge_is_asked_why_after_the_official_score_text(tiny_hub, tmp_path):
    # captions the tiny judge answers with a readable number (one decimal, two, three, 0): each path of the loop
    captions = ["cat runs play sits play rain", "blue bike with car red woman", "green street with near",
                "rain street woman rain street", "a red square on a table", "a dog"]
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)) for _ in captions]
    record = tmp_path / "calls.jsonl"
    scorer = load_scorer("fleur", device="cpu", max_new_tokens=12, explanation=True, judge_cache=record)
    asked, generate = [], scorer.judge.generate
    scorer.judge.generate = lambda prompts, *args, **kwargs: asked.append(prompts) or generate(prompts, *args, **kwargs)
    scorer.score(captions, images=images)
    expected = []
    # fleur_exp.py: conv.messages[-1][-1] = str(score.item()) + '</s>', the conversation adds sep2
    for caption, answer in official_answers(record, _official_text):
        first_turn = ("Your task is to evaluate and rate the caption on a scale of 0.0 to 1.0 based on the given "
                      "Grading Criteria. (Print Real Number Score ONLY)\n\nGrading Criteria:\n\n0.0: The caption "
                      "does not describe the image at all.\n1.0: The caption accurately and clearly describes the "
                      f"image.\n\nCaption: {caption}\n\nScore(Choose a rating from 0.0 to 1.0):")
        expected.append(_llava_v1(first_turn, answer, "Why? Tell me the reason."))
    second_turns = [prompt for prompts in asked[1:] for prompt in prompts]
    assert len(expected) >= 4 and sorted(second_turns) == sorted(expected)
