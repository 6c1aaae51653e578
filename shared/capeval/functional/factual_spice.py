"""FactualSceneGraph 0.7.3's SPICE and Soft-SPICE (``spice_factual``, ``soft_spice``) on parsed scene graphs.

Not the SPICE jar: the graphs come from the FACTUAL parser and the matching is the package's own. A caption and its
references enter as FACTUAL graph texts (``"( car , is , red ) , ( car , on , street )"``, the parser's outputs
through :func:`capeval.functional.factual_graph.graph_text`): the candidate's and the references' texts are each
pooled into one set of segments (facts), as the package's ``get_seg_list`` does.

**SPICE** (:func:`spice_factual`, the package's ``Evaluator.evaluate(method="spice")``): each segment gives
tuples — an object ``(o)``, an attribute ``(o, a)`` plus ``(o)``, a relation ``(s, r, o)`` plus ``(s)`` and
``(o)``, each tuple once. Candidate tuples are matched to reference tuples greedily: first equal tuples, then, with
``synonym_match``, tuples whose every position shares a synonym set. With ``merge_tuples_synonyms`` (off by
default in ``Evaluator``) synonymous objects, attributes and relations are merged first. P = matches / candidate
tuples, R = matches / reference tuples (0 when there are none), F1 their harmonic mean (0 when both are 0). The
synonym sets come from SPICE's WordNet-derived dictionary (the ``english.synsets`` and ``english.exceptions`` files
the package ships), injected as a :class:`SpiceSynonyms`.

**Soft-SPICE** (:func:`soft_spice`, ``method="soft_spice"``): each segment gives phrases — an object ``"o"``, an
attribute ``"a o"``, a relation ``"s r o"`` — and the score is the mean over the candidate's phrases of the best
cosine similarity with a reference phrase (``bidirectional``: the harmonic mean of that precision and the
reference-side recall, each mapped from [-1, 1] to [0, 1]). ``encode(texts)`` is injected (all-mpnet-base-v2 in
the package's examples).

Scores are in [0, 1]; the package multiplies them by 100.

**Order.** The package iterates a Python ``set`` of segments, then sorts the tuples by their words: its result
depends on ``PYTHONHASHSEED`` only through tuples whose words join to the same string (their greedy order, and
which one is kept when an object and a tuple share that string). Here segments are taken in sorted order before
that stable sort, so the order is always fixed.

**Empty graph text.** As in the package, an empty graph text is one empty segment: one object tuple ``("",)``
and one phrase ``""``. So an empty candidate against an empty reference scores SPICE 1, and the empty phrase is
embedded like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Callable, Dict, FrozenSet, List, Mapping, Sequence, Set, Tuple

import numpy as np

from capeval.functional.factual_graph import spaced_graph

ATTRIBUTE_PREDICATE = "is"
Encode = Callable[[Sequence[str]], np.ndarray]

# SPICE's morphological fallback (``SynonymDictionary.morph``): suffix -> ending, tried in this order
_SUFFIXES = (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
             ("ies", "y"), ("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
             ("ing", ""), ("er", ""), ("est", ""), ("er", "e"), ("est", "e"))


@dataclass(frozen=True)
class SpiceSynonyms:
    """SPICE's synonym dictionary: ``synsets`` (word -> synset ids, ``english.synsets``) and ``bases`` (inflected
    form -> base forms, ``english.exceptions``)."""

    synsets: Mapping[str, FrozenSet[int]]
    bases: Mapping[str, Tuple[str, ...]]

    def _stem(self, word: str) -> str:
        if word.endswith("ful"):
            return word[:-3] if word[:-3] in self.synsets else word
        if word.endswith("ss") or len(word) <= 2:
            return word
        for suffix, ending in _SUFFIXES:
            if word.endswith(suffix) and word[:-len(suffix)] + ending in self.synsets:
                return word[:-len(suffix)] + ending
        return word

    def of(self, word: str) -> FrozenSet[int]:
        """The synsets of a word or phrase (lower-cased, spaces as ``_``): its own and those of its base forms
        (listed exceptions, else the suffix rules)."""
        word = "_".join(word.strip().lower().split())
        bases = self.bases.get(word) or (self._stem(word),)
        return frozenset(self.synsets.get(word, ())).union(*(self.synsets.get(base, ()) for base in bases))


def read_spice_synonyms(exceptions_text: str, synsets_text: str) -> SpiceSynonyms:
    """The dictionary from the two files' text: line pairs ``base`` / ``form form ...`` and ``word`` / ``id id ...``."""
    bases: Dict[str, List[str]] = {}
    lines = exceptions_text.splitlines()
    for base, forms in zip(lines[0::2], lines[1::2]):
        for form in forms.split():
            bases.setdefault(form, []).append(base.strip())
    lines = synsets_text.splitlines()
    synsets = {word.strip(): frozenset(map(int, ids.split())) for word, ids in zip(lines[0::2], lines[1::2])}
    return SpiceSynonyms(synsets, {form: tuple(b) for form, b in bases.items()})


