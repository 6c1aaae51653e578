"""Seeded paired resampling over units, vectorised in numpy, and what every resampled test shares: the percentile
interval, the count of undefined resamples, the refusal of too few units.

A *unit* is a group of rows that are resampled (bootstrap) or swapped between the two compared columns
(permutation: two systems, or two metrics) together: an image, an item's rater rows, or single rows. Every draw is
a row of a ``resamples × units`` matrix from ``numpy.random.default_rng(seed)``, generated in fixed-size chunks, so
a seed gives the same draws whatever the caller does with them:

- bootstrap: ``counts[r, u]`` = how often unit ``u`` is drawn in resample ``r`` (``rng.integers(0, U, (chunk, U))``);
- permutation: ``swaps[r, u]`` = whether unit ``u``'s two scores trade places
  (``rng.integers(0, 2, (chunk, U))``);
- exact permutation: :func:`sign_patterns` lists every swap pattern instead of drawing them (no seed).
"""

from __future__ import annotations

from typing import Hashable, Iterator, Optional, Sequence, Tuple

import numpy as np

from capeval.core.errors import InputError
from capeval.functional.correlation import resampled_interval, warn_undefined

CHUNK = 256  # resamples per generated block (the draws do not depend on how a caller consumes them)
MIN_UNITS = 2  # fewer: every bootstrap resample is the sample itself and no swap changes anything


def unit_codes(units: Optional[Sequence[Hashable]], n: int) -> Tuple[np.ndarray, int]:
    """Dense unit index per row (first-seen order) and the number of units; ``None``: every row its own unit."""
    if units is None:
        return np.arange(n), n
    if len(units) != n:
        raise InputError(f"units: {len(units)} entries for {n} rows (one unit label per row)")
    index = {u: i for i, u in enumerate(dict.fromkeys(units))}
    return np.fromiter((index[u] for u in units), dtype=np.int64, count=n), len(index)


def _progress(total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="resample", disable=total < 2 * CHUNK, leave=False)


def bootstrap_counts(n_units: int, resamples: int, seed: int, *, desc: str = "bootstrap") -> Iterator[np.ndarray]:
    """Blocks of ``chunk × n_units`` draw counts (each row sums to ``n_units``: units drawn with replacement)."""
    rng = np.random.default_rng(seed)
    with _progress(resamples, desc) as bar:
        for start in range(0, resamples, CHUNK):
            size = min(CHUNK, resamples - start)
            draws = rng.integers(0, n_units, (size, n_units))
            flat = (draws + n_units * np.arange(size)[:, None]).ravel()
            yield np.bincount(flat, minlength=size * n_units).reshape(size, n_units).astype(float)
            bar.update(size)


def swap_masks(n_units: int, resamples: int, seed: int, *, desc: str = "permutation") -> Iterator[np.ndarray]:
    """Blocks of ``chunk × n_units`` 0/1 floats: 1 where the unit's two scores are swapped."""
    rng = np.random.default_rng(seed)
    with _progress(resamples, desc) as bar:
        for start in range(0, resamples, CHUNK):
            size = min(CHUNK, resamples - start)
            yield rng.integers(0, 2, (size, n_units)).astype(float)
            bar.update(size)


def sign_patterns(n_units: int, *, chunk: int = 4096) -> Iterator[np.ndarray]:
    """Every swap pattern of ``n_units`` units that leaves unit 0 in place, in blocks of 0/1 float rows (pattern
    ``p`` swaps unit ``u`` when bit ``u - 1`` of ``p`` is set): ``2 ** (n_units - 1)`` rows in all. Swapping the
    complementary set instead only exchanges the two systems, so these rows give every ``|δ*|`` of the full
    ``2 ** n_units`` enumeration, each once."""
    if n_units < 1:
        return
    total = 1 << (n_units - 1)
    bits = 1 << np.arange(n_units - 1, dtype=np.int64)
    for start in range(0, total, chunk):
        codes = np.arange(start, min(total, start + chunk), dtype=np.int64)
        rows = np.zeros((len(codes), n_units))
        rows[:, 1:] = (codes[:, None] & bits) != 0
        yield rows


def too_few_units(n_units: int, what: str) -> Optional[str]:
    """Why resampling ``n_units`` units says nothing (with a warning), else None."""
    if n_units >= MIN_UNITS:
        return None
    reason = f"{n_units} unit(s): resampling needs at least {MIN_UNITS} (every resample would be the sample itself)"
    warn_undefined(what, reason, stacklevel=4)
    return reason


def percentile_interval(values: np.ndarray, confidence: float, what: str = "the difference"):
    """Percentile interval over the resamples where the statistic is defined (the others counted in a warning)."""
    return resampled_interval(values, confidence, what)


def undefined_resamples(values: np.ndarray) -> int:
    return int(np.isnan(values).sum())


def warn_undefined_resamples(values: np.ndarray, what: str) -> None:
    count = undefined_resamples(values)
    if count:
        warn_undefined(f"{what} in {count} of {len(values)} resamples", "a resample with a constant column "
                       "(left out of the p-value)", stacklevel=4)
