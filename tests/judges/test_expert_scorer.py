"""The `expert` scorer: the official prompts (hjkim811/EXPERT, expert.py at commit
74bbef41209fce20551f2d707bc7642400d7eddf: get_scoring_prompt, get_explanation_prompt, parse_explanation) in LLaVA's
llava_v1 conversation (the option; the default llava_v0 is tested in test_expert_conversation.py); the number read
from the whole answer and smoothed as the official loop does; batch size 1 and 16 equal on the tiny random judge with
the tiny adapter merged in; replay with no model loaded."""

import math

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import load_scorer
from capeval.core.errors import InputError
from capeval.judges.expert import (EXPERT_EXPLANATION_PROMPT, EXPERT_PROMPT, expert_outputs, parse_explanation)
from capeval.judges.generation import Generation
from capeval.judges.prompts import render_llava_v1
from capeval.judges.scorer import fleur_outputs

SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, "
          "detailed, and polite answers to the human's questions.")
# expert.py's get_scoring_prompt("a dog on grass") behind "<image>\n", as conv_templates["llava_v1"].get_prompt()
# renders it (sep " ", sep2 "</s>")
OFFICIAL_SCORING = (SYSTEM + " USER: <image>\nEvaluate the caption and assign a score on a scale of 0.0 to 1.0.\n\n"
                    "Caption: a dog on grass\n\nScore (0.0~1.0): ASSISTANT:")
OFFICIAL_EXPLANATION_TURN = (
    "Provide a brief explanation for the score based on three criteria: Fluency, Relevance, and Descriptiveness.\n\n"
    "Caption: a dog on grass\n\nEvaluation Criteria:\n- Fluency: Whether the caption is fluent, natural, and "
    "grammatically correct.\n- Relevance: Whether the sentence correctly describes the visual content and be closely "
    "relevant to the image.\n- Descriptiveness: Whether the sentence is a precise, informative caption that describes "
    "important details of the image.\n\nOutput Format:\nFluency: {Provide explanation here.}\nRelevance: {Provide "
    "explanation here.}\nDescriptiveness: {Provide explanation here.}")
CAPTIONS = ["a dog", "two people riding a bike down a long street", "a cat sits", "red car", "a man in a field",
            "a woman with a blue umbrella walks in the rain near a shop", "grass", "a ball on the white table",
            "kids play", "a black and white photo of a tall building", "sun", "a bird on a wire", "boats at sea",
            "an empty road at night with lights", "a plate of food", "one", "a red square on a table",
            "on walks", "table sits near a"]  # the last two: answers the tiny judge scores in llava_v0


def test_the_prompts_are_the_official_ones_in_the_llava_v1_conversation():
    first = EXPERT_PROMPT.format(caption="a dog on grass")
    assert render_llava_v1([("user", first), ("assistant", None)]) == OFFICIAL_SCORING
    assert EXPERT_EXPLANATION_PROMPT.format(caption="a dog on grass") == OFFICIAL_EXPLANATION_TURN
    # the second turn: the score as the answer, "</s>" from the script and "</s>" from the conversation
    second = render_llava_v1([("user", first), ("assistant", "0.71875</s>"),
                              ("user", OFFICIAL_EXPLANATION_TURN), ("assistant", None)])
    assert second == OFFICIAL_SCORING + " 0.71875</s></s>USER: " + OFFICIAL_EXPLANATION_TURN + " ASSISTANT:"


def test_explanations_are_read_into_the_three_criteria_as_the_official_parser_does():
    text = "Fluency: Fluent.\nRelevance: It names the dog\nand the grass.\nDescriptiveness:  Few details. "
    assert parse_explanation(text) == {"fluency": "Fluent.", "relevance": "It names the dog\nand the grass.",
                                       "descriptiveness": "Few details."}
    assert parse_explanation("Fluency: fine. Relevance: fine. Descriptiveness: fine.") is None


def _generation(tokens, text, ended, probabilities):
    return Generation(tokens, text, ended, torch.tensor(probabilities, dtype=torch.float32))


