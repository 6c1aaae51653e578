"""METEOR 1.5's word alignment of a test sentence with one reference, re-implemented for capeval.

Behaviour reproduced (Lavie & Agarwal 2007; Denkowski & Lavie 2011, 2014; details observed on ``meteor-1.5.jar``):

- Candidate matches come from four modules in order: exact (same Java string hash), stem (same hash of the
  Snowball stem, different words), synonym (a shared WordNet synset, directly or through the word's base form,
  different words) and paraphrase (a phrase of one side listed in the table with a phrase of the other side, both
  directions). Each line-2 (reference) position keeps its candidates in that order. Two identical sentences are
  matched by the exact module alone.
- A candidate that is its position's only one and whose words no other candidate covers is fixed up front.
- A left-to-right beam search over reference positions (beam 40) picks the others. Partial alignments are ranked
  by their weighted match count (exact 1, other modules 0.5, each side's ``length x weight`` truncated to an
  integer as it is added, so a one-word non-exact match weighs 0 and is taken only where it joins chunks), then
  fewer chunks, then a smaller distance, ties kept in insertion order. The distance the jar accumulates is
  reproduced as it is: when a path is extended, the offset ``|ref start - test start|`` of each considered
  candidate is added to the path being extended (so to the candidates considered after it and to the path that
  skips the position), not to the extension.
- The result's statistics: per module, matched content and function words of each side, and the chunk count.

The design (bit masks for used words, a linked list of chosen matches, sentence features prepared once) is
capeval's own; no METEOR code is copied or translated.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

EXACT, STEM, SYNONYM, PARAPHRASE = range(4)
MODULES = 4
DELTA = 0.75  # the weight of content words against function words (METEOR's 'en' parameters)
BEAM_SIZE = 40

# a candidate match: (ref start, ref length, test start, test length, module, search weight, test mask, ref mask,
# offset |ref start - test start|)
Match = Tuple[int, int, int, int, int, int, int, int, int]


class Sentence:
    """One side of an alignment, with every per-word feature the modules compare (position maps built on use)."""

    __slots__ = ("words", "hashes", "stems", "function", "ids", "phrases", "function_count", "word_weights",
                 "weighted_length", "_maps", "_grams", "_heads")

    def __init__(self, words: Tuple[str, ...], hashes: Tuple[int, ...], stems: Tuple[int, ...],
                 function: Tuple[bool, ...], ids: Tuple[int, ...],
                 phrases: Tuple[Tuple[int, int, Dict[int, Tuple[Tuple[int, Tuple[int, ...]], ...]]], ...]):
        self.words, self.hashes, self.stems, self.function = words, hashes, stems, function
        self.ids = ids  # paraphrase-table word ids (-1: not in the table)
        # its phrases in the paraphrase table: (start, length, paraphrases by the gram_key of their first one or two
        # word ids: (rank among the phrase's paraphrases, paraphrase word ids))
        self.phrases = phrases
        self.function_count = sum(function)
        # METEOR's weight of each word (content DELTA, function 1 - DELTA) and of the whole sentence
        self.word_weights = tuple((1.0 - DELTA) if f else DELTA for f in function)
        self.weighted_length = DELTA * (len(words) - self.function_count) + (1.0 - DELTA) * self.function_count
        self._maps = self._grams = self._heads = None

    def maps(self):
        """(hash -> positions, stem hash -> positions, word -> positions), built when the sentence is first
        aligned as the test side."""
        if self._maps is None:
            hashes: Dict[int, List[int]] = {}
            stems: Dict[int, List[int]] = {}
            words: Dict[str, List[int]] = {}
            for i, (h, s, w) in enumerate(zip(self.hashes, self.stems, self.words)):
                hashes.setdefault(h, []).append(i)
                stems.setdefault(s, []).append(i)
                words.setdefault(w, []).append(i)
            self._maps = (hashes, stems, words)
        return self._maps

    def grams(self) -> Dict[int, List[int]]:
        """The :func:`gram_key` of its paraphrase-table word-id unigrams and bigrams -> their positions, built when
        first aligned."""
        if self._grams is None:
            ids = self.ids
            grams: Dict[int, List[int]] = {}
            for k, (word, following) in enumerate(zip(ids, (*ids[1:], -1))):
                if word >= 0:
                    grams.setdefault(word, []).append(k)
                    if following >= 0:
                        grams.setdefault((word + 1) << 32 | following, []).append(k)
            self._grams = grams
        return self._grams

    def heads(self) -> FrozenSet[int]:
        """The :func:`gram_key` of every paraphrase of its phrases, built when first aligned."""
        if self._heads is None:
            self._heads = frozenset().union(*(groups for _, _, groups in self.phrases))
        return self._heads


def gram_key(ids: Tuple[int, ...]) -> int:
    """One int for the first one or two (non-negative, below 2 ** 32) word ids of ``ids``: cheaper to hash than a
    tuple."""
    return ids[0] if len(ids) == 1 else (ids[0] + 1) << 32 | ids[1]


def _match(s2: int, l2: int, s1: int, l1: int, module: int) -> Match:
    weight = l1 + l2 if module == EXACT else l1 // 2 + l2 // 2
    return (s2, l2, s1, l1, module, weight, ((1 << l1) - 1) << s1, ((1 << l2) - 1) << s2, abs(s2 - s1))


def candidate_matches(test: Sentence, ref: Sentence, synonyms: Dict[str, Set[str]]) -> List[List[Match]]:
    """Every module's candidate matches, listed under their reference start position in the jar's order.
    ``synonyms``: word -> the words sharing a WordNet synset with it (directly or through base forms) whose Java
    hash differs."""
    n1, n2 = len(test.words), len(ref.words)
    hash_positions, stem_positions, word_positions = test.maps()
    test_hashes, ref_hashes = test.hashes, ref.hashes
    matches: List[List[Match]] = [[] for _ in range(n2)]
    if n1 == n2 and test_hashes == ref_hashes:
        for j, h in enumerate(ref_hashes):
            matches[j] = [(j, 1, i, 1, EXACT, 2, 1 << i, 1 << j, abs(j - i)) for i in hash_positions[h]]
        return matches
    no_positions = ()
    for j, (h, s, word, row) in enumerate(zip(ref_hashes, ref.stems, ref.words, matches)):
        # one position's candidates in module order (each _match, inlined)
        for i in hash_positions.get(h, no_positions):
            row.append((j, 1, i, 1, EXACT, 2, 1 << i, 1 << j, abs(j - i)))
        for i in stem_positions.get(s, no_positions):
            if test_hashes[i] != h:
                row.append((j, 1, i, 1, STEM, 0, 1 << i, 1 << j, abs(j - i)))
        partners = synonyms.get(word)
        if partners:
            common = partners.intersection(word_positions)
            if common:
                found = [i for other in common for i in word_positions[other]]
                found.sort()
                row += [(j, 1, i, 1, SYNONYM, 0, 1 << i, 1 << j, abs(j - i)) for i in found]
    if ref.phrases:
        for j, length, _, i, size in _phrases_in(ref.phrases, test.grams(), test.ids):
            matches[j].append(_match(j, length, i, size, PARAPHRASE))
    if test.phrases:
        for i, length, _, j, size in _phrases_in(test.phrases, _gram_hits(test.heads(), ref.ids), ref.ids):
            matches[j].append(_match(j, size, i, length, PARAPHRASE))
    return matches


def _gram_hits(heads: FrozenSet[int], ids: Tuple[int, ...]) -> Dict[int, List[int]]:
    """:meth:`Sentence.grams` of a sentence with word ids ``ids``, only the keys in ``heads`` (built for one use)."""
    hits: Dict[int, List[int]] = {}
    for k, (word, following) in enumerate(zip(ids, (*ids[1:], -1))):
        if word >= 0:
            if word in heads:
                hits.setdefault(word, []).append(k)
            if following >= 0:
                key = (word + 1) << 32 | following
                if key in heads:
                    hits.setdefault(key, []).append(k)
    return hits


def _phrases_in(phrases, gram_positions: Dict[int, List[int]], ids: Tuple[int, ...]) -> List:
    """Where the paraphrases of these phrases occur in the other sentence (its word ids ``ids``, the positions of
    its gram keys ``gram_positions``, or of those among the phrases' paraphrases): (phrase start, phrase length,
    rank, position, paraphrase length), in the jar's order: by phrase start, length, rank, position."""
    if not gram_positions:
        return []
    grams = gram_positions.keys()
    found = []
    for start, length, groups in phrases:
        for head in groups.keys() & grams:
            positions = gram_positions[head]
            for rank, paraphrase in groups[head]:
                size = len(paraphrase)
                for p in positions:
                    if size <= 2 or ids[p:p + size] == paraphrase:
                        found.append((start, length, rank, p, size))
    found.sort()
    return found


