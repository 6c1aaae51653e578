"""Word n-grams as integer codes for the overlap metrics (BLEU, CIDEr-D), all texts at once: texts are split on
whitespace (``str.split()``, as pycocoevalcap splits them), every distinct n-gram of one order gets one dense code,
the same in every text encoded by one :class:`NgramCodes`, and each text's distinct n-grams are listed in the order
of their first occurrence (the order of pycocoevalcap's count dictionaries)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Dict, List, Sequence, Tuple

import numpy as np

MAX_ORDER = 4
# the codes of order k >= 2 are looked up by the code of the first k-1 words and the last word's id, as
# code * PAIR_BASE + id (the vocabulary grows between calls; this key does not depend on it)
PAIR_BASE = 1 << 32
_INT64_MAX = np.iinfo(np.int64).max


def space_split(texts: Sequence[str]) -> Tuple[List[str], np.ndarray]:
    """Every text's ``split(" ")`` tokens, flattened, and how many each text has (one string split: joined by single
    spaces, the texts' tokens stay apart and in order)."""
    if not len(texts):
        return [], np.zeros(0, dtype=np.int64)
    counts = np.fromiter(map(str.count, texts, repeat(" ")), dtype=np.int64, count=len(texts)) + 1
    return " ".join(texts).split(" "), counts


def whitespace_split(texts: Sequence[str]) -> Tuple[List[str], np.ndarray, List[str]]:
    """Every text's ``split()`` tokens, flattened, how many each text has, and the distinct tokens by first
    occurrence."""
    tokens, counts = space_split(texts)
    distinct = list(dict.fromkeys(tokens))
    if " ".join(distinct).split() != distinct:  # a token is empty or holds other whitespace: split() differs
        words = [text.split() for text in texts]
        tokens = [w for ws in words for w in ws]
        counts = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        distinct = list(dict.fromkeys(tokens))
    return tokens, counts, distinct


@dataclass(frozen=True)
class NgramCounts:
    """The distinct n-grams of one order in every text: entry e is n-gram ``code[e]`` of text ``text[e]``, seen
    ``count[e]`` times there, its ``rank[e]``-th distinct n-gram of that order by first occurrence. Entries are
    sorted by text, then rank; ``key_order`` lists them by n-gram, then text (by code, then text, in the first texts
    a :class:`NgramCodes` encodes: their codes are given in that order)."""

    text: np.ndarray
    code: np.ndarray
    count: np.ndarray
    rank: np.ndarray
    key_order: np.ndarray


@dataclass(frozen=True)
class EncodedTexts:
    """Texts encoded by one :class:`NgramCodes`: ``lengths[t]`` words in text t; ``orders[k - 1]``: the k-grams;
    ``sizes[k - 1]``: every k-gram code of these texts is below it."""

    lengths: np.ndarray
    orders: List[NgramCounts]
    sizes: List[int]


