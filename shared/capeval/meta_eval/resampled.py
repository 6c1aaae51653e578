"""The correlation statistics and pairwise accuracy of many resamples at once, from per-unit sufficient statistics.

A bootstrap resample is a vector ``c`` of unit draw counts; every row of unit ``u`` then has weight ``c[u]`` and the
statistic is the one of the materialised resample (each row repeated ``c[u]`` times), as
:mod:`capeval.functional.correlation` (scipy) computes it:

- Pearson: weighted moments, linear in ``c`` (``counts @ unit sums``).
- Kendall τ-b/τ-c: ``C − D = ½ cᵀQc`` with ``Q[u, v] = Σ_{i∈u, j∈v} sgn(x_i − x_j)·sgn(y_i − y_j)``; the pairs tied
  in x (in y) are ``½(cᵀTc − N)`` with ``T[u, v]`` = the tied row pairs; τ-c's number of classes counts the distinct
  x (and y) values of the drawn units. ``Q`` and ``T`` are built once (``units²`` floats), then every resample is
  a matrix product.
- Spearman: weighted average ranks per resample (sorted once), then weighted Pearson of the ranks.

A permutation draw is a 0/1 vector ``s`` (unit's scores swapped). The swapped metric ``(1 − s)·a + s·b`` keeps
these forms: moments stay linear, ``C − D`` and the ties become ``Σ_{p,q∈{a,b}} s_pᵀ Q_pq s_q`` with the cross
matrices between ``a`` and ``b``. Where the unit matrices would be too large (``MAX_CELLS``, ``MAX_UNITS``),
Kendall falls back to one scipy call per resample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from capeval.functional.correlation import STATISTICS

MAX_CELLS = 200_000_000  # rows × units (the work of the unit matrices) above this: one scipy call per resample
MAX_UNITS = 6_000  # units² float64 matrices (Q, T): at most 288 MB each
ROW_SLICE = 32  # resamples per row-level (Spearman) slice: bounded memory


def pearson_from_moments(n, sx, sy, sxx, syy, sxy) -> np.ndarray:
    cov = sxy - sx * sy / n
    var_x, var_y = sxx - sx * sx / n, syy - sy * sy / n
    with np.errstate(invalid="ignore", divide="ignore"):
        return cov / np.sqrt(var_x * var_y)


def _levels(values: np.ndarray):
    distinct, codes = np.unique(values, return_inverse=True)
    return codes.ravel(), len(distinct)


def _csr(codes: np.ndarray, n_units: int, columns: np.ndarray, n_columns: int):
    from scipy import sparse

    return sparse.csr_matrix((np.ones(len(codes)), (codes, columns)), shape=(n_units, n_columns))


def _blocks(sorted_values: np.ndarray, size: int) -> np.ndarray:
    """Cut points of the sorted values into blocks of about ``size`` that never split a run of equal values; a run
    longer than ``size`` is a block of its own (its pairs are all tied: nothing to count inside it)."""
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    lengths = np.diff(np.r_[starts, len(sorted_values)])
    cuts, last = [0], 0
    for start, length, previous in zip(starts[1:], lengths[1:], lengths[:-1]):
        if start - last >= size or length > size or previous > size:
            cuts.append(start)
            last = start
    return np.array(cuts + [len(sorted_values)])


def pair_matrices(xq: np.ndarray, xr: np.ndarray, y_codes: np.ndarray, n_levels: int, codes: np.ndarray,
                  n_units: int, *, block: int = 512):
    """``Q[u, v] = Σ_{i∈u, j∈v} sgn(xq_i − xr_j)·sgn(y_i − y_j)`` and ``T[u, v] = Σ_{i∈u, j∈v} [xq_i = xr_j]``.

    The query and reference rows are merged in value order and cut into blocks (:func:`_blocks`). Pairs in
    different blocks have a known x order, so they add ``Σ_β Nq_β·S·(R_<β − R_>β)ᵀ`` (per-block unit × level counts,
    ``S[l, m] = sgn(l − m)``: one matrix product); pairs inside a block are compared directly."""
    n, k = len(xq), n_levels
    values = np.concatenate([xq, xr])
    order = np.argsort(values, kind="stable")
    sorted_values, query = values[order], order < n
    row = np.where(query, order, order - n)
    unit, level = codes[row], y_codes[row]
    cuts = _blocks(sorted_values, block)
    n_blocks = len(cuts) - 1
    block_of = np.repeat(np.arange(n_blocks), np.diff(cuts))
    cell = (block_of * n_units + unit) * k + level
    counts_q = np.bincount(cell[query], minlength=n_blocks * n_units * k).reshape(n_blocks, n_units, k)
    counts_r = np.bincount(cell[~query], minlength=n_blocks * n_units * k).reshape(n_blocks, n_units, k)
    earlier = np.cumsum(counts_r, axis=0) - counts_r
    balance = earlier - (counts_r.sum(0)[None] - earlier - counts_r)  # references below minus above each block
    level_sign = np.sign(np.arange(k)[:, None] - np.arange(k)[None, :]).astype(float)
    left = (counts_q @ level_sign).transpose(1, 0, 2).reshape(n_units, -1)
    signs = left @ balance.transpose(1, 0, 2).reshape(n_units, -1).T.astype(float)
    keys, weights = [], []
    for b in range(n_blocks):
        lo, hi = cuts[b], cuts[b + 1]
        if sorted_values[lo] == sorted_values[hi - 1]:
            continue  # one run of equal values: every pair tied in x
        q = np.flatnonzero(query[lo:hi]) + lo
        r = np.flatnonzero(~query[lo:hi]) + lo
        sign = (np.sign(sorted_values[q][:, None] - sorted_values[r][None, :])
                * np.sign(level[q][:, None] - level[r][None, :]))
        keys.append((unit[q][:, None] * n_units + unit[r][None, :]).ravel())
        weights.append(sign.ravel())
    if keys:
        signs += np.bincount(np.concatenate(keys), weights=np.concatenate(weights),
                             minlength=n_units * n_units).reshape(n_units, n_units)
    distinct, value_codes = np.unique(values, return_inverse=True)
    value_codes = value_codes.ravel()
    presence_q = _csr(codes, n_units, value_codes[:n], len(distinct))
    presence_r = _csr(codes, n_units, value_codes[n:], len(distinct))
    ties = (presence_q @ presence_r.T).toarray()
    return signs, ties


def _quadratic(left: np.ndarray, matrix: np.ndarray, right: np.ndarray) -> np.ndarray:
    return ((left @ matrix) * right).sum(axis=1)


def _tau(statistic: str, s, n_total, x_ties, y_ties, classes) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        if statistic == "kendall_tau_b":
            total = n_total * (n_total - 1) / 2
            value = s / np.sqrt(total - x_ties) / np.sqrt(total - y_ties)
        else:
            value = 2 * s / (n_total ** 2 * (classes - 1) / classes)
    return np.clip(value, -1, 1)


def weighted_ranks(x: np.ndarray, w: np.ndarray, order: Optional[np.ndarray] = None) -> np.ndarray:
    """Average ranks (1-based) of each row's values in the sample that repeats value ``j`` ``w[:, j]`` times."""
    r, n = w.shape
    x = np.broadcast_to(x, (r, n))
    order = np.argsort(x, axis=1, kind="stable") if order is None else np.broadcast_to(order, (r, n))
    xs, ws = np.take_along_axis(x, order, 1), np.take_along_axis(w, order, 1)
    new = np.ones((r, n), dtype=bool)
    new[:, 1:] = xs[:, 1:] != xs[:, :-1]
    last = np.ones((r, n), dtype=bool)
    last[:, :-1] = new[:, 1:]
    position = np.arange(n)
    first_of_group = np.maximum.accumulate(np.where(new, position, 0), axis=1)
    last_of_group = np.minimum.accumulate(np.where(last, position, n - 1)[:, ::-1], axis=1)[:, ::-1]
    cw = np.cumsum(ws, axis=1)
    before = np.take_along_axis(cw - ws, first_of_group, 1)
    upto = np.take_along_axis(cw, last_of_group, 1)
    ranks = np.empty((r, n))
    np.put_along_axis(ranks, order, before + (upto - before + 1) / 2, 1)
    return ranks


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return pearson_from_moments(w.sum(1), (w * x).sum(1), (w * y).sum(1), (w * x * x).sum(1), (w * y * y).sum(1),
                                (w * x * y).sum(1))


