"""METEOR 1.5 in Python/numpy: pycocoevalcap's ``meteor-1.5.jar - - -stdio -l en -norm``, equal to the jar.

``Meteor().statistics(candidate, references)`` gives one segment's statistics: the 23 numbers the jar prints for a
``SCORE`` request (test/ref length, test/ref function words, per module exact/stem/synonym/paraphrase the
(test content, ref content, test function, ref function) matches, chunks, matched test/ref words) and a 24th column,
the chunks the segment adds to a corpus aggregate (see :data:`AGGREGATE_CHUNKS`). :func:`segment_score` is the
jar's score of a segment (the value ``EVAL`` prints for it); :func:`combine` gives the jar's corpus score of any
multiset of segments from their summed statistics, so ``combine(stats.sum(0))`` is pycocoevalcap's METEOR and
``combine(counts @ stats)`` a bootstrap resample's.

**The jar's corpus aggregate.** ``EVAL`` sums the segments' statistics, except that a segment matched whole in a
single chunk (all test and reference words matched, one chunk) adds no chunk; then it scores the sum. Summing the
printed statistics and scoring the sum is therefore not the jar's corpus score when some caption equals its
reference; summing the 24th column instead of the 20th is.

**Parameters** ('en', task 'rank'): alpha 0.85, beta 0.2, gamma 0.6, delta 0.75; module weights exact 1.0, stem
0.6, synonym 0.8, paraphrase 0.6 (the aligner's search uses 1, 0.5, 0.5, 0.5). Precision and recall weigh content
words by delta and function words by 1 - delta; the score is ``Fmean * (1 - gamma * frag ** beta)`` with
``frag = chunks / mean matched words`` (0 for a segment matched whole in one chunk), 0 where undefined.

**Java's Math.pow.** The jar runs on HotSpot, whose ``Math.pow`` (an x86-64 intrinsic) is not correctly rounded:
on 99 of the 152,096 fragmentation values ``c / (m / 2)`` with ``m <= 1000`` it is one unit in the last place off
the correctly rounded ``frag ** 0.2``. capeval computes the correctly rounded power and applies those 99
corrections (measured with Java 17 on x86-64: ``benchmarks/verify_meteor.py --pow-table``), so every segment score
with at most 1000 matched words (both sides together) equals the jar's. A corpus aggregate's ``frag`` is a ratio of large sums; there the
correctly rounded power differs from the intrinsic on about 0.1% of values (2 of 2,000 random ones), and the corpus
score then differs in its last bit (one bootstrap multiset of 700 measured; every corpus score of ../shared equal).

Text handling (:mod:`capeval.text.meteor_text`), alignment (:mod:`capeval.text.meteor_align`) and data
(:mod:`capeval.text.meteor_data`, where the data's licences are stated) are capeval's own implementations, written
from the METEOR papers (Lavie & Agarwal 2007; Denkowski & Lavie 2011, 2014) and the jar's observed behaviour;
METEOR itself is LGPL and none of its code is copied or translated. Its data files are read from the installed
pycocoevalcap.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from decimal import Context, Decimal
from fractions import Fraction
from itertools import chain, repeat
from operator import mul
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

from capeval.core.caches import LruCache
from capeval.core.errors import InputError
from capeval.text.meteor_align import DELTA, MODULES, Match, Sentence, align_statistics, candidate_matches, gram_key
from capeval.text.meteor_data import (JAR_NAME, MAX_PHRASE_WORDS, PARAPHRASE_NAME, JarData, ParaphraseIndex,
                                      meteor_folder, paraphrase_index, read_jar_data)
from capeval.text.meteor_text import english_stem, java_hash, meteor_words, request_segments

ALPHA, BETA, GAMMA = 0.85, 0.2, 0.6  # and DELTA, 0.75 (meteor_align: the sentences weigh their words by it)
MODULE_WEIGHTS = (1.0, 0.6, 0.8, 0.6)
JAR_COLUMNS = 23  # the statistics the jar prints
CHUNKS, AGGREGATE_CHUNKS = 20, 23  # the segment's chunks; the chunks it adds to a corpus aggregate
COLUMNS = 24

# --- scores --------------------------------------------------------------------------------------------------

# Java's Math.pow(frag, 0.2) is one ulp above / below the correctly rounded value at these frag = p/q
_POW_ULP_UP = ("28/405 54/731 43/408 95/453 158/719 168/739 160/629 178/599 296/969 304/991 202/591 354/857 374/859 "
               "120/269 211/441 298/599 88/167 207/349 468/785 151/251 582/955 268/439 182/295 370/599 314/507 "
               "408/631 350/519 548/777 189/260 722/963 508/663 742/953 716/889 227/281 327/401 253/300 296/349 "
               "311/362 500/579 274/311 734/827 346/369 770/821 110/117 417/431 438/451 536/541")
_POW_ULP_DOWN = ("4/957 9/290 17/271 21/326 31/393 23/273 27/275 72/649 86/589 86/513 118/581 57/269 196/809 129/478 "
                 "145/487 157/472 44/131 258/737 71/201 74/193 334/857 119/285 146/345 352/821 230/523 177/397 "
                 "328/727 404/879 191/406 100/203 209/387 233/431 190/343 358/617 203/307 504/727 283/400 632/881 "
                 "131/175 724/939 113/145 395/493 432/539 468/577 878/975 888/979 878/959 592/633 746/781 341/354 "
                 "838/855 738/743")


def _fraction_values(table: str) -> np.ndarray:
    return np.array([float(Fraction(f)) for f in table.split()], dtype=np.float64)


_POW_UP, _POW_DOWN = _fraction_values(_POW_ULP_UP), _fraction_values(_POW_ULP_DOWN)
_EXTENDED = np.finfo(np.longdouble).nmant >= 63  # x87 extended or quad precision: a fast correctly rounded pow
_DECIMAL = Context(prec=40)


def _decimal_pow(x: float, exponent: float) -> float:
    return float(_DECIMAL.exp(_DECIMAL.multiply(_DECIMAL.ln(Decimal(x)), Decimal(exponent))))


def correctly_rounded_pow(x: np.ndarray, exponent: float) -> np.ndarray:
    """``x ** exponent`` rounded to the nearest double, for ``x >= 0`` (NaN stays NaN): computed in extended
    precision, and with 40 decimal digits where that result is too near a rounding boundary to decide."""
    x = np.asarray(x, dtype=np.float64)
    out = np.power(x, exponent)
    inner = np.nonzero(np.isfinite(x) & (x > 0))[0]
    if not len(inner):
        return out
    unsure = inner
    if _EXTENDED:
        wide = np.power(x[inner].astype(np.longdouble), np.longdouble(exponent))
        near = wide.astype(np.float64)
        other = np.nextafter(near, np.where(wide > near, np.inf, -np.inf))
        boundary = (near.astype(np.longdouble) + other.astype(np.longdouble)) / 2
        # glibc's powl errs by less than 2 ** -62 (measured): a margin of 4
        doubtful = np.abs(wide - boundary) <= np.abs(wide) * np.longdouble(2.0 ** -60)
        out[inner] = near
        unsure = inner[doubtful]
    for i in unsure:
        out[i] = _decimal_pow(float(x[i]), exponent)
    return out


def jar_pow(x: np.ndarray) -> np.ndarray:
    """The jar's ``Math.pow(x, 0.2)``: correctly rounded, with the measured corrections of Java's intrinsic."""
    out = correctly_rounded_pow(x, BETA)
    up, down = np.isin(x, _POW_UP), np.isin(x, _POW_DOWN)
    out[up] = np.nextafter(out[up], np.inf)
    out[down] = np.nextafter(out[down], -np.inf)
    return out


def _score(stats: np.ndarray, chunks_column: int) -> np.ndarray:
    """The jar's ``computeMetrics`` over rows of statistics, in its operation order (so bit-equal)."""
    s = np.atleast_2d(np.asarray(stats, dtype=np.float64))
    test_len, ref_len, test_fn, ref_fn = s[:, 0], s[:, 1], s[:, 2], s[:, 3]
    chunks, test_words, ref_words = s[:, chunks_column], s[:, 21], s[:, 22]
    with np.errstate(all="ignore"):
        test_total = np.zeros(len(s))
        ref_total = np.zeros(len(s))
        for m in range(MODULES):
            test_total = test_total + s[:, 4 + 4 * m] + s[:, 6 + 4 * m]
            ref_total = ref_total + s[:, 5 + 4 * m] + s[:, 7 + 4 * m]
        test_weighted_len = DELTA * (test_len - test_fn) + (1.0 - DELTA) * test_fn
        ref_weighted_len = DELTA * (ref_len - ref_fn) + (1.0 - DELTA) * ref_fn
        test_weighted = np.zeros(len(s))
        ref_weighted = np.zeros(len(s))
        for m, weight in enumerate(MODULE_WEIGHTS):
            test_weighted = test_weighted + s[:, 4 + 4 * m] * weight * DELTA
        for m, weight in enumerate(MODULE_WEIGHTS):
            ref_weighted = ref_weighted + s[:, 5 + 4 * m] * weight * DELTA
        for m, weight in enumerate(MODULE_WEIGHTS):
            test_weighted = test_weighted + s[:, 6 + 4 * m] * weight * (1.0 - DELTA)
        for m, weight in enumerate(MODULE_WEIGHTS):
            ref_weighted = ref_weighted + s[:, 7 + 4 * m] * weight * (1.0 - DELTA)
        precision = test_weighted / test_weighted_len
        recall = ref_weighted / ref_weighted_len
        f_mean = 1.0 / (((1.0 - ALPHA) / precision) + (ALPHA / recall))
        whole = (test_total == test_len) & (ref_total == ref_len) & (chunks == 1)
        frag = np.where(whole, 0.0, chunks / ((test_words + ref_words) / 2))
        score = f_mean * (1.0 - GAMMA * jar_pow(frag))
    return np.where(np.isnan(score), 0.0, np.maximum(score, 0.0))


