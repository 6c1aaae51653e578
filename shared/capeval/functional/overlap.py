"""Exact and fuzzy noun/verb overlap (EnsembEval, Berger et al. 2025) on parsed tokens.

Tokens are anything with ``.text`` and ``.pos_`` (spaCy tokens); fuzzy overlap also needs ``.similarity``.
"""

from __future__ import annotations

from typing import Dict, Iterable, Sequence

NOUN_TAGS = ("NOUN", "PROPN")
VERB_TAGS = ("VERB",)
EPSILON = 1e-8


def unique_tokens(tokens: Iterable, tags: Sequence[str]) -> Dict[str, object]:
    """First token of each distinct (case-sensitive) text whose POS is in ``tags``."""
    found: Dict[str, object] = {}
    for token in tokens:
        if token.pos_ in tags and token.text not in found:
            found[token.text] = token
    return found


def exact_overlap(candidate: Dict[str, object], reference: Dict[str, object]) -> float:
    """|cand ∩ ref| / (|ref| + 1e-8): a recall of the reference words."""
    return len(set(candidate) & set(reference)) / (len(reference) + EPSILON)


def fuzzy_overlap(candidate: Dict[str, object], reference: Dict[str, object]) -> float:
    """Mean over reference words of the best similarity to any candidate word (0 without candidates)."""
    total = 0.0
    for ref_token in reference.values():
        if candidate:
            total += max(float(ref_token.similarity(c)) for c in candidate.values())
    return total / (len(reference) + EPSILON)
