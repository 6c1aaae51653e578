"""CIDEr-D (Vedantam et al. 2015) as pycocoevalcap 1.2 computes it, bit for bit: tf-idf vectors of the 1..4-grams
with document frequencies over the scored images' reference sets, the clipped cosine per order, the Gaussian length
penalty (sigma 6) on the bigram counts, the mean over the orders and references, times 10. The fixed-IDF CIDEr-D
(:mod:`capeval.text.fixed_idf_cider`) is the same computation with a table of document frequencies given in
advance (:class:`~capeval.functional.fixed_idf_cider.DocumentFrequencies`) in place of the scored references' own.

Every float is computed by pycocoevalcap's operations in its order; the work is vectorised over all images with
numpy only where that cannot change a value: integer counting, elementwise IEEE arithmetic (``+ - * /``, ``min``,
``sqrt``), and sums taken term by term in pycocoevalcap's order (:func:`_ordered_sums`). The other calls are made
exactly as pycocoevalcap makes them: ``np.log`` of a document frequency, ``pow(w, 2)`` of a weight and the
penalty's power of e once per distinct argument, ``np.mean`` of the four order scores once per image."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from capeval.core.keys import ScoreKey
from capeval.functional.fixed_idf_cider import DocumentFrequencies
from capeval.text.ngrams import CandidateNgrams, EncodedTexts, NgramCounts, ReferenceNgrams

CIDER_N, CIDER_SIGMA = 4, 6.0
# CIDEr-D's key, as both CIDEr-D scorers return it (the scored corpus's IDF, a fixed IDF)
CIDER_KEY = ScoreKey("CIDEr", 100.0, coco_method="CIDEr")


def _ordered_sums(group: np.ndarray, rank: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """``out[g] = ((0.0 + v_0) + v_1) + ...``: each group's values added one by one in rank order (a group has at
    most one value per rank); pycocoevalcap's ``+=`` loop, run for all groups at once."""
    out = np.zeros(groups, dtype=np.float64)
    if not len(rank):
        return out
    levels = int(rank.max()) + 1
    by_rank = np.argsort(rank.astype(np.uint16) if levels <= 1 << 16 else rank, kind="stable")
    bounds = np.searchsorted(rank[by_rank], np.arange(levels + 1))
    for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        take = by_rank[start:stop]
        out[group[take]] += values[take]
    return out


def _expand(lo: np.ndarray, hi: np.ndarray):
    """All ``(q, i)`` with ``lo[q] <= i < hi[q]``, q-major."""
    matches = hi - lo
    query = np.repeat(np.arange(len(lo), dtype=np.int64), matches)
    offset = np.arange(len(query), dtype=np.int64) - np.repeat(np.cumsum(matches) - matches, matches)
    return query, np.repeat(lo, matches) + offset


class _Calls:
    """pycocoevalcap's calls other than elementwise arithmetic, made as it makes them, once per distinct argument:
    document frequencies, term frequencies and length differences are small integers."""

    def __init__(self, ref_len: np.float64):
        self.ref_len = ref_len
        self._logs: Dict[int, np.float64] = {}
        self._squares: Dict[Tuple[int, int], np.float64] = {}
        self._penalties: Dict[int, float] = {}

    def _log(self, df: int) -> np.float64:
        if df not in self._logs:
            self._logs[df] = np.log(max(1.0, float(df)))  # pycocoevalcap's document frequencies are float counts
        return self._logs[df]

    def _square(self, tf: int, df: int) -> np.float64:
        if (tf, df) not in self._squares:
            self._squares[tf, df] = pow(float(tf) * (self.ref_len - self._log(df)), 2)  # a numpy scalar's power
        return self._squares[tf, df]

    def _penalty(self, delta: int) -> float:
        if delta not in self._penalties:
            length_delta = float(delta)
            self._penalties[delta] = np.e ** (-(length_delta ** 2) / (2 * CIDER_SIGMA ** 2))
        return self._penalties[delta]

    def weights(self, tf: np.ndarray, df: np.ndarray) -> np.ndarray:
        """The tf-idf weights ``float(tf) * (ref_len - np.log(max(1.0, df)))``, elementwise."""
        return tf.astype(np.float64) * (self.ref_len - _by_value(df, self._log))

    def squares(self, tf: np.ndarray, df: np.ndarray) -> np.ndarray:
        """``pow(w, 2)`` of those weights (a term frequency of 1 almost always: a table by df, the rest one by one)."""
        out = np.empty(len(tf), dtype=np.float64)
        once = tf == 1
        out[once] = _by_value(df[once], lambda d: self._square(1, d))
        more = np.flatnonzero(~once)
        if len(more):
            base = int(df.max()) + 1
            pairs, inverse = np.unique(tf[more] * base + df[more], return_inverse=True)
            values = [self._square(*divmod(pair, base)) for pair in pairs.tolist()]
            out[more] = np.array(values, dtype=np.float64)[inverse.reshape(-1)]
        return out

    def penalties(self, length_delta: np.ndarray) -> np.ndarray:
        """``np.e ** (-(delta ** 2) / (2 * sigma ** 2))`` of bigram-count differences."""
        offset = int(length_delta.min(initial=0))
        return _by_value(length_delta - offset, lambda d: self._penalty(d + offset))