def _fixed_matches(matches: List[List[Match]], n1: int, n2: int) -> List[Optional[Match]]:
    """The matches that are their position's only candidate and share no word with another candidate."""
    cover1, cover2 = [0] * n1, [0] * n2
    for candidates in matches:
        for s2, l2, s1, l1, _, _, _, _, _ in candidates:
            if l1 == 1 and l2 == 1:
                cover1[s1] += 1
                cover2[s2] += 1
                continue
            for k in range(s1, s1 + l1):
                cover1[k] += 1
            for k in range(s2, s2 + l2):
                cover2[k] += 1
    fixed: List[Optional[Match]] = [None] * n2
    for j, candidates in enumerate(matches):
        if len(candidates) == 1:
            s2, l2, s1, l1 = candidates[0][:4]
            if all(cover2[k] == 1 for k in range(s2, s2 + l2)) and all(cover1[k] == 1 for k in range(s1, s1 + l1)):
                fixed[j] = candidates[0]
    return fixed


def _walk(chosen: Sequence[Optional[Match]], stop: int) -> Tuple[List[Match], int, int, int]:
    """Walk the reference positions from 0 while before ``stop``, a match held at its start position covering its
    span: the matches met (in order), the chunks closed on the way (at an unmatched position, or where a match does
    not continue the test words of the one before), the end of the open chunk's last test match (-1 when none is
    open) and the position reached."""
    met: List[Match] = []
    chunks, last, j = 0, -1, 0
    while j < stop:
        m = chosen[j]
        if m is None:
            if last != -1:
                chunks += 1
                last = -1
            j += 1
        else:
            if last != -1 and m[2] != last:
                chunks += 1
            met.append(m)
            j, last = m[0] + m[1], m[2] + m[3]
    return met, chunks, last, j


