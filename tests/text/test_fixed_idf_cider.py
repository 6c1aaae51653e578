"""The fixed-IDF CIDEr-D is pycocoevalcap's CIDEr-D with the document frequencies of another corpus: equal (==) to
pycocoevalcap's own ``CiderScorer`` given that table, on candidates whose n-grams the table holds and lacks, the
references' and others; and with the scored references as the table, equal to the corpus CIDEr-D."""

from collections import defaultdict

import numpy as np
from pycocoevalcap.cider.cider_scorer import CiderScorer

from capeval.core.scoring import load_scorer
from capeval.functional.fixed_idf_cider import DocumentFrequencies
from capeval.text.cider import CiderReferences
from capeval.text.fixed_idf_cider import build_document_frequencies, ptb_tokenize, tokenize_reference_sets

IDF_CORPUS = [["a dog runs on the grass", "a brown dog plays in a park"], ["two men ride bikes down a street"],
              ["a woman holds an umbrella in the rain", "a person with an umbrella"], ["a cat sleeps on a red sofa"],
              ["a man rides a red bike", "a cyclist on a road"], ["children play football on the grass"]] * 3
CANDIDATES = ["A dog runs on the grass.", "a man on a red bike rides down the street", "a zebra eats",
              "a dog a dog a dog"]
REFERENCES = [["A dog running on grass", "the dog runs!"], ["a man riding a bike", "a red bicycle", "man"],
              ["two zebras grazing"], ["a dog with a man on the grass", "dogs"]]


def _pycocoevalcap_with_table(candidates, references, table: DocumentFrequencies):
    """pycocoevalcap 1.2's CiderScorer with ``table`` as its document frequencies: its corpus size
    (``len(crefs)``) made the table's by reference sets it never scores (``zip`` stops at the candidates)."""
    scorer = CiderScorer(n=4, sigma=6.0)
    for candidate, refs in zip(candidates, references):
        scorer.cook_append(candidate, refs)
    scorer.crefs += [[]] * (table.num_documents - len(references))
    scorer.document_frequency = defaultdict(float, {gram: float(count) for gram, count in table.counts.items()})
    return scorer.compute_cider()


def test_a_fixed_table_gives_pycocoevalcaps_cider_with_that_table():
    table = build_document_frequencies(IDF_CORPUS)
    expected = _pycocoevalcap_with_table(ptb_tokenize(CANDIDATES), tokenize_reference_sets(REFERENCES), table)
    result = load_scorer("cider_fixed_idf", idf=table).score(CANDIDATES, references=REFERENCES)
    assert result["cider_per_sample"] == [float(v) for v in expected]
    assert all(0 < v for v in expected[:2]) and expected[2] == 0.0  # no n-gram of "a zebra eats" in its references


def test_the_scored_references_as_the_table_give_the_corpus_cider():
    candidates, references = ptb_tokenize(CANDIDATES), tokenize_reference_sets(REFERENCES)
    fixed = CiderReferences(references, DocumentFrequencies.from_reference_sets(references)).scores(candidates)
    assert np.array_equal(fixed, CiderReferences(references).scores(candidates))