def graph_segments(graph_texts: Sequence[str]) -> Tuple[str, ...]:
    """The facts of some graph texts, pooled without duplicates, sorted: ``"car , is , red"``."""
    return tuple(sorted({segment.strip("()").strip()
                         for text in graph_texts for segment in spaced_graph(text).split(") , (")}))


def _fields(segment: str) -> List[str]:
    return [field.strip() for field in segment.split(",")]


def spice_tuples(segments: Sequence[str]) -> List[List[Set[str]]]:
    """The package's tuples of some segments (each position a set of words), in matching order."""
    tuples: List[List[Set[str]]] = []
    seen: Set[str] = set()

    def add(key: str, parts: Sequence[str]) -> None:
        if key not in seen:
            seen.add(key)
            tuples.append([{part} for part in parts])

    for fields in map(_fields, segments):
        if len(fields) == 1:
            add(fields[0], fields)
        elif len(fields) == 2 or (len(fields) == 3 and fields[1] == ATTRIBUTE_PREDICATE):
            add(f"{fields[0]} {fields[-1]}", (fields[0], fields[-1]))
            add(fields[0], fields[:1])
        else:
            relation = " ".join(fields[1:-1])
            add(f"{fields[0]} {relation} {fields[-1]}", (fields[0], relation, fields[-1]))
            add(fields[0], fields[:1])
            add(fields[-1], fields[-1:])
    return sorted(tuples, key=lambda t: " ".join(" ".join(sorted(words)) for words in t))


def _synsets(words: AbstractSet[str], synonyms: SpiceSynonyms) -> Set[int]:
    return set().union(*(synonyms.of(word) for word in words))


def _similar(a: Sequence[AbstractSet[str]], b: Sequence[AbstractSet[str]], synonyms: SpiceSynonyms) -> bool:
    return len(a) == len(b) and all(_synsets(x, synonyms) & _synsets(y, synonyms) for x, y in zip(a, b))


def _merge_position(tuples: List[List[Set[str]]], position: int, length: int, synonyms: SpiceSynonyms,
                    groups: List[Set[str]], *, create: bool) -> None:
    """The package's ``merge_elements_by_synsets`` on ``groups`` (in place), sets shared by reference as there: a
    new group (``create``) is the tuple's own set, and a tuple's set grows by its first synonymous group."""
    for t in (t for t in tuples if len(t) == length):
        i = next((i for i, group in enumerate(groups)
                  if _synsets(t[position], synonyms) & _synsets(group, synonyms)), None)
        if i is not None:
            groups[i] = groups[i] | t[position]
        elif create:
            groups.append(t[position])
    for t in (t for t in tuples if len(t) == length):
        group = next((g for g in groups if _synsets(t[position], synonyms) & _synsets(g, synonyms)), None)
        if group is not None:
            t[position].update(group)