def test_the_number_is_read_from_the_whole_answer_and_smoothed_over_its_digit_tokens():
    digits = list(range(10, 20))  # token id of digit d: 10 + d; "." is 5, "▁" is 4
    tokens = [4, 10, 5, 17, 15]  # "▁0.75", generation cut before the end token (ended=False)
    rng = np.random.default_rng(0)
    rows = rng.dirichlet(np.ones(10), size=len(tokens))
    answer = _generation(tokens, "0.75", False, rows)
    outputs = expert_outputs(answer, digits)
    # the official loop: first decimal 7 at its only occurrence (index 3), second decimal 5 at index 4
    expected = sum(d * 0.1 * rows[3][d] for d in range(10)) + sum(d * 0.01 * rows[4][d] for d in range(10))
    assert outputs["raw_score"] == 0.75 and outputs["score"] == pytest.approx(expected, abs=1e-6)
    assert fleur_outputs(answer, digits)["score"] is None  # FLEUR drops four characters ("</s>") here; EXPERT not
    assert expert_outputs(_generation([4, 11, 5], "1.", True, rows[:3]), digits)["raw_score"] == 1.0
    assert expert_outputs(_generation([4], "no", True, rows[:1]), digits)["score"] is None


def _images(n):
    rng = np.random.default_rng(0)
    sizes = [(40, 30), (30, 40), (36, 36), (50, 20)]
    return [Image.fromarray(rng.integers(0, 255, (sizes[i % 4][1], sizes[i % 4][0], 3), dtype=np.uint8))
            for i in range(n)]


@pytest.fixture
def capeval_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    return tmp_path / "capeval"


