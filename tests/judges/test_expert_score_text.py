"""The score the explanation turn writes as the judge's answer: expert.py's ``str(score.cpu().item())`` of the
score it accumulated from ``output_dict.scores``, which transformers 4.37.2 (LLaVA's pin) gives in float32
(``LlamaForCausalLM.forward``: ``logits = logits.float()``): the softmax and the sum are float32 tensors."""

import numpy as np
import torch

from capeval.judges.expert import expert_score_text


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