_RANK = itemgetter(0, 1, 2)  # (-weighted matches, chunks, distance): the jar's order of partial alignments


def _search(matches: List[List[Match]], fixed: List[Optional[Match]], n2: int) -> List[Optional[Match]]:
    """The jar's beam search; returns the chosen match at each reference start position."""
    chosen = list(fixed)
    open_positions = [j for j in range(n2) if fixed[j] is None and matches[j]]
    if not open_positions:
        return chosen
    # a path: (-weighted matches, chunks, distance, next position, end of the last test match or -1, used test
    # words, used ref words, chosen matches as a linked list); the positions before the first open one are the
    # same for every path
    neg, distance, used1, used2 = 0, 0, 0, 0
    for m in fixed:
        if m is not None:
            used1 |= m[6]
            used2 |= m[7]
    first = open_positions[0]
    met, chunks, last, idx = _walk(fixed, first)
    for m in met:
        neg -= m[5]
        distance += m[8]
    # below, a path's "next position" is only kept while it lies inside a chosen match (> current): a path that
    # skips a position would move it to current + 1, which the loop's next step is anyway
    paths = [(neg, chunks, distance, idx, last, used1, used2, None)]
    unsorted = False
    for current in range(first, n2):
        if unsorted:
            paths.sort(key=_RANK)
        if len(paths) > BEAM_SIZE:
            del paths[BEAM_SIZE:]
        candidates = matches[current]
        m = fixed[current]
        extended = []
        unsorted = False
        if m is not None:
            weight, offset, end, last_end = m[5], m[8], m[0] + m[1], m[2] + m[3]
            for path in paths:
                neg, chunks, distance, idx, last, used1, used2, links = path
                if idx > current:  # inside a chosen match
                    extended.append(path)
                else:
                    extended.append((neg - weight, chunks + (last != -1 and m[2] != last), distance + offset, end,
                                     last_end, used1, used2, links))
                    unsorted = True
        elif not candidates:
            for path in paths:
                if path[4] == -1 or path[3] > current:
                    extended.append(path)
                else:
                    extended.append((path[0], path[1] + 1, path[2], path[3], -1, path[5], path[6], path[7]))
                    unsorted = True
        else:
            unsorted = True
            for path in paths:
                neg, chunks, distance, idx, last, used1, used2, links = path
                if idx > current:
                    extended.append(path)
                    continue
                for m in candidates:
                    if used1 & m[6] or used2 & m[7]:
                        continue
                    extended.append((neg - m[5], chunks + (last != -1 and m[2] != last), distance, m[0] + m[1],
                                     m[2] + m[3], used1 | m[6], used2 | m[7], (m, links)))
                    distance += m[8]  # the jar adds it to the path being extended
                extended.append((neg, chunks + (last != -1), distance, idx, -1, used1, used2, links))
        paths = extended
    if unsorted:
        paths.sort(key=_RANK)
    closed = [(neg, chunks + (last != -1), distance, idx, last, u1, u2, links)
              for neg, chunks, distance, idx, last, u1, u2, links in paths[:BEAM_SIZE]]
    closed = [min(closed, key=_RANK)]  # the first of the best, as a stable sort puts it
    link = closed[0][7]
    while link is not None:
        m, link = link
        chosen[m[0]] = m
    return chosen


def align_statistics(test: Sentence, ref: Sentence, matches: List[List[Match]]) -> Tuple[int, ...]:
    """The jar's 23 segment statistics of the alignment of ``test`` with ``ref`` from these candidate matches:
    lengths, function-word counts, per module (test content, ref content, test function, ref function) matched
    words, chunks, matched words per side."""
    n1, n2 = len(test.words), len(ref.words)
    chosen = _search(matches, _fixed_matches(matches, n1, n2), n2)
    per_module = [0] * (4 * MODULES)
    matched1 = matched2 = 0
    met, chunks, last_end, _ = _walk(chosen, n2)
    for m in met:
        s2, l2, s1, l1, module = m[:5]
        for k in range(s1, s1 + l1):
            per_module[4 * module + (2 if test.function[k] else 0)] += 1
        for k in range(s2, s2 + l2):
            per_module[4 * module + (3 if ref.function[k] else 1)] += 1
        matched1 += l1
        matched2 += l2
    if last_end != -1:
        chunks += 1
    return (n1, n2, test.function_count, ref.function_count, *per_module, chunks, matched1, matched2)