def test_scores_at_batch_size_1_and_16_are_equal_and_replay_without_a_model(tiny_hub, capeval_cache, tmp_path):
    images = _images(len(CAPTIONS))
    results, caches = {}, {}
    for batch_size in (1, 16):
        caches[batch_size] = tmp_path / f"{batch_size}.jsonl"
        scorer = load_scorer("expert", device="cpu", batch_size=batch_size, max_new_tokens=24,
                             judge_cache=caches[batch_size])
        results[batch_size] = scorer.score(CAPTIONS, images=images)
    one, sixteen = results[1], results[16]
    assert one["expert_texts"] == sixteen["expert_texts"]
    assert len(set(one["expert_texts"])) > 1
    for key in ("expert_per_sample", "expert_raw_per_sample"):
        for a, b in zip(one[key], sixteen[key]):
            assert (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-4
    assert any(not math.isnan(v) for v in one["expert_per_sample"])  # the smoothing is compared, not only texts
    model = one["provenance"]["judge"]["model"]
    assert model.startswith("hjkim811/EXPERT-llava-13b-lora@") and "+llava-hf/llava-1.5-13b-hf@5dda288" in model
    assert len(list((capeval_cache / "weights").glob("expert-llava-1.5-13b-hf-*"))) == 1  # merged once, reused

    replayed = load_scorer("expert", device="cpu", max_new_tokens=24, replay=caches[1])
    assert replayed.judge is None
    again = replayed.score(CAPTIONS, images=images)
    assert again["expert_texts"] == one["expert_texts"]
    assert np.array_equal(np.array(again["expert_per_sample"]), np.array(one["expert_per_sample"]), equal_nan=True)
    assert again["provenance"]["replayed"]["replayed"] is True


def test_the_explanation_turn_gives_text_and_criteria_for_every_scored_sample(tiny_hub, capeval_cache):
    scorer = load_scorer("expert", device="cpu", max_new_tokens=12, explanation=True)
    result = scorer.score(CAPTIONS[:6], images=_images(6))
    for score, explanation, criteria in zip(result["expert_per_sample"], result["expert_explanations"],
                                            result["expert_criteria"]):
        assert (explanation is None) == math.isnan(score)
        assert criteria is None or set(criteria) == {"fluency", "relevance", "descriptiveness"}


def test_options_are_checked_before_anything_loads(tmp_path):
    with pytest.raises(InputError, match="judge_model"):
        load_scorer("expert", judge_model=str(tmp_path / "missing"))
    with pytest.raises(InputError, match="max_new_tokens"):
        load_scorer("expert", max_new_tokens=0)
    with pytest.raises(InputError, match="prompt_format must be one of"):
        load_scorer("expert", prompt_format="chat_template")  # EXPERT's adapter is LLaVA's: llava_v0 or llava_v1


def test_a_converted_folder_judges_as_the_merge_in_the_cache_and_is_named_by_its_adapter(tiny_hub, capeval_cache,
                                                                                        tmp_path):
    from capeval.core.convert import convert
    from capeval.testing.tiny_expert import write_tiny_expert_adapter

    ids = []
    for seed in (None, 3):
        adapter = tmp_path / f"adapter-{seed}"
        write_tiny_expert_adapter(adapter, **({} if seed is None else {"seed": seed}))
        out = convert("expert-llava-hf", adapter, tmp_path / f"judge-{seed}")
        scorer = load_scorer("expert", judge_model=str(out), device="cpu", max_new_tokens=8)
        ids.append(scorer.provenance["judge"]["model"])
        if seed is None:
            converted = scorer.score(CAPTIONS[:4], images=_images(4))
    assert not (capeval_cache / "weights").exists()  # the folder is used as it is
    assert ids[0] != ids[1] and all(i.startswith("local:") for i in ids)  # the adapter's content names it
    assert all(i.endswith("+llava-hf/llava-1.5-13b-hf@5dda2880bda009266dda7c4baff660b95ca64540+tiny-random")
               for i in ids)
    cached = load_scorer("expert", device="cpu", max_new_tokens=8).score(CAPTIONS[:4], images=_images(4))
    assert converted["expert_texts"] == cached["expert_texts"]  # the registered tiny adapter is the default seed's


def test_in_float16_the_vision_tower_runs_in_float32_on_rounded_pixels_as_llavas_loader_leaves_it(tiny_hub,
                                                                                                  capeval_cache):
    from capeval.judges.generation import JudgeModel

    scorer = load_scorer("expert", device="cpu", dtype="float16", max_new_tokens=4)
    inner = scorer.judge.model.model
    assert next(inner.vision_tower.parameters()).dtype == torch.float32
    assert next(inner.language_model.parameters()).dtype == torch.float16
    seen = []
    inner.multi_modal_projector.register_forward_hook(lambda module, args, out: seen.append(args[0]))
    image = _images(1)[0]
    scorer.score(["a dog"], images=[image])
    # independently: the merged weights rounded to float16 and run in float32 on the pixels rounded to float16, the
    # CLIP tower's second-to-last hidden state without its CLS token, cast to float16 (LLaVA's CLIPVisionTower.forward)
    reference = JudgeModel(str(scorer.judge_folder), device="cpu", dtype="float32")
    prompt = render_llava_v1([("user", EXPERT_PROMPT.format(caption="a dog")), ("assistant", None)])
    from capeval.judges.generation import pad_to_square

    pixels = reference.processor(images=[pad_to_square(image, reference.image_mean)], text=[prompt],
                                 return_tensors="pt")["pixel_values"].to(torch.float16).float()
    with torch.no_grad():
        for parameter in reference.model.model.vision_tower.parameters():  # the judge's weights are 16-bit copies
            parameter.copy_(parameter.half().float())
        hidden = reference.model.model.vision_tower(pixels, output_hidden_states=True).hidden_states[-2][:, 1:]
    assert seen[0].dtype == torch.float16 and torch.equal(seen[0], hidden.to(torch.float16))
    plain = load_scorer("expert", device="cpu", dtype="float16", max_new_tokens=4, float32_vision=False)
    assert next(plain.judge.model.model.vision_tower.parameters()).dtype == torch.float16
    assert plain.hashcode != scorer.hashcode
