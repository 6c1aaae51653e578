"""FLEUR's reading and smoothing of a judge's answer (capeval.functional.fleur) against an independent transcription
of the official fleur.py loop (torch, as it runs there) on made-up answers and digit distributions."""

import re

import pytest
import torch

from capeval.functional.fleur import fleur_answer_number, fleur_digit_positions, fleur_smoothed_score

DIGIT_IDS = [40 + d for d in range(10)]  # made-up token ids of "0".."9"
DOT, END, WORD = 60, 2, 70
RATE2TOKEN = dict(enumerate(DIGIT_IDS))


def _tokens(answer: str):
    return [RATE2TOKEN[int(c)] if c.isdigit() else DOT if c == "." else WORD for c in answer]


def official_score(decoded: str, output_ids: torch.Tensor, scores):
    """fleur.py's scoring block (score_check, the duplicated-digit rule, the smoothing); None where it fails."""
    try:
        dotsnumbersdots = re.sub(r"[^\d\.]", "", decoded[:-4])
        numbersdots = re.sub(r"^\.+", "", dotsnumbersdots)
        numbers = re.sub(r"\.+$", "", numbersdots)
        score_check = float(numbers)
        if 0 > score_check or 1 < score_check:
            return None
        if score_check < 1.0:
            find_num = int(str(score_check)[str(score_check).index(".") + 1])
            index = (output_ids == RATE2TOKEN[find_num]).nonzero().squeeze()
            if len(index.shape) > 0:
                index = index[1] if find_num == 0 else index[0]
            probs = torch.nn.functional.softmax(scores[index], dim=-1)[0]
            score = 0.0
            for rate, token in RATE2TOKEN.items():
                score += probs[token] * rate * 0.1
            if len(str(score_check)) > 3:
                find_num2 = int(str(score_check)[str(score_check).index(".") + 2])
                index2 = (output_ids == RATE2TOKEN[find_num2]).nonzero().squeeze()
                if len(index2.shape) > 0:
                    index2 = index2[1]
                probs2 = torch.nn.functional.softmax(scores[index2], dim=-1)[0]
                for rate, token in RATE2TOKEN.items():
                    score += probs2[token] * rate * 0.01
        else:
            index = (output_ids == RATE2TOKEN[1]).nonzero().squeeze()
            probs = torch.nn.functional.softmax(scores[index], dim=-1)[0]
            score = 0.9 * probs[RATE2TOKEN[0]] + probs[RATE2TOKEN[1]]
        return float(score)
    except Exception:  # the official loop prints "Error!" and has no score for the sample
        return None


ANSWERS = ["0.85", "0.0", "0.00", "0.05", "0.55", "0.33", "0.6", "0.60", "1.0", "1", "0.805", "0.855", "0.1",
           "Score: 0.7", "0.75 out of 1", "0", "1.5", "0.5.5", ".", "abc", "1.01", "0.0001", "0.00001", "0.999"]


@pytest.mark.parametrize("answer", ANSWERS)
def test_number_positions_and_smoothing_equal_the_official_loop(answer):
    generator = torch.Generator().manual_seed(len(answer) * 7 + sum(map(ord, answer)))
    ids = _tokens(answer)
    logits = torch.randn(len(ids) + 1, 1, 80, generator=generator, dtype=torch.float64) * 3
    expected = official_score(answer + "</s>", torch.tensor(ids + [END]), logits)
    number = fleur_answer_number(answer)
    positions = None if number is None else fleur_digit_positions(number, ids, DIGIT_IDS)
    if expected is None:
        assert positions is None
        return
    digit_probabilities = torch.softmax(logits[:, 0], dim=-1)[:, DIGIT_IDS]
    first, second = (None if p is None else digit_probabilities[p].tolist() for p in positions)
    assert fleur_smoothed_score(number, first, second) == pytest.approx(expected, abs=1e-12)


def test_the_smoothing_formula_on_made_up_probabilities():
    first = [0.05, 0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.6, 0.25, 0.0]
    second = [0.5, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0]
    assert fleur_smoothed_score(0.75, first, second) == pytest.approx(
        (0.2 + 4.2 + 2.0) * 0.1 + 2.5 * 0.01, abs=1e-15)
    assert fleur_smoothed_score(0.7, first) == pytest.approx(0.64, abs=1e-15)
    assert fleur_smoothed_score(1.0, first) == pytest.approx(0.9 * 0.05 + 0.0, abs=1e-15)


def test_positions_follow_the_official_duplicate_rules():
    ids = _tokens("0.55")
    assert fleur_digit_positions(0.55, ids, DIGIT_IDS) == (2, 3)  # first 5, then the second 5
    assert fleur_digit_positions(0.0, _tokens("0.0"), DIGIT_IDS) == (2, None)  # the 0 after the dot
    assert fleur_digit_positions(0.855, _tokens("0.855"), DIGIT_IDS) == (2, 4)  # the official quirk: 2nd "5"
    assert fleur_digit_positions(1.0, _tokens("1.1"), DIGIT_IDS) is None  # two "1"s: the official loop fails
