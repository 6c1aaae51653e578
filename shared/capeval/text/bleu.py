"""BLEU-1..4 (Papineni et al. 2002) as pycocoevalcap 1.2 computes it: per-image sufficient statistics
``[testlen, reflen, guess_1..4, correct_1..4]`` (whitespace-split words; clipped n-gram matches against the maximum
count in any one reference; the 'closest' reference length, the shorter one on a tie) and BLEU-n from one image's or
summed statistics with pycocoevalcap's smoothing constants and operation order.

The statistics are integer counts, computed for all images at once with numpy; the floats are computed from them
one value at a time, in pycocoevalcap's order."""

from __future__ import annotations

import math
from typing import List, Sequence

import numpy as np

from capeval.text.ngrams import CandidateNgrams, ReferenceNgrams

BLEU_ORDER = 4
BLEU_TINY, BLEU_SMALL = 1e-15, 1e-9  # pycocoevalcap's BleuScorer constants
# columns of a statistics row
TESTLEN, REFLEN, GUESS, CORRECT = 0, 1, slice(2, 2 + BLEU_ORDER), slice(2 + BLEU_ORDER, 2 + 2 * BLEU_ORDER)
_LENGTH_BASE = 1 << 32  # the closest reference length minimises |reflen - testlen| * base + reflen


class BleuReferences:
    """The references' side of BLEU, computed once for every system: each image's reference lengths and, per
    n-gram, its largest count in any one of the image's references (``references``: one list per image, or their
    :class:`ReferenceNgrams` shared with CIDEr-D)."""

    def __init__(self, references):
        self.ngrams = references if isinstance(references, ReferenceNgrams) else ReferenceNgrams(references)
        # per order, aligned with ngrams.by_code: the image's largest count of the n-gram (then a 0 for "none")
        self.max_counts = []
        for counts, (_, entry), runs in zip(self.ngrams.encoded.orders, self.ngrams.by_code, self.ngrams.runs):
            count = counts.count[entry]
            largest = np.maximum.reduceat(count, runs[:-1]) if len(count) else count
            self.max_counts.append(np.append(np.repeat(largest, np.diff(runs)), 0))

    def statistics(self, candidates) -> np.ndarray:
        """``(images, 10)`` int64: each image's ``[testlen, closest reflen, guess_1..4, correct_1..4]``, equal to
        pycocoevalcap's ``cook_test(candidate, cook_refs(refs), eff="closest")`` (``candidates``: one per image,
        or already encoded by ``ngrams``)."""
        ngrams = self.ngrams
        candidates = candidates if isinstance(candidates, CandidateNgrams) else ngrams.encode(candidates)
        encoded = candidates.encoded
        testlen, ref_lengths = encoded.lengths, ngrams.encoded.lengths
        stats = np.zeros((ngrams.images, 2 + 2 * BLEU_ORDER), dtype=np.int64)
        stats[:, TESTLEN] = testlen
        distance = np.abs(ref_lengths - testlen[ngrams.ref_image]) * _LENGTH_BASE + ref_lengths
        if len(distance):
            stats[:, REFLEN] = np.minimum.reduceat(distance, ngrams.ref_start) % _LENGTH_BASE
        for n, (counts, (lo, hi)) in enumerate(zip(encoded.orders, candidates.found)):
            stats[:, GUESS.start + n] = np.maximum(testlen - n, 0)
            ref_count = self.max_counts[n][np.where(hi > lo, lo, -1)]
            clipped = np.minimum(counts.count, ref_count)
            stats[:, CORRECT.start + n] = np.bincount(counts.text, weights=clipped, minlength=ngrams.images)
        return stats


def bleu_from_statistics(stats: Sequence[float], order: int) -> float:
    """BLEU-``order`` from one image's or summed statistics: pycocoevalcap's formula, smoothing constants and
    operation order (its per-image and corpus values differ only in the statistics they are given)."""
    testlen, reflen, guess, correct = stats[0], stats[1], stats[GUESS], stats[CORRECT]
    bleu = 1.
    for k in range(order):
        bleu *= float(correct[k] + BLEU_TINY) / (guess[k] + BLEU_SMALL)
    value = bleu ** (1. / order)
    ratio = (testlen + BLEU_TINY) / (reflen + BLEU_SMALL)
    if ratio < 1:
        value *= math.exp(1 - 1 / ratio)
    return value


def bleu_scores(stats: Sequence[float]) -> List[float]:
    """BLEU-1..4 of one statistics row (the four values of :func:`bleu_from_statistics`, computed at once)."""
    testlen, reflen = stats[TESTLEN], stats[REFLEN]
    guess, correct = stats[GUESS], stats[CORRECT]
    values, bleu = [], 1.
    for k in range(BLEU_ORDER):
        bleu *= float(correct[k] + BLEU_TINY) / (guess[k] + BLEU_SMALL)
        values.append(bleu ** (1. / (k + 1)))
    ratio = (testlen + BLEU_TINY) / (reflen + BLEU_SMALL)
    if ratio < 1:
        brevity = math.exp(1 - 1 / ratio)
        values = [value * brevity for value in values]
    return values


def combine_bleu(sums: np.ndarray, order: int) -> np.ndarray:
    """Corpus BLEU-``order`` of each row of summed statistics (exact: the statistics are integer counts)."""
    return np.array([bleu_from_statistics([float(v) for v in row], order) for row in sums], dtype=np.float64)
