"""FLEUR's score from a judge's answer: the number it wrote, and that number smoothed over the probabilities of the
digit tokens at the number's positions (Lee et al., ACL 2024; official code ``Yebin46/FLEUR``, ``fleur.py``).

* the number: every character but digits and dots removed from the answer, leading and trailing dots stripped,
  read as a float; outside [0, 1] (or unreadable) there is no score;
* below 1: ``Σ_d d · 0.1 · p₁(d)`` over the digits ``d`` = 0..9, where ``p₁`` is the distribution of the token
  that wrote the first decimal, plus ``Σ_d d · 0.01 · p₂(d)`` when Python's ``str()`` of the number has a second
  decimal (``p₂``: the token that wrote it);
* exactly 1: ``0.9 · p(0) + p(1)`` at the token that wrote the ``1``.

The positions are found as the official code finds them: the generated tokens equal to the digit; when it occurs
more than once, the second occurrence for a first decimal 0 (the first is the integer part's 0), else the first;
for the second decimal, always the second occurrence.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple

DIGITS = tuple(range(10))


def fleur_answer_number(answer: str) -> Optional[float]:
    """The number FLEUR reads from an answer (module docstring); None when there is none in [0, 1]."""
    digits_and_dots = re.sub(r"[^\d.]", "", answer)
    number = re.sub(r"\.+$", "", re.sub(r"^\.+", "", digits_and_dots))
    try:
        value = float(number)
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None


def _occurrence(generated: Sequence[int], token: int, repeated: int) -> Optional[int]:
    """Position of ``token`` in ``generated``: its only occurrence, else occurrence number ``repeated`` (0-based);
    None when it never occurs."""
    found = [i for i, t in enumerate(generated) if t == token]
    if len(found) == 1:
        return found[0]
    return found[repeated] if len(found) > repeated else None


def fleur_digit_positions(number: float, generated: Sequence[int],
                          digit_tokens: Sequence[int]) -> Optional[Tuple[int, Optional[int]]]:
    """``(first, second)``: positions in ``generated`` (the answer's token ids) of the tokens whose distributions
    smooth ``number`` (``second`` None when ``str(number)`` has no second decimal); None when a digit is not found
    where the official code looks (it has no score then). ``digit_tokens[d]`` is the token id of digit ``d``."""
    if number >= 1.0:  # the official code needs exactly one "1" token here
        ones = [i for i, t in enumerate(generated) if t == digit_tokens[1]]
        return (ones[0], None) if len(ones) == 1 else None
    text = str(number)
    try:
        point = text.index(".")
        first_digit = int(text[point + 1])
        second_digit = int(text[point + 2]) if len(text) > 3 else None
    except ValueError:  # "1e-05": no decimal digits to find
        return None
    first = _occurrence(generated, digit_tokens[first_digit], 1 if first_digit == 0 else 0)
    if first is None:
        return None
    if second_digit is None:
        return first, None
    second = _occurrence(generated, digit_tokens[second_digit], 1)
    return None if second is None else (first, second)


def fleur_smoothed_score(number: float, first: Sequence[float], second: Optional[Sequence[float]] = None) -> float:
    """The smoothed score of ``number`` from the digit probabilities ``first[d]`` (and ``second[d]``) = the
    judge's probability of digit ``d`` at the first (second) position of :func:`fleur_digit_positions`."""
    if number >= 1.0:
        return 0.9 * float(first[0]) + float(first[1])
    score = sum(d * 0.1 * float(first[d]) for d in DIGITS)
    if second is not None:
        score += sum(d * 0.01 * float(second[d]) for d in DIGITS)
    return score
