"""capeval's pure-Python BLEU-1..4, ROUGE-L and CIDEr-D (#35) equal (==) to pycocoevalcap 1.2's ``Bleu(4)``,
``Rouge()`` and ``Cider()`` on the same tokenized input: per image and corpus, and BLEU's per-image statistics equal
to pycocoevalcap's ``cook_test`` counts. Real data (Flickr8k references with Expert and CrowdFlower candidates,
Composite with its references and with LLaVA's long captions, tokenized by pycocoevalcap's PTBTokenizer) and
adversarial corpora (empty and one-word candidates, repeated words, candidates longer than every reference, references
of 1 to 120 tokens, unequal numbers of references, odd whitespace, unicode)."""

import contextlib
import io

import numpy as np
import pandas as pd
import pytest

from capeval.text.bleu import BleuReferences, bleu_from_statistics, bleu_scores
from capeval.text.cider import CiderReferences
from capeval.text.coco import OVERLAP_METRICS, OverlapReferences
from capeval.text.ngrams import ReferenceNgrams
from capeval.text.rouge import RougeReferences

COMPOSITE_IMAGES = 2000


def _tokenize(blocks):
    """pycocoevalcap's PTBTokenizer over every text of ``blocks`` (lists of texts) in one call."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    keyed = {(b, i): [{"caption": text}] for b, block in enumerate(blocks) for i, text in enumerate(block)}
    with contextlib.redirect_stdout(io.StringIO()):
        tokenized = PTBTokenizer().tokenize(keyed)
    return [[tokenized[(b, i)][0] for i in range(len(block))] for b, block in enumerate(blocks)]


def _corpus(references, systems):
    """Tokenized references (one list per image) and systems (one caption per image each)."""
    flat = [r for refs in references for r in refs]
    tokenized = _tokenize([flat, *systems])
    refs, start = [], 0
    for group in references:
        refs.append(tokenized[0][start:start + len(group)])
        start += len(group)
    return refs, tokenized[1:]


@pytest.fixture(scope="module")
def flickr8k(shared_data):
    """The 1,000 Flickr8k images rated in both Expert and CrowdFlower (their 5 captions as references); one system per
    annotation file: each image's first rated candidate caption."""
    root = shared_data / "benchmarks/flickr8k"
    captions = {}
    for line in (root / "Flickr8k.token.txt").read_text(encoding="utf-8").splitlines():
        caption_id, text = line.split("\t", 1)
        captions[caption_id] = text
    refs_of = {}
    for caption_id, text in captions.items():
        refs_of.setdefault(caption_id.split("#")[0], []).append(text)
    firsts = []
    for name in ("ExpertAnnotations.txt", "CrowdFlowerAnnotations.txt"):
        first = {}
        for line in (root / name).read_text().splitlines():
            image, caption_id = line.split("\t")[:2]
            first.setdefault(image, captions[caption_id])
        firsts.append(first)
    images = [image for image in firsts[0] if image in firsts[1]]
    assert len(images) == 1000
    return _corpus([refs_of[i] for i in images], [[first[i] for i in images] for first in firsts])


@pytest.fixture(scope="module")
def composite(shared_data):
    """Composite's first 2,000 images (their references); systems: each image's first candidate, and LLaVA-1.5's
    long caption (often more than 64 tokens: many steps of the bit-parallel LCS)."""
    rows = pd.read_parquet(shared_data / "benchmarks/composite/composite_candidates_refs_ratings.parquet")
    rows = rows.drop_duplicates("image_path").head(COMPOSITE_IMAGES)
    assert len(rows) == COMPOSITE_IMAGES
    llava = [next(iter(c.values())) for c in rows["caption"]]
    return _corpus([list(r) for r in rows["references"]], [list(rows["candidate"]), llava])


def _pycocoevalcap(references, candidates):
    """pycocoevalcap's own values: metric -> (corpus, per-image list); BLEU-n as bleu_n."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    gts = {i: list(refs) for i, refs in enumerate(references)}
    res = {i: [c] for i, c in enumerate(candidates)}
    with contextlib.redirect_stdout(io.StringIO()):
        bleu, bleu_per_image = Bleu(4).compute_score(gts, res, verbose=0)
    values = {f"bleu_{n + 1}": (bleu[n], list(bleu_per_image[n])) for n in range(4)}
    for key, scorer in (("rouge_l", Rouge()), ("cider", Cider())):
        corpus, per_image = scorer.compute_score(gts, res)
        values[key] = (corpus, list(per_image))
    return values


def _pycocoevalcap_statistics(references, candidates):
    from pycocoevalcap.bleu.bleu_scorer import cook_refs, cook_test

    out = []
    for refs, candidate in zip(references, candidates):
        comps = cook_test(candidate, cook_refs(refs), eff="closest")
        out.append([comps["testlen"], comps["reflen"], *comps["guess"], *comps["correct"]])
    return out


def _assert_equal(references, systems):
    """Every system: capeval's metric modules alone and the shared group path == pycocoevalcap, bit for bit."""
    shared = OverlapReferences(references, OVERLAP_METRICS)
    bleu_refs, rouge_refs, cider_refs = BleuReferences(references), RougeReferences(references), \
        CiderReferences(references)
    for s, candidates in enumerate(systems):
        expected = _pycocoevalcap(references, candidates)
        stats = bleu_refs.statistics(candidates)
        assert stats.tolist() == _pycocoevalcap_statistics(references, candidates), s
        per_image = [bleu_scores(row) for row in stats.tolist()]
        totals = stats.sum(axis=0).tolist()
        for n in range(4):
            corpus, expected_per_image = expected[f"bleu_{n + 1}"]
            assert bleu_from_statistics(totals, n + 1) == corpus, (s, n)
            assert [scores[n] for scores in per_image] == expected_per_image, (s, n)
        for key, scores in (("rouge_l", rouge_refs.scores(candidates)), ("cider", cider_refs.scores(candidates))):
            corpus, expected_per_image = expected[key]
            assert list(scores) == expected_per_image, (s, key)
            assert np.mean(scores) == corpus, (s, key)
        values = shared.values(candidates)  # references shared by the systems, n-grams shared by BLEU and CIDEr-D
        assert list(values) == ["bleu_1", "bleu_2", "bleu_3", "bleu_4", "rouge_l", "cider"]
        for key, (corpus, expected_per_image) in expected.items():
            assert values[key].corpus == corpus and values[key].per_sample == expected_per_image, (s, key)
        assert values["bleu_4"].statistics.per_unit.tolist() == stats.astype(float).tolist(), s
        assert values["bleu_4"].statistics.value() == expected["bleu_4"][0], s