def _by_value(values: np.ndarray, function) -> np.ndarray:
    """``function(v)`` of small non-negative integers, called once per distinct value."""
    table = np.zeros(int(values.max(initial=0)) + 1, dtype=np.float64)
    for v in np.flatnonzero(np.bincount(values, minlength=1)).tolist():
        table[v] = function(v)
    return table[values]


class _TfIdf:
    """The tf-idf vectors of a set of texts, order by order: ``weights[n][e]`` is the weight of entry e of
    ``orders[n]``; ``norms[t, n]``: the vector norms; ``lengths[t]``: the bigram counts (pycocoevalcap's length).
    ``frequencies[n][e]``: the document frequency of entry e of ``orders[n]``."""

    def __init__(self, encoded: EncodedTexts, calls: _Calls, frequencies: List[np.ndarray]):
        texts = len(encoded.lengths)
        self.orders: List[NgramCounts] = encoded.orders
        self.weights: List[np.ndarray] = []
        self.norms = np.zeros((texts, CIDER_N), dtype=np.float64)
        for n, (counts, df) in enumerate(zip(encoded.orders, frequencies)):
            weight = calls.weights(counts.count, df)
            squares = calls.squares(counts.count, df)
            self.norms[:, n] = np.sqrt(_ordered_sums(counts.text, counts.rank, squares, texts))
            self.weights.append(weight)
        self.lengths = np.maximum(encoded.lengths - 1, 0)


class CiderReferences:
    """CIDEr-D's reference side, computed once for every system: document frequencies over the images' reference
    sets and each reference's tf-idf vector (pycocoevalcap's CiderScorer recomputes both per call and per image).
    ``references``: one list per image, or their :class:`ReferenceNgrams` shared with BLEU.

    ``fixed``: a table of document frequencies to use instead, with its number of documents as the corpus size (the
    fixed-IDF CIDEr-D); the references and candidates are then texts (the table is looked up by their n-grams)."""

    def __init__(self, references, fixed: Optional[DocumentFrequencies] = None):
        self.ngrams = ngrams = references if isinstance(references, ReferenceNgrams) else ReferenceNgrams(references)
        if ngrams.codes.max_order < CIDER_N:
            raise ValueError(f"CIDEr-D needs n-grams up to order {CIDER_N}")
        self.fixed = fixed
        self.calls = _Calls(np.log(float(ngrams.images if fixed is None else fixed.num_documents)))
        # per order and code: how many images' references hold the n-gram (the references' own frequencies)
        self.document_frequency = [] if fixed is not None else [
            np.bincount(keys[runs[:-1]] // ngrams.images, minlength=size)
            for (keys, _), runs, size in zip(ngrams.by_code, ngrams.runs, ngrams.encoded.sizes)]
        texts = None if fixed is None else [r for refs in references for r in refs]
        self.vectors = _TfIdf(ngrams.encoded, self.calls, self._frequencies(ngrams.encoded, texts))

    def _frequencies(self, encoded: EncodedTexts, texts: Optional[Sequence[str]]) -> List[np.ndarray]:
        """The document frequency of every n-gram entry of ``encoded`` (the encoded ``texts``), order by order: the
        fixed table's, else the references' (0 for an n-gram no reference holds)."""
        if self.fixed is not None:
            return self.fixed.of_texts(texts, CIDER_N)
        frequencies = []
        for counts, per_code in zip(encoded.orders, self.document_frequency):
            df = np.append(per_code, 0)  # codes at or above the references' are n-grams no reference holds
            frequencies.append(df[np.minimum(counts.code, len(df) - 1)])
        return frequencies

    def scores(self, candidates) -> np.ndarray:
        """Per-image CIDEr-D of ``candidates[i]`` against image i's references (``candidates``: one per image, or
        already encoded by ``ngrams`` without a fixed table); the corpus value is their mean (``np.mean``, as
        pycocoevalcap)."""
        ngrams, refs = self.ngrams, self.vectors
        encoded = candidates if isinstance(candidates, CandidateNgrams) else ngrams.encode(candidates)
        hyp = _TfIdf(encoded.encoded, self.calls, self._frequencies(encoded.encoded, candidates))
        ref_count = len(ngrams.ref_image)
        val = np.zeros((ref_count, CIDER_N), dtype=np.float64)
        for n, counts in enumerate(hyp.orders):
            # every (candidate n-gram, reference of its image holding it): the clipped products, in the candidate's
            # n-gram order (n-grams a reference lacks add 0.0, which changes no sum)
            query, at = _expand(*encoded.found[n])
            entry = ngrams.by_code[n][1][at]
            ref_weight = refs.weights[n][entry]
            terms = np.minimum(hyp.weights[n][query], ref_weight) * ref_weight
            val[:, n] = _ordered_sums(refs.orders[n].text[entry], counts.rank[query], terms, ref_count)
        norm_hyp, norm_ref = hyp.norms[ngrams.ref_image], refs.norms
        np.divide(val, norm_hyp * norm_ref, out=val, where=(norm_hyp != 0) & (norm_ref != 0))
        val *= self.calls.penalties(hyp.lengths[ngrams.ref_image] - refs.lengths)[:, None]
        rank = np.arange(ref_count, dtype=np.int64) - ngrams.ref_start[ngrams.ref_image]
        score = np.stack([_ordered_sums(ngrams.ref_image, rank, val[:, n], ngrams.images) for n in range(CIDER_N)],
                         axis=1)
        means = np.array([np.mean(row) for row in score], dtype=np.float64)
        return means / ngrams.refs_per_image.astype(np.float64) * 10.0