def merge_synonymous_tuples(tuples: List[List[Set[str]]], synonyms: SpiceSynonyms) -> List[List[Set[str]]]:
    """``merge_tuples_synonyms=True``: merge synonymous objects (shared by objects, subjects and relation objects),
    attributes and relations, then tuples whose every position is synonymous."""
    objects: List[Set[str]] = []
    _merge_position(tuples, 0, 1, synonyms, objects, create=True)
    for position in (0, 2):
        _merge_position(tuples, position, 3, synonyms, objects, create=False)
    _merge_position(tuples, 1, 2, synonyms, [], create=True)
    _merge_position(tuples, 1, 3, synonyms, [], create=True)
    merged: List[List[Set[str]]] = []
    for t in tuples:
        i = next((i for i, m in enumerate(merged) if _similar(t, m, synonyms)), None)
        if i is None:
            merged.append(t)
        else:
            merged[i] = [a | b for a, b in zip(t, merged[i])]
    return merged


@dataclass(frozen=True)
class SpiceResult:
    """``spice_factual`` of one caption: precision, recall, F1 (the score) over tuples, and the tuple counts."""

    precision: float
    recall: float
    f1: float
    matches: int
    candidate_tuples: int
    reference_tuples: int


def spice_factual(candidate_graphs: Sequence[str], reference_graphs: Sequence[str], synonyms: SpiceSynonyms, *,
                  synonym_match: bool = True, merge_tuples_synonyms: bool = False) -> SpiceResult:
    """FactualSceneGraph's SPICE of a candidate's graph texts against its references' graph texts."""
    candidate = spice_tuples(graph_segments(candidate_graphs))
    reference = spice_tuples(graph_segments(reference_graphs))
    if merge_tuples_synonyms:
        candidate, reference = (merge_synonymous_tuples(t, synonyms) for t in (candidate, reference))
    matched_candidates: Set[int] = set()
    matched_references: Set[int] = set()

    def match(same: Callable[[Sequence[AbstractSet[str]], Sequence[AbstractSet[str]]], bool]) -> None:
        for i, c in enumerate(candidate):
            if i in matched_candidates:
                continue
            j = next((j for j, r in enumerate(reference) if j not in matched_references and same(c, r)), None)
            if j is not None:
                matched_candidates.add(i)
                matched_references.add(j)

    match(lambda c, r: len(c) == len(r) and all(x & y for x, y in zip(c, r)))
    if synonym_match:
        match(lambda c, r: _similar(c, r, synonyms))
    matches = len(matched_references)
    precision = matches / len(candidate) if candidate else 0.0
    recall = matches / len(reference) if reference else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return SpiceResult(precision, recall, f1, matches, len(candidate), len(reference))


def graph_phrases(graph_texts: Sequence[str]) -> Tuple[str, ...]:
    """Soft-SPICE's phrases of some graph texts, without duplicates, sorted."""
    phrases: Set[str] = set()
    for fields in map(_fields, graph_segments(graph_texts)):
        phrases.add(fields[0])
        if len(fields) == 2:
            phrases.add(f"{fields[1]} {fields[0]}")
        elif len(fields) >= 3 and fields[1] == ATTRIBUTE_PREDICATE:
            phrases.add(f"{fields[2]} {fields[0]}")
        elif len(fields) >= 3:
            phrases.update((f"{fields[0]} {' '.join(fields[1:-1])} {fields[-1]}", fields[-1]))
    return tuple(sorted(phrases))


def soft_spice(candidate_graphs: Sequence[str], reference_graphs: Sequence[str], encode: Encode, *,
               bidirectional: bool = False) -> float:
    """FactualSceneGraph's Soft-SPICE of a candidate's graph texts against its references' graph texts."""
    candidate, reference = graph_phrases(candidate_graphs), graph_phrases(reference_graphs)
    features = np.asarray(encode(list(candidate) + list(reference)), dtype=np.float64)
    features = features / np.sqrt(np.sum(features ** 2, axis=1, keepdims=True))
    similarity = features[:len(candidate)] @ features[len(candidate):].T
    precision = similarity.max(axis=1)
    if not bidirectional:
        return float(precision.mean())
    precision, recall = float(((precision + 1) / 2).mean()), float(((similarity.max(axis=0) + 1) / 2).mean())
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