@dataclass
class Prepared:
    """One metric's per-unit terms for ``statistic`` (built once, used for every resample)."""

    statistic: str
    x: np.ndarray  # the metric as given (bootstrap: ranks of the raw scores)
    z: np.ndarray  # z-scored metric (PERM-BOTH swaps standardised scores; z-scoring can merge near-equal values)
    sums: Optional[np.ndarray] = None  # Pearson: units × (x, x², x·y)
    signs: Optional[np.ndarray] = None  # Kendall: Q
    ties: Optional[np.ndarray] = None  # Kendall: T
    distinct: Optional[object] = None  # Kendall τ-c: units × distinct-x presence (sparse)


class Resampler:
    """The statistic of many metrics over the same human scores and units, for blocks of bootstrap counts or
    permutation swaps (see the module docstring)."""

    def __init__(self, human, codes: np.ndarray, n_units: int, statistic: str):
        self.human, self.codes, self.n_units, self.statistic = np.asarray(human, float), codes, n_units, statistic
        self.n_rows = np.bincount(codes, minlength=n_units).astype(float)
        self.y_codes, self.n_levels = _levels(self.human)
        kendall = statistic.startswith("kendall")
        self.vectorised = not kendall or (len(codes) * n_units <= MAX_CELLS and n_units <= MAX_UNITS)
        y = self.human - self.human.mean()
        self.y_sums = np.stack([self.n_rows, *(np.bincount(codes, weights=v, minlength=n_units)
                                               for v in (y, y * y))], 1)
        if kendall and self.vectorised:
            levels = _csr(codes, n_units, self.y_codes, self.n_levels).toarray()
            self.y_levels, self.y_presence = levels, levels > 0
            self.y_tied_pairs = float((levels.sum(0) ** 2).sum())
        self._y = y

    def prepare(self, scores) -> Prepared:
        x = np.asarray(scores, dtype=float)
        z = (x - x.mean()) / x.std() if x.std() > 0 else x - x.mean()
        prepared = Prepared(self.statistic, x, z)
        if self.statistic == "pearson":
            prepared.sums = self._sums(z)
        elif self.statistic.startswith("kendall") and self.vectorised:
            prepared.signs, prepared.ties = pair_matrices(x, x, self.y_codes, self.n_levels, self.codes,
                                                          self.n_units)
            x_codes, n_distinct = _levels(x)
            prepared.distinct = _csr(self.codes, self.n_units, x_codes, n_distinct)
        return prepared

    def _standardised(self, prepared: Prepared):
        """Q and T of the z-scored metric: those of the raw one unless z-scoring merged near-equal values."""
        if len(np.unique(prepared.z)) == prepared.distinct.shape[1]:
            return prepared.signs, prepared.ties
        return pair_matrices(prepared.z, prepared.z, self.y_codes, self.n_levels, self.codes, self.n_units)

    def _sums(self, z: np.ndarray) -> np.ndarray:
        return np.stack([np.bincount(self.codes, weights=v, minlength=self.n_units)
                         for v in (z, z * z, z * self._y)], 1)

    # bootstrap -------------------------------------------------------------------------------------------------
    def bootstrap(self, prepared: Prepared, counts: np.ndarray) -> np.ndarray:
        """The statistic of each resample (rows of ``counts``: draws per unit)."""
        if self.statistic == "pearson":
            n, sy, syy = (counts @ self.y_sums).T
            sx, sxx, sxy = (counts @ prepared.sums).T
            return pearson_from_moments(n, sx, sy, sxx, syy, sxy)
        if self.statistic == "spearman":
            return self._spearman(lambda rows: prepared.x, counts[:, self.codes], fixed_order=np.argsort(
                prepared.x, kind="stable"))
        if not self.vectorised:
            return self._loop(counts, lambda rows: prepared.x[rows], weights=True)
        n_total = counts @ self.n_rows
        s = _quadratic(counts, prepared.signs, counts) / 2
        x_ties = (((prepared.distinct.T @ counts.T) ** 2).sum(0) - n_total) / 2  # cᵀ(P Pᵀ)c, P sparse
        y_ties = (((counts @ self.y_levels) ** 2).sum(1) - n_total) / 2  # cᵀ(L Lᵀ)c
        classes = None
        if self.statistic == "kendall_tau_c":
            drawn = (counts > 0).astype(float)
            classes = np.minimum((prepared.distinct.T @ drawn.T > 0).sum(0), (drawn @ self.y_presence > 0).sum(1))
        return _tau(self.statistic, s, n_total, x_ties, y_ties, classes)

    # permutation -----------------------------------------------------------------------------------------------
    def cross(self, a: Prepared, b: Prepared):
        """The a-vs-b terms a permutation test of the pair needs (Kendall: the cross matrices; else nothing)."""
        if self.statistic.startswith("kendall") and self.vectorised:
            return (*self._standardised(a), *self._standardised(b),
                    *pair_matrices(a.z, b.z, self.y_codes, self.n_levels, self.codes, self.n_units))
        return None

    def observed(self, a: Prepared, b: Prepared, cross) -> float:
        """The difference the permutations are compared with: that of the z-scored metrics (as ``mt-metrics-eval``;
        the raw scores' difference where z-scoring merged no values)."""
        none = np.zeros((1, self.n_units))
        return float(self.permuted(a, b, cross, none)[0] - self.permuted(a, b, cross, 1 - none)[0])

    def permuted(self, a: Prepared, b: Prepared, cross, swaps: np.ndarray) -> np.ndarray:
        """The statistic of ``(1 − s)·a + s·b`` (standardised scores) for each row ``s`` of ``swaps``."""
        keep = 1 - swaps
        if self.statistic == "pearson":
            n, sy, syy = self.y_sums.sum(0)
            sx, sxx, sxy = (keep @ a.sums + swaps @ b.sums).T
            return pearson_from_moments(n, sx, sy, sxx, syy, sxy)
        mixed = lambda rows: np.where(swaps[rows][:, self.codes] > 0, b.z, a.z)  # noqa: E731
        if self.statistic == "spearman":
            return self._spearman(mixed, np.ones((len(swaps), len(self.codes))))
        if not self.vectorised:
            return self._loop(swaps, mixed, weights=False)
        q_aa, t_aa, q_bb, t_bb, q_ab, t_ab = cross
        s = (_quadratic(keep, q_aa, keep) + 2 * _quadratic(keep, q_ab, swaps) + _quadratic(swaps, q_bb, swaps)) / 2
        ties = _quadratic(keep, t_aa, keep) + 2 * _quadratic(keep, t_ab, swaps) + _quadratic(swaps, t_bb, swaps)
        n_total = float(len(self.codes))
        x_ties = (ties - n_total) / 2
        y_ties = np.full(len(swaps), (self.y_tied_pairs - n_total) / 2)
        classes = None if self.statistic == "kendall_tau_b" else \
            np.minimum(self._distinct_mixed(mixed, len(swaps), a, b), self.n_levels)
        return _tau(self.statistic, s, n_total, x_ties, y_ties, classes)

    def _distinct_mixed(self, mixed: Callable, r: int, a: Prepared, b: Prepared) -> np.ndarray:
        """Distinct values of each swapped metric; only counted where they could be fewer than the human levels."""
        per_unit = np.minimum(self._distinct_per_unit(a.z), self._distinct_per_unit(b.z))
        if per_unit.max() >= self.n_levels:  # every swap keeps at least this many distinct values
            return np.full(r, float(self.n_levels))
        out = np.empty(r)
        for start in range(0, r, ROW_SLICE):
            values = np.sort(mixed(np.arange(start, min(r, start + ROW_SLICE))), axis=1)
            out[start:start + ROW_SLICE] = 1 + (np.diff(values, axis=1) != 0).sum(1)
        return out

    def _distinct_per_unit(self, z: np.ndarray) -> np.ndarray:
        pairs = np.unique(np.stack([self.codes.astype(float), z]), axis=1)
        return np.bincount(pairs[0].astype(int), minlength=self.n_units)

    # row-level paths ---------------------------------------------------------------------------------------------
    def _spearman(self, values: Callable, weights: np.ndarray, fixed_order=None) -> np.ndarray:
        out = np.empty(len(weights))
        y_order = np.argsort(self.human, kind="stable")
        for start in range(0, len(weights), ROW_SLICE):
            rows = np.arange(start, min(len(weights), start + ROW_SLICE))
            w = weights[rows]
            rx = weighted_ranks(values(rows), w, fixed_order)
            ry = weighted_ranks(self.human, w, y_order)
            out[rows] = _weighted_pearson(rx, ry, w)
        return out

    def _loop(self, draws: np.ndarray, values: Callable, *, weights: bool) -> np.ndarray:
        """One scipy call per resample (Kendall with too many units for the unit matrices)."""
        statistic = STATISTICS[self.statistic]
        out = np.empty(len(draws))
        for k in range(len(draws)):
            if weights:
                rows = np.repeat(np.arange(len(self.codes)), draws[k][self.codes].astype(int))
                out[k] = statistic(values(rows), self.human[rows])
            else:
                out[k] = statistic(values(np.array([k]))[0], self.human)
        return out


