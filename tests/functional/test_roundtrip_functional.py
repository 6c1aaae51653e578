"""Round-trip similarity formulas against hand-computed values."""

import math

import pytest
import torch

from capeval.functional.roundtrip import cosine_similarity, negative_l2_distance, roundtrip_score


def test_cosine_similarity_hand_computed():
    a = torch.tensor([[1.0, 0.0], [3.0, 4.0], [1.0, 2.0]])
    b = torch.tensor([[1.0, 1.0], [6.0, 8.0], [-2.0, 1.0]])
    assert cosine_similarity(a, b).tolist() == pytest.approx([1 / math.sqrt(2), 1.0, 0.0], abs=1e-7)


def test_negative_l2_distance_hand_computed():
    a = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    b = torch.tensor([[3.0, 4.0], [1.0, 1.0]])
    assert negative_l2_distance(a, b).tolist() == pytest.approx([-5.0, 0.0])


def test_roundtrip_score_averages_over_generated_images():
    original = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    generated = torch.tensor([[[2.0, 0.0], [0.0, 1.0]],       # cos 1 and 0 -> 0.5
                              [[1.0, 1.0], [0.0, -3.0]]])     # cos 1/sqrt2 and -1
    assert roundtrip_score(original, generated).tolist() == pytest.approx([0.5, (1 / math.sqrt(2) - 1) / 2])
    # distances: |(1,0)-(2,0)| = 1, |(1,0)-(0,1)| = sqrt2; |(0,2)-(1,1)| = sqrt2, |(0,2)-(0,-3)| = 5
    expected = [-(1 + math.sqrt(2)) / 2, -(math.sqrt(2) + 5) / 2]
    assert roundtrip_score(original, generated, "negative_l2").tolist() == pytest.approx(expected)


def test_roundtrip_score_rejects_unknown_similarity_and_bad_shapes():
    with pytest.raises(ValueError, match="unknown similarity"):
        roundtrip_score(torch.ones(1, 2), torch.ones(1, 1, 2), "dot")
    with pytest.raises(ValueError, match="expected original"):
        roundtrip_score(torch.ones(2, 2), torch.ones(1, 1, 2))
