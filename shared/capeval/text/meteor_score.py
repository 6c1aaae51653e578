"""METEOR 1.5's score of its statistics, as ``meteor-1.5.jar -l en -norm`` computes it (its ``computeMetrics``, in
its operation order, so bit-equal): the formula and the "matched whole in one chunk" rule, each written once here,
for one segment in plain numbers (the aligner's hot path) or for numpy columns of many.

The statistics (:data:`COLUMNS` per segment): test/ref length, test/ref function words, per module exact/stem/
synonym/paraphrase the (test content, ref content, test function, ref function) matches, chunks, matched test/ref
words, and a 24th column, the chunks the segment adds to a corpus aggregate (:data:`AGGREGATE_CHUNKS`): the jar's
``EVAL`` sums the segments' statistics, except that a segment matched whole in one chunk adds no chunk, then scores
the sum.

**Parameters** ('en', task 'rank'): alpha 0.85, beta 0.2, gamma 0.6, delta 0.75; module weights exact 1.0, stem
0.6, synonym 0.8, paraphrase 0.6. Precision and recall weigh content words by delta and function words by
1 - delta; the score is ``Fmean * (1 - gamma * frag ** beta)`` with ``frag = chunks / mean matched words`` (0 for a
segment matched whole in one chunk), 0 where undefined. ``frag ** beta`` is HotSpot's ``Math.pow``
(:func:`capeval.text.java_runtime.java_pow`): every segment score with at most 1000 matched words (both sides
together) equals the jar's; a corpus aggregate's ``frag`` is a ratio of large sums, where the corpus score may differ
in its last bit (one bootstrap multiset of 700 measured; every corpus score of ../shared equal).
"""

from __future__ import annotations

import numpy as np

from capeval.core.errors import InputError
from capeval.text.java_runtime import java_pow
from capeval.text.meteor_align import DELTA, MODULES

ALPHA, BETA, GAMMA = 0.85, 0.2, 0.6  # and DELTA, 0.75 (meteor_align: the sentences weigh their words by it)
MODULE_WEIGHTS = (1.0, 0.6, 0.8, 0.6)
JAR_COLUMNS = 23  # the statistics the jar prints
CHUNKS, AGGREGATE_CHUNKS = 20, 23  # the segment's chunks; the chunks it adds to a corpus aggregate
COLUMNS = 24


def matched_whole_in_one_chunk(s, chunks):
    """Whether every test and reference word is matched, in one chunk (``chunks == 1``): ``s[k]`` is statistic k,
    a number of one segment or a numpy column of many (then an array of booleans)."""
    test_matched = ref_matched = 0
    for m in range(MODULES):
        test_matched = test_matched + s[4 + 4 * m] + s[6 + 4 * m]
        ref_matched = ref_matched + s[5 + 4 * m] + s[7 + 4 * m]
    return (test_matched == s[0]) & (ref_matched == s[1]) & (chunks == 1)


def precision_recall(s):
    """The weighted precision and recall of statistics ``s`` (as in :func:`matched_whole_in_one_chunk`); for one
    segment, only where it matches a word (else a division by zero)."""
    test_weighted_len = DELTA * (s[0] - s[2]) + (1.0 - DELTA) * s[2]
    ref_weighted_len = DELTA * (s[1] - s[3]) + (1.0 - DELTA) * s[3]
    test_weighted = ref_weighted = 0.0
    for m, weight in enumerate(MODULE_WEIGHTS):
        test_weighted = test_weighted + s[4 + 4 * m] * weight * DELTA
    for m, weight in enumerate(MODULE_WEIGHTS):
        ref_weighted = ref_weighted + s[5 + 4 * m] * weight * DELTA
    for m, weight in enumerate(MODULE_WEIGHTS):
        test_weighted = test_weighted + s[6 + 4 * m] * weight * (1.0 - DELTA)
    for m, weight in enumerate(MODULE_WEIGHTS):
        ref_weighted = ref_weighted + s[7 + 4 * m] * weight * (1.0 - DELTA)
    return test_weighted / test_weighted_len, ref_weighted / ref_weighted_len


def fragmentation(s, chunks):
    """``chunks / mean matched words`` (not yet 0 for a segment matched whole in one chunk)."""
    return chunks / ((s[21] + s[22]) / 2)


def penalized_f_mean(precision, recall, power):
    """METEOR's formula, ``Fmean * (1 - gamma * power)``, ``power`` being ``frag ** beta`` as the jar computes it."""
    f_mean = 1.0 / (((1.0 - ALPHA) / precision) + (ALPHA / recall))
    return f_mean * (1.0 - GAMMA * power)


def _score(stats: np.ndarray, chunks_column: int) -> np.ndarray:
    """The jar's score of each row of statistics, counting the chunks of ``chunks_column`` (0 where undefined)."""
    s = np.atleast_2d(np.asarray(stats, dtype=np.float64)).T
    chunks = s[chunks_column]
    with np.errstate(all="ignore"):
        precision, recall = precision_recall(s)
        frag = np.where(matched_whole_in_one_chunk(s, chunks), 0.0, fragmentation(s, chunks))
        score = penalized_f_mean(precision, recall, java_pow(frag, BETA))
    return np.where(np.isnan(score), 0.0, np.maximum(score, 0.0))


def segment_score(stats: np.ndarray) -> np.ndarray:
    """The jar's score of each segment (rows of statistics; a single row gives a 1-element array)."""
    return _score(stats, CHUNKS)


def combine(sums: np.ndarray) -> np.ndarray:
    """The jar's corpus score of each row of summed segment statistics (all 24 columns summed over a multiset of
    segments): what ``EVAL`` prints last for those segments."""
    sums = np.atleast_2d(np.asarray(sums, dtype=np.float64))
    if sums.shape[1] != COLUMNS:
        raise InputError(f"sums: rows of {sums.shape[1]} statistics; METEOR's have {COLUMNS}")
    return _score(sums, AGGREGATE_CHUNKS)