class AccuracyResampler:
    """Pairwise accuracy (mean over draws of the mean over categories) for blocks of unit counts or swaps.

    ``correct`` arrays are draws × pairs (1 right, 0 wrong, ½ for a tie counted as half)."""

    def __init__(self, categories, codes: np.ndarray, n_units: int):
        cat_codes, self.n_categories = _levels(np.asarray(categories, dtype=object).astype(str))
        self.codes, self.n_units = codes, n_units
        self.onehot = _csr(codes, n_units, cat_codes, self.n_categories).toarray()  # units × categories (pair counts)
        self._cat_codes = cat_codes

    def sums(self, correct: np.ndarray) -> np.ndarray:
        """units × (draws·categories) sums of correct pairs."""
        correct = np.atleast_2d(np.asarray(correct, dtype=float))
        flat = self.codes * self.n_categories + self._cat_codes
        return np.concatenate([np.bincount(flat, weights=c, minlength=self.n_units * self.n_categories)
                               .reshape(self.n_units, self.n_categories) for c in correct], 1)

    def value(self, sums: np.ndarray, weights: np.ndarray) -> np.ndarray:
        draws = sums.shape[1] // self.n_categories
        pairs = np.tile(weights @ self.onehot, draws)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.nanmean((weights @ sums) / pairs, axis=1)

    def permuted(self, sums_a: np.ndarray, sums_b: np.ndarray, swaps: np.ndarray) -> np.ndarray:
        ones = np.ones_like(swaps)
        draws = sums_a.shape[1] // self.n_categories
        pairs = np.tile(ones @ self.onehot, draws)
        return np.nanmean(((1 - swaps) @ sums_a + swaps @ sums_b) / pairs, axis=1)