def _score_bound(test: Sentence, ref: Sentence, matches: List[List[Match]]) -> float:
    """An upper bound on the score of any alignment of ``test`` with ``ref`` built from these candidates: every
    word matched by its best-weighted candidate, in one chunk (no penalty only if every word can be matched)."""
    best1, best2 = [0.0] * len(test.words), [0.0] * len(ref.words)
    for candidates in matches:
        for s2, l2, s1, l1, module, _, _, _, _ in candidates:
            weight = MODULE_WEIGHTS[module]
            if l1 == 1 and l2 == 1:
                if weight > best1[s1]:
                    best1[s1] = weight
                if weight > best2[s2]:
                    best2[s2] = weight
                continue
            for k in range(s1, s1 + l1):
                if weight > best1[k]:
                    best1[k] = weight
            for k in range(s2, s2 + l2):
                if weight > best2[k]:
                    best2[k] = weight
    covered1, covered2 = len(best1) - best1.count(0.0), len(best2) - best2.count(0.0)
    if not covered1:
        return 0.0
    precision = sum(map(mul, best1, test.word_weights)) / test.weighted_length
    recall = sum(map(mul, best2, ref.word_weights)) / ref.weighted_length
    f_mean = 1.0 / (((1.0 - ALPHA) / precision) + (ALPHA / recall))
    if covered1 == len(best1) and covered2 == len(best2):
        return f_mean
    return max(f_mean * (1.0 - GAMMA * (2.0 / (covered1 + covered2)) ** BETA), 0.0)


