"""The smoothed score as the official explanation turns write it into the conversation: ``str(score.item())`` of the
score the official loop accumulates on torch tensors of the model's logits dtype (FLEUR's LLaVA: float16;
EXPERT's, transformers 4.37.2: float32).

The loop, term by term in the official order: ``score = 0.``; for each digit ``d`` = 0..9,
``score += probs[d] * d * 0.1``; then, with a second decimal, ``score += probs2[d] * d * 0.01``; for the number 1,
``score = 0.9 * probs[0] + probs[1]``. Each tensor operation computes in float32 (torch's ``opmath`` for 16-bit
tensors, the Python scalar taken as float32) and rounds its result to the tensor's dtype; the probabilities are the
stored float32 ones rounded to that dtype first."""

from __future__ import annotations

import operator
from typing import Mapping

import numpy as np

from capeval.functional.fleur import DIGITS


def official_score_text(outputs: Mapping, dtype) -> str:
    """``str()`` of the score accumulated from ``outputs`` (a judge cache's ``raw_score`` and
    ``digit_probabilities``) on tensors of ``dtype`` (``"float16"`` or ``"float32"``), as the module docstring
    says."""
    store = np.dtype(dtype).type

    def apply(op, a, b):  # one tensor operation: float32 arithmetic, the result rounded to the tensor's dtype
        return store(op(np.float32(a), np.float32(b)))

    number, probabilities = outputs["raw_score"], outputs["digit_probabilities"]
    first, second = ([store(p[str(d)]) for d in DIGITS] if p is not None else None
                     for p in (probabilities["first"], probabilities["second"]))
    if number >= 1.0:
        return str(float(apply(operator.add, apply(operator.mul, first[0], 0.9), first[1])))
    score = store(0.0)
    for weight, digits in ((0.1, first), (0.01, second or ())):
        for d, p in enumerate(digits):
            score = apply(operator.add, score, apply(operator.mul, apply(operator.mul, p, d), weight))
    return str(float(score))
