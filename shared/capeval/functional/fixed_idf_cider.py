"""The document frequencies of the fixed-IDF CIDEr-D: how many reference sets (documents) of a corpus hold each
1..4-gram, counted once and then used in place of the scored corpus's own (:class:`capeval.text.cider.CiderReferences`
computes the score). With the scored corpus's own reference sets as the IDF corpus it equals pycocoevalcap's CIDEr-D.

Texts are already tokenised strings (PTB tokenisation, space separated), as pycocoevalcap expects.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

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

    def of_texts(self, texts: Sequence[str], n: int = 4) -> List[np.ndarray]:
        """For each order 1..n, the document frequency of every distinct n-gram of each text (0 for one the table
        lacks): text by text, a text's n-grams in the order of their first occurrence."""
        found: List[List[int]] = [[] for _ in range(n)]
        for text in texts:
            words = text.split()
            for k in range(1, n + 1):
                grams = dict.fromkeys(tuple(words[i:i + k]) for i in range(len(words) - k + 1))
                found[k - 1].extend(self.counts.get(gram, 0) for gram in grams)
        return [np.array(frequencies, dtype=np.int64) for frequencies in found]