class NgramCodes:
    """Word ids and n-gram codes of orders 1..``max_order``, extended by :meth:`encode`."""

    def __init__(self, max_order: int = MAX_ORDER):
        self.max_order = max_order
        self.word_ids: Dict[str, int] = {}
        self.sizes = [0] * max_order  # codes given so far, per order
        self._keys = [np.empty(0, np.int64) for _ in range(max_order)]  # sorted pair keys of orders >= 2
        self._key_codes = [np.empty(0, np.int64) for _ in range(max_order)]

    def encode(self, texts: Sequence[str], extend: bool = True) -> EncodedTexts:
        """Encode ``texts``; their n-grams that have no code yet get new codes, kept for later calls with
        ``extend`` (without it, only for this call's texts: every call's new codes start at the same sizes)."""
        tokens, lengths, distinct = whitespace_split(texts)
        ids = self._word_ids(tokens, distinct)
        text = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        remaining = np.repeat(lengths, lengths) - (np.arange(len(ids)) - np.repeat(np.cumsum(lengths) - lengths,
                                                                                    lengths))
        flat, keys, orders, sizes = np.arange(len(ids)), ids, [], [self.sizes[0]]
        for order in range(1, self.max_order + 1):
            if order > 1:
                starts = np.flatnonzero(remaining >= order)  # k-grams start where k words remain in the text
                flat, text, remaining = flat[starts], text[starts], remaining[starts]
                keys = codes[starts] * self.sizes[0] + ids[flat + order - 1]  # (prefix code, last word), dense
            codes, counts, size = self._count(order, keys, text, len(lengths), extend)
            orders.append(counts)
            sizes.append(size)
        return EncodedTexts(lengths, orders, sizes[1:])

    def _word_ids(self, words: List[str], distinct: List[str]) -> np.ndarray:
        ids_of = self.word_ids
        new = [w for w in distinct if w not in ids_of]
        ids_of.update(zip(new, range(len(ids_of), len(ids_of) + len(new))))
        self.sizes[0] = len(ids_of)
        return np.fromiter(map(ids_of.__getitem__, words), dtype=np.int64, count=len(words))

    def _count(self, order: int, keys: np.ndarray, text: np.ndarray, texts: int, extend: bool):
        """The codes of the k-gram occurrences keyed ``keys`` (word ids, or prefix code * vocabulary + last word),
        in text order, and each text's distinct k-grams. One stable sort by key does both: equal keys stay in text
        order, so a (text, k-gram) run starts at its first occurrence."""
        n = len(keys)
        by_key = stable_argsort(keys)
        sorted_keys = keys[by_key]
        new_key = np.ones(n, dtype=bool)
        new_key[1:] = sorted_keys[1:] != sorted_keys[:-1]
        distinct = sorted_keys[new_key]
        if order == 1:
            distinct_codes, size = distinct, self.sizes[0]
        else:
            vocabulary = self.sizes[0]
            distinct_codes, size = self._codes_of(order, distinct // vocabulary * PAIR_BASE + distinct % vocabulary,
                                                  extend)
        codes = np.empty(n, dtype=np.int64)
        codes[by_key] = distinct_codes[np.cumsum(new_key) - 1]
        sorted_text = text[by_key]
        run = new_key.copy()
        run[1:] |= sorted_text[1:] != sorted_text[:-1]
        run_start = np.flatnonzero(run)
        first = by_key[run_start]  # first occurrences, by key then text
        is_first = np.zeros(n, dtype=bool)
        is_first[first] = True
        key_order = (np.cumsum(is_first) - 1)[first]  # their entry numbers (entries: first occurrences, text order)
        entries = np.flatnonzero(is_first)
        count = np.empty(len(entries), dtype=np.int64)
        count[key_order] = np.diff(np.append(run_start, n))
        entry_text = text[entries]
        per_text = np.bincount(entry_text, minlength=texts)
        rank = np.arange(len(entries), dtype=np.int64) - (np.cumsum(per_text) - per_text)[entry_text]
        return codes, NgramCounts(entry_text, codes[entries], count, rank, key_order), size

    def _codes_of(self, order: int, distinct: np.ndarray, extend: bool):
        """Codes of sorted distinct pair keys (known keys keep theirs, new ones get the next codes in key order), and
        the number of codes in use then."""
        known, known_codes = self._keys[order - 1], self._key_codes[order - 1]
        at = np.searchsorted(known, distinct)
        found = at < len(known)
        found[found] = known[at[found]] == distinct[found]
        codes = np.empty(len(distinct), dtype=np.int64)
        codes[found] = known_codes[at[found]]
        new = ~found
        base = self.sizes[order - 1]
        codes[new] = base + np.arange(int(new.sum()), dtype=np.int64)
        if extend and new.any():
            merged = np.concatenate([known, distinct[new]])
            by_key = np.argsort(merged, kind="stable")  # two sorted runs: a merge
            self._keys[order - 1] = merged[by_key]
            self._key_codes[order - 1] = np.concatenate([known_codes, codes[new]])[by_key]
            self.sizes[order - 1] = base + int(new.sum())
        return codes, base + int(new.sum())


