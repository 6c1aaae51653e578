"""CIDEr-D (pycocoevalcap semantics) with document frequencies fixed in advance instead of taken from the
scored corpus. With the scored corpus's own reference sets as the IDF corpus it equals pycocoevalcap's CIDEr.

Inputs are already tokenised strings (PTB tokenisation, space separated), as pycocoevalcap expects.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

Ngram = Tuple[str, ...]


def ngram_counts(sentence: str, n: int = 4) -> Counter:
    """Counts of every 1..n-gram of the whitespace-split sentence."""
    words = sentence.split()
    return Counter(tuple(words[i:i + k]) for k in range(1, n + 1) for i in range(len(words) - k + 1))


@dataclass(frozen=True)
class DocumentFrequencies:
    """``counts[g]`` = number of reference sets (documents) holding n-gram ``g``; ``num_documents`` sets in all."""

    counts: Dict[Ngram, int]
    num_documents: int

    @classmethod
    def from_reference_sets(cls, reference_sets: Sequence[Sequence[str]], n: int = 4) -> "DocumentFrequencies":
        counts: Counter = Counter()
        for references in reference_sets:
            counts.update({g for reference in references for g in ngram_counts(reference, n)})
        return cls(dict(counts), len(reference_sets))

    def to_json(self) -> Dict:
        return {"num_documents": self.num_documents, "counts": {" ".join(g): c for g, c in sorted(self.counts.items())}}

    def __repr__(self) -> str:
        """The table by content, n-grams sorted: equal tables read the same (provenance digests it), whatever order
        they were counted or read in."""
        return f"DocumentFrequencies({json.dumps(self.to_json(), ensure_ascii=False)})"

    @classmethod
    def from_json(cls, data: Dict) -> "DocumentFrequencies":
        return cls({tuple(g.split(" ")): int(c) for g, c in data["counts"].items()}, int(data["num_documents"]))


def _tfidf(counts: Counter, df: DocumentFrequencies, n: int):
    log_docs = math.log(float(df.num_documents))
    vectors: List[Dict[Ngram, float]] = [{} for _ in range(n)]
    norms = [0.0] * n
    bigrams = 0  # pycocoevalcap's "length" counts bigrams (its index 1), kept for fidelity
    for gram, tf in counts.items():
        order = len(gram) - 1
        value = float(tf) * (log_docs - math.log(max(1.0, float(df.counts.get(gram, 0)))))
        vectors[order][gram] = value
        norms[order] += value * value
        if order == 1:
            bigrams += tf
    return vectors, [math.sqrt(x) for x in norms], bigrams


def cider_d(candidate: str, references: Sequence[str], df: DocumentFrequencies, n: int = 4,
            sigma: float = 6.0) -> float:
    """CIDEr-D of one tokenised candidate against its tokenised references: clipped tf-idf cosine per n-gram
    order with a Gaussian length penalty, averaged over orders and references, times 10."""
    if not references:
        raise ValueError("CIDEr-D needs at least one reference")
    cand_vec, cand_norm, cand_len = _tfidf(ngram_counts(candidate, n), df, n)
    total = [0.0] * n
    for reference in references:
        ref_vec, ref_norm, ref_len = _tfidf(ngram_counts(reference, n), df, n)
        penalty = math.e ** (-(float(cand_len - ref_len) ** 2) / (2 * sigma ** 2))
        for order in range(n):
            value = sum(min(v, ref_vec[order].get(g, 0.0)) * ref_vec[order].get(g, 0.0)
                        for g, v in cand_vec[order].items())
            if cand_norm[order] != 0 and ref_norm[order] != 0:
                value /= cand_norm[order] * ref_norm[order]
            total[order] += value * penalty
    return sum(total) / n / len(references) * 10.0
