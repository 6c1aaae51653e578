"""ROUGE-L (Lin 2004) as pycocoevalcap 1.2 computes it, bit for bit: texts split on single spaces (``split(" ")``,
so an empty text is one empty token), the longest common subsequence (LCS) of the candidate with each reference,
the largest precision and the largest recall over the references, and their F-measure with beta 1.2.

The LCS lengths are integers, computed for all (candidate, reference) pairs at once by the bit-parallel algorithm of
Allison & Dix (1986) in the form of Hyyrö (2004): one 64-bit word per pair holds the reference's positions, updated
once per candidate token (a reference of more than 64 tokens runs the same algorithm on a Python integer). The
F-measure is computed elementwise in pycocoevalcap's order."""

from __future__ import annotations

from itertools import repeat
from typing import Dict, List, Sequence

import numpy as np

from capeval.text.ngrams import sorted_search, space_split, stable_argsort

ROUGE_BETA = 1.2
_WORD_BITS = 64
_ALL_BITS = np.uint64(2 ** 64 - 1)
_POPCOUNT16 = sum((np.arange(1 << 16) >> bit) & 1 for bit in range(16))


def _starts(lengths: np.ndarray) -> np.ndarray:
    return np.cumsum(lengths) - lengths


class RougeReferences:
    """ROUGE-L's reference side, computed once for every system: the references' tokens and, per (reference,
    token), the bit mask of its positions in that reference (``references``: one list per image)."""

    def __init__(self, references: Sequence[Sequence[str]]):
        self.refs_per_image = np.array([len(refs) for refs in references], dtype=np.int64)
        if len(self.refs_per_image) and self.refs_per_image.min() < 1:
            raise ValueError("every image needs at least one reference")
        self.images = len(references)
        self.ref_image = np.repeat(np.arange(self.images, dtype=np.int64), self.refs_per_image)
        tokens, self.lengths = space_split([ref for refs in references for ref in refs])
        self.word_ids: Dict[str, int] = {word: i for i, word in enumerate(dict.fromkeys(tokens))}
        self.ids = np.fromiter(map(self.word_ids.__getitem__, tokens), dtype=np.int64, count=len(tokens))
        self.starts = _starts(self.lengths)
        # masks of the references of at most 64 tokens, keyed by reference * vocabulary + word
        self.short = np.flatnonzero(self.lengths <= _WORD_BITS)
        lengths = self.lengths[self.short]
        position = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(_starts(lengths), lengths)
        keys = (np.repeat(self.short, lengths) * len(self.word_ids)
                + self.ids[np.repeat(self.starts[self.short], lengths) + position])
        by_key = stable_argsort(keys)
        keys, bits = keys[by_key], np.left_shift(np.uint64(1), position[by_key].astype(np.uint64))
        first = np.flatnonzero(np.append(True, keys[1:] != keys[:-1])) if len(keys) else np.zeros(0, np.int64)
        self.mask_keys = keys[first]
        self.masks = np.append(np.bitwise_or.reduceat(bits, first) if len(first) else bits, np.uint64(0))

    def lcs_lengths(self, candidates: Sequence[str]):
        """The LCS length of ``candidates[i]`` with each of image i's references, flattened image by image, and the
        candidates' token counts."""
        if len(candidates) != self.images:
            raise ValueError(f"{len(candidates)} candidates for {self.images} reference sets")
        tokens, cand_len = space_split(candidates)
        # a token no reference has matches nothing: id -1
        cand_ids = np.fromiter(map(self.word_ids.get, tokens, repeat(-1)), dtype=np.int64, count=len(tokens))
        cand_start = _starts(cand_len)
        lcs = np.zeros(len(self.ref_image), dtype=np.int64)
        lcs[self.short] = self._short_lcs(cand_ids, cand_start, cand_len)
        for ref in np.flatnonzero(self.lengths > _WORD_BITS).tolist():
            image = self.ref_image[ref]
            lcs[ref] = _lcs_length_big(cand_ids[cand_start[image]:cand_start[image] + cand_len[image]].tolist(),
                                       self.ids[self.starts[ref]:self.starts[ref] + self.lengths[ref]].tolist())
        return lcs, cand_len

    def _short_lcs(self, cand_ids: np.ndarray, cand_start: np.ndarray, cand_len: np.ndarray) -> np.ndarray:
        """LCS lengths of the references of at most 64 tokens: all pairs advanced together, one candidate token a
        step; with the pairs sorted by decreasing candidate length, the pairs still reading at a step are a prefix."""
        pairs = self.short
        image = self.ref_image[pairs]
        by_length = np.argsort(-cand_len[image], kind="stable")
        reading = np.bincount(cand_len[image], minlength=1)[::-1].cumsum()[::-1][1:]  # pairs reading at step j
        # every (step, pair) match mask, step-major: the step's pairs are the first reading[step] of by_length
        step = np.repeat(np.arange(len(reading), dtype=np.int64), reading)
        pair = by_length[np.arange(len(step), dtype=np.int64) - np.repeat(_starts(reading), reading)]
        word = cand_ids[cand_start[image[pair]] + step]
        query = np.where(word >= 0, pairs[pair] * len(self.word_ids) + word, -1)
        at = sorted_search(self.mask_keys, query)
        match = self.masks[np.where(np.append(self.mask_keys, -2)[at] == query, at, -1)]
        state = np.full(len(pairs), _ALL_BITS, dtype=np.uint64)
        offset = 0
        for count in reading.tolist():
            v, m = state[:count], match[offset:offset + count]
            u = v & m
            state[:count] = (v + u) | (v & ~u)
            offset += count
        lengths = self.lengths[pairs][by_length]
        low = np.where(lengths >= _WORD_BITS, _ALL_BITS,
                       np.left_shift(np.uint64(1), lengths.astype(np.uint64) % np.uint64(_WORD_BITS)) - np.uint64(1))
        out = np.empty(len(pairs), dtype=np.int64)
        out[by_length] = lengths - _POPCOUNT16[(state & low).view(np.uint16)].reshape(-1, 4).sum(axis=1)
        return out

    def scores(self, candidates: Sequence[str]) -> np.ndarray:
        """Per-image ROUGE-L, equal to pycocoevalcap's ``Rouge().calc_score([candidate], refs)``; the corpus value
        is their mean (``np.mean``, as pycocoevalcap)."""
        lcs, cand_len = self.lcs_lengths(candidates)
        lcs = lcs.astype(np.float64)
        first = _starts(self.refs_per_image)
        precision = np.maximum.reduceat(lcs / cand_len[self.ref_image].astype(np.float64), first) if len(lcs) else lcs
        recall = np.maximum.reduceat(lcs / self.lengths.astype(np.float64), first) if len(lcs) else lcs
        beta_squared = ROUGE_BETA ** 2
        both = (precision != 0) & (recall != 0)
        p, r = precision[both], recall[both]
        score = np.zeros(self.images, dtype=np.float64)
        score[both] = ((1 + beta_squared) * p * r) / (r + beta_squared * p)
        return score


def _lcs_length_big(candidate: List[int], reference: List[int]) -> int:
    """The same algorithm on one pair, the reference's positions in a Python integer (any length)."""
    masks: Dict[int, int] = {}
    for position, word in enumerate(reference):
        masks[word] = masks.get(word, 0) | (1 << position)
    full = (1 << len(reference)) - 1
    state = full
    for word in candidate:
        u = state & masks.get(word, 0)
        state = ((state + u) | (state - u)) & full
    return len(reference) - bin(state).count("1")
