"""Batched judge generation (left padding, attention masks) gives each sample what it gets alone: the same greedy
answer and digit probabilities, on the tiny random LLaVA, through the real loader and scorer."""

import json
import math

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import load_scorer
from capeval.judges.generation import JudgeModel, pad_to_square
from capeval.judges.prompts import FLEUR_PROMPT, render_llava_v1

CAPTIONS = ["a dog", "two people riding a bike down a long street", "a cat sits", "red car", "a man in a field",
            "a woman with a blue umbrella walks in the rain near a shop", "grass", "a ball on the white table",
            "kids play", "a black and white photo of a tall building", "sun", "a bird on a wire", "boats at sea",
            "an empty road at night with lights", "a plate of food", "one", "a red square on a table"]


def _images(n):
    rng = np.random.default_rng(0)
    sizes = [(40, 30), (30, 40), (36, 36), (50, 20)]
    return [Image.fromarray(rng.integers(0, 255, (sizes[i % 4][1], sizes[i % 4][0], 3), dtype=np.uint8))
            for i in range(n)]


def test_a_batch_of_16_generates_what_each_prompt_generates_alone(tiny_hub):
    judge = JudgeModel("llava-1.5-13b-hf", device="cpu")
    images = [pad_to_square(image, judge.image_mean) for image in _images(16)]
    prompts = [render_llava_v1([("user", FLEUR_PROMPT.format(caption=c)), ("assistant", None)])
               for c in CAPTIONS[:16]]
    batched = judge.generate(prompts, images, max_new_tokens=24)
    assert len({len(judge.tokenizer(p)["input_ids"]) for p in prompts}) > 1  # padding is exercised
    assert len({g.text for g in batched}) > 1  # answers depend on the input
    for prompt, image, together in zip(prompts, images, batched):
        alone = judge.generate([prompt], [image], max_new_tokens=24)[0]
        assert alone.token_ids == together.token_ids and alone.text == together.text
        assert alone.ended == together.ended
        assert torch.allclose(alone.digit_probabilities, together.digit_probabilities, atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", ["fleur", "ref_fleur"])
def test_scores_at_batch_size_1_and_16_are_equal(name, tiny_hub, tmp_path):
    images = _images(len(CAPTIONS))
    references = [[f"reference {i}"] for i in range(len(CAPTIONS))] if name == "ref_fleur" else None
    results, caches = {}, {}
    for batch_size in (1, 16):
        caches[batch_size] = tmp_path / f"{batch_size}.jsonl"
        scorer = load_scorer(name, device="cpu", batch_size=batch_size, max_new_tokens=24,
                             judge_cache=caches[batch_size])
        results[batch_size] = scorer.score(CAPTIONS, images=images, references=references)
    one, sixteen = results[1], results[16]
    assert one[f"{name}_texts"] == sixteen[f"{name}_texts"]
    for key in (f"{name}_per_sample", f"{name}_raw_per_sample"):
        for a, b in zip(one[key], sixteen[key]):
            assert (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-4
    assert any(not math.isnan(v) for v in one[f"{name}_per_sample"])  # the smoothing is compared, not only texts
    records = {b: [json.loads(line) for line in caches[b].read_text().splitlines()] for b in caches}
    assert [r["key"] for r in records[1]] == [r["key"] for r in records[16]]
    for a, b in zip(records[1], records[16]):
        if a["outputs"]["digit_probabilities"] is not None:
            for place in ("first", "second"):
                if a["outputs"]["digit_probabilities"][place] is not None:
                    assert a["outputs"]["digit_probabilities"][place] == pytest.approx(
                        b["outputs"]["digit_probabilities"][place], abs=1e-4)
