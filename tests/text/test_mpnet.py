"""MPNetScore: mean-pooled, normalised all-mpnet-base-v2 embeddings; cosine averaged over references."""

import numpy as np
import pytest
import torch

from capeval import InputError
from capeval.core.scoring import load_scorer


def test_mpnet_score_equals_independent_computation(tiny_hub):
    scorer = load_scorer("mpnet_score", device="cpu", batch_size=2)
    preds = ["a dog runs on grass", "two cats"]
    refs = [["a dog running", "dog on a lawn", "an animal"], ["cats sleeping"]]
    result = scorer.score(preds, references=refs)

    def embed(text):  # one sentence at a time, no padding: mean over its tokens
        ids = scorer.encoder.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = scorer.encoder.model(**ids).last_hidden_state[0].numpy().astype(np.float64)
        v = hidden.mean(0)
        return v / np.linalg.norm(v)

    expected = [np.mean([embed(p) @ embed(r) for r in rs]) for p, rs in zip(preds, refs)]
    np.testing.assert_allclose(result["mpnet_score_per_sample"], expected, atol=1e-5)
    assert result["mpnet_score"] == pytest.approx(np.mean(expected), abs=1e-6)


def test_mpnet_score_needs_references(tiny_hub):
    scorer = load_scorer("mpnet_score", device="cpu")
    with pytest.raises(InputError, match="needs references"):
        scorer.score(["a dog"])