def stable_argsort(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` of non-negative int64 keys, as a plain sort of ``key * n + index`` where
    that fits in 64 bits (several times faster)."""
    n = len(keys)
    if n and keys.min() >= 0 and int(keys.max()) < _INT64_MAX // n - 1:
        return np.sort(keys * n + np.arange(n, dtype=np.int64)) % n
    return np.argsort(keys, kind="stable")


def sorted_search(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``np.searchsorted(keys, queries)`` with the queries (>= -1) looked up in sorted order (much faster on long
    arrays than in their own order)."""
    by_query = stable_argsort(queries + 1)
    at = np.empty(len(queries), dtype=np.int64)
    at[by_query] = np.searchsorted(keys, queries[by_query])
    return at


class ReferenceNgrams:
    """Every image's references encoded once, for BLEU and CIDEr-D of any number of systems. ``ref_image[r]``:
    the image of flat reference r (references flattened image by image); ``by_code[k - 1] = (keys, entry)``: the
    k-gram entries of the references (indices into ``encoded.orders[k - 1]``) sorted by code, image, reference,
    with ``keys = code * images + image``; ``runs[k - 1]``: where its runs of equal keys start, then its length."""

    def __init__(self, references: Sequence[Sequence[str]], max_order: int = MAX_ORDER):
        self.refs_per_image = np.array([len(refs) for refs in references], dtype=np.int64)
        if len(self.refs_per_image) and self.refs_per_image.min() < 1:
            raise ValueError("every image needs at least one reference")
        self.images = len(references)
        self.ref_image = np.repeat(np.arange(self.images, dtype=np.int64), self.refs_per_image)
        self.ref_start = np.cumsum(self.refs_per_image) - self.refs_per_image
        self.codes = NgramCodes(max_order)
        self.encoded = self.codes.encode([ref for refs in references for ref in refs])
        self.by_code, self.runs = [], []
        for counts in self.encoded.orders:
            entry = counts.key_order  # the first texts encoded: by code, then reference (so image)
            keys = counts.code[entry] * self.images + self.ref_image[counts.text[entry]]
            self.by_code.append((keys, entry))
            self.runs.append(np.append(np.flatnonzero(np.append(True, keys[1:] != keys[:-1])) if len(keys) else
                                       np.zeros(0, dtype=np.int64), len(keys)))

    def encode(self, candidates: Sequence[str]) -> "CandidateNgrams":
        """One candidate per image, encoded with the references' codes (an n-gram no reference holds gets a new code,
        at or above ``encoded.sizes``), and where each candidate n-gram is among its image's references."""
        if len(candidates) != self.images:
            raise ValueError(f"{len(candidates)} candidates for {self.images} reference sets")
        encoded = self.codes.encode(candidates, extend=False)
        found = []
        for (keys, _), runs, counts, size in zip(self.by_code, self.runs, encoded.orders, self.encoded.sizes):
            query = np.where(counts.code < size, counts.code * self.images + counts.text, -1)
            lo = sorted_search(keys, query)
            run_end = np.append(np.repeat(runs[1:], np.diff(runs)), 0)
            found.append((lo, np.where(np.append(keys, -2)[lo] == query, run_end[lo], lo)))
        return CandidateNgrams(encoded, found)


@dataclass(frozen=True)
class CandidateNgrams:
    """Candidates encoded by :meth:`ReferenceNgrams.encode`. ``found[k - 1] = (lo, hi)``: entry e of
    ``encoded.orders[k - 1]`` is held by the image's references at ``by_code[k - 1]`` positions ``lo[e]:hi[e]``, one
    per reference that holds it (empty when none does)."""

    encoded: EncodedTexts
    found: List[Tuple[np.ndarray, np.ndarray]]