def test_flickr8k_expert_and_crowdflower_candidates(flickr8k):
    references, systems = flickr8k
    _assert_equal(references, systems)


def test_composite_candidates_and_long_llava_captions(composite):
    references, systems = composite
    assert max(len(c.split(" ")) for c in systems[1]) > 100
    _assert_equal(references, systems)


ADVERSARIAL_REFERENCES = [
    ["a dog runs on the grass", "the dog is running", "a brown dog plays outside on a sunny day"],
    ["a man", "a man rides a bike down a very long and winding mountain road in the rain"],
    ["one"],
    ["two cats sleep", "two cats sleep", "cats", "two two two cats", "a cat and another cat sleep on a bed"],
    ["über café naïve 日本 語 🙂", "café au lait", "日本 語"],
    [" ".join(f"w{i % 23}" for i in range(120)), "w1 w2 w3"],  # a reference of 120 tokens: ROUGE-L's long path
    [" ".join(f"w{i % 17}" for i in range(64)), " ".join(f"w{i % 5}" for i in range(65))],  # 64 and 65 tokens
    ["a  b", "a\tb c", " leading and trailing ", "", "x y"],  # empty and odd whitespace (split vs split(" "))
    ["the the the the", "the cat", "a cat the"],
    ["people walking in a crowded street", "a crowd of people", "people", "street scene",
     "many people walking down a city street", "a busy street", "pedestrians on a street"],
]


def _adversarial_systems():
    long = " ".join(f"w{i % 19}" for i in range(150))
    return [
        ["", "", "", "", "", "", "", "", "", ""],  # empty after tokenization
        ["dog", "man", "one", "cats", "café", "w1", "w3", "b", "the", "people"],  # one word
        ["dog dog dog dog dog", "a a a a a a", "one one", "two two two two two two cats", "日本 日本 日本",
         "w1 w1 w1 w1", "w0 w0", "a  a", "the the the the the the the", "street street"],  # repeated words
        [long, "a man rides a bike down a very long and winding mountain road in the rain on a cold day today",
         "one " * 30, "two cats sleep on a bed " * 5, "café au lait " * 9, long, long[:200], "a b c d e f g h i j k",
         "the cat the cat the cat the cat", " ".join(["people walking in a crowded street"] * 4)],  # longer than all
        ["a dog runs", "a man", "one", "two cats sleep", "über café naïve 日本 語 🙂", "w1 w2 w3", "w0 w1 w2",
         "a\tb  c ", "the cat", "a busy street"],  # equal to a reference, unicode, tabs and double spaces
    ]


def test_adversarial_texts_as_given():
    """Texts straight to both (any tokenizer's output): whitespace is split as pycocoevalcap splits it."""
    _assert_equal(ADVERSARIAL_REFERENCES, _adversarial_systems())


def test_adversarial_texts_tokenized():
    references, systems = _corpus(
        ADVERSARIAL_REFERENCES + [["A dog, running!", "...", "Don't stop -- (ever)."]],
        [s + [c] for s, c in zip(_adversarial_systems(), [", ... ?", "Dog.", "dog dog dog", "a" * 300, "DON'T stop"])])
    assert systems[0][-1] == "" and references[-1][1] == ""
    _assert_equal(references, systems)


def test_one_image_and_one_reference():
    """One image: CIDEr-D's idf, log(1), is 0 for every n-gram."""
    _assert_equal([["a dog runs"]], [["a dog runs"], ["a cat"], [""]])


def test_systems_share_the_references_codes_without_growing_them():
    """Each system's unseen n-grams get codes for that system only: a later system sees the same reference tables."""
    references = ADVERSARIAL_REFERENCES
    ngrams = ReferenceNgrams(references)
    sizes = list(ngrams.codes.sizes)
    cider = CiderReferences(ngrams)
    systems = _adversarial_systems()
    first = [cider.scores(candidates).tolist() for candidates in systems]
    assert ngrams.codes.sizes[1:] == sizes[1:]
    assert [cider.scores(candidates).tolist() for candidates in reversed(systems)] == first[::-1]


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="2 candidates for 1 reference sets"):
        BleuReferences([["a b"]]).statistics(["a", "b"])
    with pytest.raises(ValueError, match="2 candidates for 1 reference sets"):
        RougeReferences([["a b"]]).scores(["a", "b"])
    with pytest.raises(ValueError, match="at least one reference"):
        CiderReferences([["a b"], []])