def segment_score(stats: np.ndarray) -> np.ndarray:
    """The jar's score of each segment (rows of :meth:`Meteor.statistics`; a single row gives a 1-element array)."""
    return _score(stats, CHUNKS)


def combine(sums: np.ndarray) -> np.ndarray:
    """The jar's corpus score of each row of summed segment statistics (all 24 columns summed over a multiset of
    segments): what ``EVAL`` prints last for those segments."""
    sums = np.atleast_2d(np.asarray(sums, dtype=np.float64))
    if sums.shape[1] != COLUMNS:
        raise InputError(f"sums: rows of {sums.shape[1]} statistics; METEOR's have {COLUMNS}")
    return _score(sums, AGGREGATE_CHUNKS)


# --- the scorer ----------------------------------------------------------------------------------------------

_SHARED: Dict[str, "Meteor"] = {}
_SHARED_LOCK = threading.Lock()


class Meteor:
    """METEOR 1.5 (``-l en -norm``) on pycocoevalcap's data, loaded on first use. Not thread-safe: use one per
    thread, or :func:`shared_meteor`."""

    def __init__(self, cache_dir: Optional[os.PathLike] = None, *, max_cached_sentences: int = 200_000):
        self.cache_dir = cache_dir
        self._data: Optional[Tuple[JarData, ParaphraseIndex]] = None
        self._words: LruCache[Tuple[int, int, bool]] = LruCache(max_cached_sentences)
        self._sentences: LruCache[Sentence] = LruCache(max_cached_sentences)
        self._powers: LruCache[float] = LruCache(100_000)
        self._phrase_groups: LruCache[Dict[int, tuple]] = LruCache(max_cached_sentences)
        # the synonym graph of the words seen: word -> words sharing a synset (with another Java hash), and
        # synset -> its words and their hashes; both hold WordNet words only, so WordNet's vocabulary bounds them
        self._synonyms: Dict[str, set] = {}
        self._synset_words: Dict[int, Dict[str, int]] = {}

    def load(self) -> "Meteor":
        """Read the jar's word lists and open (building once) the paraphrase index."""
        if self._data is None:
            folder = meteor_folder()
            self._data = (read_jar_data(folder / JAR_NAME), paraphrase_index(folder / PARAPHRASE_NAME,
                                                                              self.cache_dir))
        return self

    def statistics(self, candidate: str, references: Sequence[str]) -> np.ndarray:
        """One segment's statistics (24 columns, see the module docstring)."""
        return self.statistics_batch([candidate], [references])[0]

    def statistics_batch(self, candidates: Sequence[str], references: Sequence[Sequence[str]],
                         processes: int = 1) -> np.ndarray:
        """Statistics of many segments, shape (n, 24); ``processes > 1`` splits them over worker processes."""
        return self.start_statistics(candidates, references, processes).result()

    def start_statistics(self, candidates: Sequence[str], references: Sequence[Sequence[str]],
                         processes: int = 1) -> "PendingStatistics":
        """:meth:`statistics_batch`, started: with ``processes > 1`` the worker processes run while the caller goes
        on (the requests are checked first, in the caller); else computed here before it returns."""
        _check_requests(candidates, references)
        if processes > 1 and len(candidates) > 1:
            return _in_processes(self, candidates, references, processes)
        return PendingStatistics(self._statistics(candidates, references))

    def _statistics(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> np.ndarray:
        """The statistics of checked requests, in this process."""
        self.load()
        collecting = gc.isenabled()
        gc.disable()  # the work allocates millions of acyclic tuples: the collector would only rescan them
        try:
            requests = [request_segments(c, refs) for c, refs in zip(candidates, references)]
            sentences = self._prepare({text for test, refs in requests for text in (test, *refs)})
            rows = [self._segment(sentences[test], [sentences[r] for r in refs]) for test, refs in requests]
        finally:
            if collecting:
                gc.enable()
        return np.array(rows, dtype=np.float64).reshape(len(requests), COLUMNS)

    def _segment(self, test: Sentence, references: List[Sentence]) -> List[float]:
        """The statistics of the best-scoring reference (the first of equal ones), as the jar picks it. References
        are aligned in decreasing order of a bound on their score, and those whose bound is below the best score
        found are not aligned: they could not be picked."""
        candidates = []
        for k, reference in enumerate(references):
            matches = candidate_matches(test, reference, self._synonyms)
            candidates.append((-_score_bound(test, reference, matches), k, reference, matches))
        candidates.sort(key=lambda c: c[:2])
        best, best_score, best_index = None, -1.0, len(references)
        for negative_bound, k, reference, matches in candidates:
            if -negative_bound * (1 + 1e-9) < best_score:
                break
            stats = align_statistics(test, reference, matches)
            score = self._scalar_score(stats)
            if score > best_score or (score == best_score and k < best_index):
                best, best_score, best_index = stats, score, k
        whole = sum(best[4:20:2]) == best[0] and sum(best[5:20:2]) == best[1] and best[CHUNKS] == 1
        return [*best, 0 if whole else best[CHUNKS]]

    def _scalar_score(self, s: Tuple[int, ...]) -> float:
        """:func:`segment_score` of one alignment in plain floats (the same IEEE operations, without numpy's
        per-call cost)."""
        test_weighted_len = DELTA * (s[0] - s[2]) + (1.0 - DELTA) * s[2]
        ref_weighted_len = DELTA * (s[1] - s[3]) + (1.0 - DELTA) * s[3]
        test_weighted = ref_weighted = 0.0
        for m, weight in enumerate(MODULE_WEIGHTS):
            test_weighted += s[4 + 4 * m] * weight * DELTA
        for m, weight in enumerate(MODULE_WEIGHTS):
            ref_weighted += s[5 + 4 * m] * weight * DELTA
        for m, weight in enumerate(MODULE_WEIGHTS):
            test_weighted += s[6 + 4 * m] * weight * (1.0 - DELTA)
        for m, weight in enumerate(MODULE_WEIGHTS):
            ref_weighted += s[7 + 4 * m] * weight * (1.0 - DELTA)
        if not test_weighted or not ref_weighted:  # 0/0 or 1/inf: the jar's score is 0
            return 0.0
        precision = test_weighted / test_weighted_len
        recall = ref_weighted / ref_weighted_len
        f_mean = 1.0 / (((1.0 - ALPHA) / precision) + (ALPHA / recall))
        if sum(s[4:20:2]) == s[0] and sum(s[5:20:2]) == s[1] and s[CHUNKS] == 1:
            frag = 0.0
        else:
            frag = s[CHUNKS] / ((s[21] + s[22]) / 2)
        power = self._powers.get(frag)
        if power is None:
            power = float(jar_pow(np.array([frag]))[0])
            self._powers.put(frag, power)
        return max(f_mean * (1.0 - GAMMA * power), 0.0)

    def _prepare(self, texts) -> Dict[str, Sentence]:
        """The Sentence of every text, from the cache or made (their phrases looked up in one pass)."""
        jar, index = self._data
        texts = list(texts)
        sentences = dict(zip(texts, self._sentences.get_many(texts)))
        missing = [t for t, s in sentences.items() if s is None]
        if missing:
            word_lists = [tuple(meteor_words(t, jar.nonbreaking_prefixes)) for t in missing]
            known = self._words_known(list(dict.fromkeys(chain.from_iterable(word_lists))))
            for text, words, found in zip(missing, word_lists, _phrases(index, word_lists, self._phrase_groups)):
                sentences[text] = self._sentence(words, found, known)
            self._sentences.put_many((text, sentences[text]) for text in missing)
        return sentences

    @staticmethod
    def _sentence(words: Tuple[str, ...], found, known: Dict[str, Tuple[int, int, bool]]) -> Sentence:
        features = [known[w] for w in words]
        ids, phrases = found
        hashes, stems, function = zip(*features) if features else ((), (), ())
        return Sentence(words, hashes, stems, function, ids, phrases)

    def _words_known(self, words: List[str]) -> Dict[str, Tuple[int, int, bool]]:
        """The features of each (distinct) word, from the cache or made, new words in their order (their synonyms
        linked as they come)."""
        known = dict(zip(words, self._words.get_many(words)))
        new = [w for w in words if known[w] is None]
        jar = self._data[0]
        for word in new:
            known[word] = (java_hash(word), java_hash(english_stem(word)), word.lower() in jar.function_words)
            if word not in self._synonyms:
                self._link_synonyms(word, known[word][0], _synsets(jar, word))
        self._words.put_many((w, known[w]) for w in new)
        return known

    def _link_synonyms(self, word: str, word_hash: int, synsets: FrozenSet[int]) -> None:
        partners = self._synonyms[word] = set()
        for synset in synsets:
            bucket = self._synset_words.setdefault(synset, {})
            partners.update(other for other, other_hash in bucket.items() if other_hash != word_hash)
            bucket[word] = word_hash
        for other in partners:
            self._synonyms[other].add(word)


def shared_meteor() -> Meteor:
    """The process's :class:`Meteor`, loaded once."""
    with _SHARED_LOCK:
        if "meteor" not in _SHARED:
            _SHARED["meteor"] = Meteor().load()
        return _SHARED["meteor"]


def _check_requests(candidates: Sequence[str], references: Sequence[Sequence[str]]) -> None:
    if len(candidates) != len(references):
        raise InputError(f"references: {len(references)} reference lists for {len(candidates)} candidates")
    for i, (candidate, refs) in enumerate(zip(candidates, references)):
        if not isinstance(candidate, str):
            raise InputError(f"candidates[{i}] is {type(candidate).__name__}, not a string")
        if isinstance(refs, str) or not len(refs):
            raise InputError(f"references[{i}] must be a non-empty list of strings")
        for j, text in enumerate((candidate, *refs)):
            where = f"candidates[{i}]" if j == 0 else f"references[{i}][{j - 1}]"
            if not isinstance(text, str):
                raise InputError(f"{where} is {type(text).__name__}, not a string")
            if "\n" in text or "\r" in text:
                raise InputError(f"{where} holds a line break: the jar reads one request per line")


# --- synonyms (WordNet through the jar's files) --------------------------------------------------------------

_DETACHMENTS = (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
                ("men", "man"), ("ies", "y"), ("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"),
                ("ed", ""), ("ing", "e"), ("ing", ""), ("er", ""), ("est", ""), ("er", "e"), ("est", "e"))


def _synset_numbers(jar: JarData, word: str) -> FrozenSet[int]:
    line = jar.synsets.get(word)
    return frozenset(int(n) for n in line.split()) if line else frozenset()


def _base_form(jar: JarData, word: str) -> str:
    """WordNet's detachment rules (noun, verb, adjective suffixes in order): the first base form with synsets;
    the word itself when it is short or ends in 'ss'; '' when none."""
    if word.endswith("ss") or len(word.encode("utf-16-le", "surrogatepass")) <= 4:
        return word
    for suffix, ending in _DETACHMENTS:
        if word.endswith(suffix):
            base = word[:len(word) - len(suffix)] + ending
            if base in jar.synsets:
                return base
    return ""


def _synsets(jar: JarData, word: str) -> FrozenSet[int]:
    """The synsets a word matches by: its own and its base forms' (irregular forms first, else detachment)."""
    bases = jar.irregular_bases.get(word)
    if bases is not None:
        base_sets = frozenset().union(*(_synset_numbers(jar, b) for b in bases))
    else:
        base_sets = _synset_numbers(jar, _base_form(jar, word))
    return _synset_numbers(jar, word) | base_sets


# --- paraphrase look-up ---------------------------------------------------------------------------------------

def _phrases(index: ParaphraseIndex, word_lists: List[Tuple[str, ...]], groups: LruCache):
    """Per sentence: its paraphrase-table word ids and its phrases in the table, as (start, length, the phrase's
    paraphrases grouped by the :func:`gram_key` of their first one or two word ids: (rank, word ids)); ``groups``
    caches the groupings."""
    vocabulary = index.vocabulary.get
    ids = [tuple(map(vocabulary, words, repeat(-1))) for words in word_lists]
    sizes = np.array([len(s) + 1 for s in ids], dtype=np.int64)
    flat = np.fromiter(chain.from_iterable((*sentence, -1) for sentence in ids), dtype=np.int64,
                       count=int(sizes.sum()))
    owner = np.repeat(np.arange(len(ids)), sizes)
    start = np.arange(len(flat)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    rows, lengths, phrases = [], [], []
    for length in range(1, MAX_PHRASE_WORDS + 1):
        if len(flat) < length:
            break
        windows = np.lib.stride_tricks.sliding_window_view(flat, length)
        candidates = np.nonzero((windows >= 0).all(axis=1))[0]
        found = index.find(windows[candidates], length)
        rows.append(candidates[found >= 0])
        lengths.append(np.full(int((found >= 0).sum()), length, dtype=np.int64))
        phrases.append(found[found >= 0])
    rows, lengths, phrases = (np.concatenate(a) if a else np.zeros(0, np.int64) for a in (rows, lengths, phrases))
    distinct = list(set(phrases.tolist()))
    batch = dict(zip(distinct, groups.get_many(distinct)))
    missing = [p for p, g in batch.items() if g is None]
    for phrase, paraphrases in (index.paraphrases(missing) if missing else {}).items():
        grouped: Dict[int, List] = {}
        for rank, words in enumerate(paraphrases):
            grouped.setdefault(gram_key(words), []).append((rank, words))
        batch[phrase] = {head: tuple(found) for head, found in grouped.items()}
    groups.put_many((phrase, batch[phrase]) for phrase in missing if batch[phrase] is not None)
    order = np.argsort(owner[rows], kind="stable")
    bounds = np.concatenate(([0], np.cumsum(np.bincount(owner[rows], minlength=len(ids))))).tolist()
    found = list(zip(start[rows][order].tolist(), lengths[order].tolist(),
                     map(batch.__getitem__, phrases[order].tolist())))
    return [(sentence, tuple(found[a:b])) for sentence, a, b in zip(ids, bounds[:-1], bounds[1:])]


# --- processes -----------------------------------------------------------------------------------------------

_WORKER: Dict[str, Meteor] = {}


class PendingStatistics:
    """Segment statistics computed (``done``) or under way in worker processes (``pool``, its ``parts`` in order)."""

    def __init__(self, done: Optional[np.ndarray] = None, pool: Optional[ProcessPoolExecutor] = None,
                 parts: Sequence[Future] = ()):
        self._done, self._pool, self._parts = done, pool, list(parts)

    def result(self) -> np.ndarray:
        """The statistics, shape (n, 24), once every worker has finished."""
        if self._pool is not None:
            try:
                self._done = np.concatenate([part.result() for part in self._parts])
            finally:
                self.close()
        return self._done

    def close(self) -> None:
        """Stop the workers (waiting for the ones running) and drop what they have not started."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _worker_statistics(cache_dir, candidates, references) -> np.ndarray:
    meteor = _WORKER.get("meteor")
    if meteor is None:
        meteor = _WORKER["meteor"] = Meteor(cache_dir)
    return meteor._statistics(candidates, references)


def _in_processes(meteor: Meteor, candidates, references, processes: int) -> PendingStatistics:
    meteor.load()  # builds the paraphrase index once, before the workers open it
    bounds = np.linspace(0, len(candidates), min(processes, len(candidates)) + 1).astype(int)
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(len(bounds) - 1, mp_context=multiprocessing.get_context(method))
    _WORKER["meteor"] = meteor  # a forked worker starts with it loaded (every worker is forked at the first submit)
    try:
        parts = [pool.submit(_worker_statistics, meteor.cache_dir, list(candidates[a:b]), list(references[a:b]))
                 for a, b in zip(bounds[:-1], bounds[1:])]
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        _WORKER.pop("meteor", None)
    return PendingStatistics(pool=pool, parts=parts)
