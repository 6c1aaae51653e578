"""METEOR 1.5 in Python/numpy: pycocoevalcap's ``meteor-1.5.jar - - -stdio -l en -norm``, equal to the jar.

``Meteor().statistics(candidate, references)`` gives one segment's statistics: the 23 numbers the jar prints for a
``SCORE`` request and a 24th column, the chunks the segment adds to a corpus aggregate (:mod:`capeval.text.meteor_score`
describes them). Of the references, the statistics are those of the best-scoring one, as the jar picks it.
:func:`~capeval.text.meteor_score.segment_score` is the jar's score of a segment (the value ``EVAL`` prints for it);
:func:`~capeval.text.meteor_score.combine` gives the jar's corpus score of any multiset of segments from their summed
statistics, so ``combine(stats.sum(0))`` is pycocoevalcap's METEOR and ``combine(counts @ stats)`` a bootstrap
resample's.

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
from itertools import chain, repeat
from operator import mul
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

from capeval.core.caches import LruCache
from capeval.core.errors import InputError
from capeval.text.java_runtime import java_hash, java_pow, utf16_length
from capeval.text.meteor_align import Match, Sentence, align_statistics, candidate_matches, gram_key
from capeval.text.meteor_data import (JAR_NAME, MAX_PHRASE_WORDS, PARAPHRASE_NAME, JarData, ParaphraseIndex,
                                      meteor_folder, paraphrase_index, read_jar_data)
from capeval.text.meteor_score import (BETA, CHUNKS, COLUMNS, MODULE_WEIGHTS, fragmentation, matched_whole_in_one_chunk,
                                       penalized_f_mean, precision_recall)
from capeval.text.meteor_text import english_stem, meteor_words, request_segments

# --- the score of an alignment ----------------------------------------------------------------------------

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
    whole = covered1 == len(best1) and covered2 == len(best2)
    return max(penalized_f_mean(precision, recall, 0.0 if whole else (2.0 / (covered1 + covered2)) ** BETA), 0.0)


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
        return [*best, 0 if matched_whole_in_one_chunk(best, best[CHUNKS]) else best[CHUNKS]]

    def _scalar_score(self, s: Tuple[int, ...]) -> float:
        """The jar's score of one alignment's statistics in plain floats (the operations of
        :func:`~capeval.text.meteor_score.segment_score`, without numpy's per-call cost; its powers cached)."""
        if not any(s[4:20]):  # no word matched: 0/0 or 1/inf, the jar's score is 0
            return 0.0
        precision, recall = precision_recall(s)
        frag = 0.0 if matched_whole_in_one_chunk(s, s[CHUNKS]) else fragmentation(s, s[CHUNKS])
        power = self._powers.get(frag)
        if power is None:
            power = float(java_pow(np.array([frag]), BETA)[0])
            self._powers.put(frag, power)
        return max(penalized_f_mean(precision, recall, power), 0.0)

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
    if word.endswith("ss") or utf16_length(word) <= 2:
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
