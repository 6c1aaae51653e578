"""The Polos head scores every reference in forwards of a fixed number of rows: a score's bits do not depend on the
batch size, the order or the other samples (a matrix product over a handful of rows gives other bits than the same
rows among many), with one thread or two."""

import numpy as np
import pytest
import torch
from PIL import Image


@pytest.mark.parametrize("threads", [1, 2])
def test_polos_scores_are_bitwise_independent_of_batch_size_order_and_company(tiny_hub, threads):
    from capeval.polos.checkpoint import OFFICIAL_HIDDEN
    from capeval.polos.scorer import PolosScorer, head_from_config, load_head

    _, config = load_head("polos")  # the tiny encoders' dimensions, the official head's hidden widths
    config = dict(config, hidden=list(OFFICIAL_HIDDEN))
    torch.manual_seed(0)
    scorer = PolosScorer(None, head=head_from_config(config), config=config, device="cpu")
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (20 + i, 30, 3), dtype=np.uint8)) for i in range(13)]
    words = "a dog cat car red runs sleeps on the grass two parked outside small".split()
    preds = [" ".join(rng.choice(words, 4 + i % 5)) for i in range(13)]
    refs = [[" ".join(rng.choice(words, 3 + j)) for j in range(1 + i % 3)] for i in range(13)]

    def score(order, batch_size):
        scorer.batch_size = batch_size
        scorer.reset_caches()
        result = scorer.score([preds[i] for i in order], [images[i] for i in order], [refs[i] for i in order])
        return np.asarray(result["polos_per_sample"])[np.argsort(order)]

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        base = score(list(range(13)), 64)  # 25 references: one head forward before the fix
        np.testing.assert_array_equal(score(list(range(13)), 1), base)  # chunks of 8, 8, 8, 1 before the fix
        np.testing.assert_array_equal(score([5, 11, 0, 7, 3, 12, 9, 1, 10, 2, 8, 4, 6], 3), base)
        np.testing.assert_array_equal(score([4, 7], 64), base[[4, 7]])  # two samples alone
    finally:
        torch.set_num_threads(before)
