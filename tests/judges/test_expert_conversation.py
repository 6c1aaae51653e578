"""EXPERT's conversation. The released expert.py, run as its README says (``--model-path
hjkim811/EXPERT-llava-13b-lora``), infers the conversation from the model name: "EXPERT-llava-13b-lora" holds no
"llama-2", "v1" or "mpt", so ``conv_mode = "llava_v0"``, and its loop builds every conversation from
``conv_templates[conv_mode]`` (the ``--conv-mode llava_v1`` default only changes a warning). capeval's default is that
``llava_v0``; ``prompt_format="llava_v1"`` asks in ``llava_v1``. Both are checked character for character, first
turn and explanation turn, on the prompts the tiny judge is actually asked, against the two templates written here
from LLaVA's conversation.py (c121f04)."""

import numpy as np
import pytest
from PIL import Image

from capeval import InputError, load_scorer
from capeval.judges.expert import EXPERT_EXPLANATION_PROMPT
from judge_records import official_answers
from test_expert_score_text import _official_text

SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, "
          "detailed, and polite answers to the human's questions.")
# expert.py's get_scoring_prompt
SCORING = "Evaluate the caption and assign a score on a scale of 0.0 to 1.0.\n\nCaption: {}\n\nScore (0.0~1.0):"
# the tiny judge scores "on walks" (0.6), "table sits near a" (1.0) and "with a shop walks play shop field" (0) in
# llava_v0, and some of the others in llava_v1
CAPTIONS = ["on walks", "table sits near a", "with a shop walks play shop field", "a dog", "red car",
            "a man in a field", "two people riding a bike down a long street"]


def llava_v0(first_turn, answer=None, second_turn=None):
    """conv_llava_v0 (SeparatorStyle.SINGLE, roles Human/Assistant, sep "###") rendered by get_prompt: the system
    text and sep, then "Role: message" + sep per message, "Role:" for the answer to write."""
    text = SYSTEM + "###" + "Human: <image>\n" + first_turn + "###"
    if answer is None:
        return text + "Assistant:"
    return text + "Assistant: " + answer + "###" + "Human: " + second_turn + "###" + "Assistant:"


def llava_v1(first_turn, answer=None, second_turn=None):
    """conv_llava_v1 (SeparatorStyle.TWO, roles USER/ASSISTANT, sep " ", sep2 "</s>") rendered by get_prompt."""
    text = SYSTEM + " " + "USER: <image>\n" + first_turn + " "
    if answer is None:
        return text + "ASSISTANT:"
    return text + "ASSISTANT: " + answer + "</s>" + "USER: " + second_turn + " " + "ASSISTANT:"


@pytest.fixture
def capeval_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    return tmp_path / "capeval"


def _asked(options, record):
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 255, (30, 40, 3), dtype=np.uint8)) for _ in CAPTIONS]
    scorer = load_scorer("expert", device="cpu", max_new_tokens=12, explanation=True, judge_cache=record, **options)
    asked, generate = [], scorer.judge.generate
    scorer.judge.generate = lambda prompts, *args, **kwargs: asked.append(prompts) or generate(prompts, *args, **kwargs)
    result = scorer.score(CAPTIONS, images=images)
    return scorer, result, asked


@pytest.mark.parametrize("options, template", [({}, llava_v0), ({"prompt_format": "llava_v1"}, llava_v1)],
                         ids=["default-llava_v0", "llava_v1"])
def test_the_prompts_are_the_templates_character_for_character(tiny_hub, capeval_cache, tmp_path, options, template):
    record = tmp_path / "calls.jsonl"
    scorer, result, asked = _asked(options, record)
    assert sorted(asked[0]) == sorted(template(SCORING.format(c)) for c in CAPTIONS)
    expected = []
    # expert.py: conv.messages[-1][-1] = str(score.cpu().item()) + '</s>', then the conversation's separator
    for caption, answer in official_answers(record, _official_text):
        expected.append(template(SCORING.format(caption), answer, EXPERT_EXPLANATION_PROMPT.format(caption=caption)))
    second_turns = [prompt for prompts in asked[1:] for prompt in prompts]
    assert expected and sorted(second_turns) == sorted(expected)
    assert result["provenance"]["options"]["prompt_format"] == options.get("prompt_format", "llava_v0")
    assert result["provenance"]["judge"]["prompt_format"] == options.get("prompt_format", "llava_v0")


def test_the_conversation_keys_the_cache_and_the_hashcode(tiny_hub, capeval_cache, tmp_path):
    image = [Image.new("RGB", (32, 32), (200, 10, 10))]
    v0 = load_scorer("expert", device="cpu", max_new_tokens=4, judge_cache=tmp_path / "v0.jsonl")
    v1 = load_scorer("expert", device="cpu", max_new_tokens=4, prompt_format="llava_v1",
                     judge_cache=tmp_path / "v1.jsonl")
    assert v0.hashcode != v1.hashcode and v0.prompt_sha256 != v1.prompt_sha256
    v0.score(["on walks"], images=image)
    v1.score(["on walks"], images=image)
    replayed = load_scorer("expert", device="cpu", max_new_tokens=4, replay=tmp_path / "v0.jsonl").score(
        ["on walks"], images=image)
    assert replayed["expert_texts"] and replayed["provenance"]["tiny_random_weights"] is True  # tiny records
    with pytest.raises(InputError, match="sample 0: not in the replay cache"):  # llava_v1's answers are not v0's
        load_scorer("expert", device="cpu", max_new_tokens=4, replay=tmp_path / "v1.jsonl").score(
            ["on walks"], images=image)
