"""The seeded draws over units: whole units drawn, the same draws for a seed, every swap pattern enumerated once."""

import itertools

import numpy as np
import pytest

from capeval.core.errors import InputError
from capeval.statistics.resampling import bootstrap_counts, sign_patterns, swap_masks, unit_codes


def test_units_are_drawn_whole_and_draws_are_seeded():
    counts = np.concatenate(list(bootstrap_counts(7, 600, seed=4)))
    assert counts.shape == (600, 7) and (counts.sum(1) == 7).all()
    again = np.concatenate(list(bootstrap_counts(7, 600, seed=4)))
    assert np.array_equal(counts, again)
    swaps = np.concatenate(list(swap_masks(7, 600, seed=4)))
    assert set(np.unique(swaps)) == {0.0, 1.0} and abs(swaps.mean() - 0.5) < 0.05
    codes, n = unit_codes(["b", "a", "b", "c"], 4)
    assert n == 3 and codes.tolist() == [0, 1, 0, 2]
    with pytest.raises(InputError, match="units: 3 entries for 4 rows"):
        unit_codes(["a", "b", "c"], 4)


def test_sign_patterns_list_every_swap_pattern_up_to_exchanging_the_two_systems():
    rows = np.concatenate(list(sign_patterns(5, chunk=3)))
    assert rows.shape == (16, 5) and (rows[:, 0] == 0).all()
    patterns = {tuple(row) for row in rows.astype(int)}
    every = set(itertools.product((0, 1), repeat=5))
    assert len(patterns) == 16 and patterns | {tuple(1 - x for x in p) for p in patterns} == every
