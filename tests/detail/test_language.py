"""CAPTURE's WordNet lookups: capeval opens WordNet 3.0 without NLTK's mapping for the Open Multilingual Wordnet
(``map_wn``), and every English lookup it makes equals NLTK's own ``WordNetCorpusReader``'s."""

import warnings

import pytest

from capeval.detail.language import WORDNET_DIR, NltkLanguage
from capeval.testing.tiny_nltk import write_tiny_nltk_data


@pytest.fixture(scope="module")
def nltk_data(tmp_path_factory):
    return write_tiny_nltk_data(tmp_path_factory.mktemp("language"), wordnet="debian")  # Debian's WordNet 3.0


def test_lemmas_and_synonyms_equal_nltks_own_reader(nltk_data):
    from nltk.corpus.reader.wordnet import WordNetCorpusReader
    from nltk.data import FileSystemPathPointer

    language = NltkLanguage(nltk_data, nltk_data, nltk_data)
    assert language.wordnet.map30 is None  # the multilingual mapping was not built
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stock = WordNetCorpusReader(FileSystemPathPointer(str(nltk_data / WORDNET_DIR)), None)
    assert stock.map30  # NLTK's own reader builds it as it opens
    words = {pos: [line.split()[0] for line in (nltk_data / WORDNET_DIR / f"index.{name}").read_text().splitlines()
                   if not line.startswith(" ")][::97]
             for pos, name in (("n", "noun"), ("v", "verb"), ("a", "adj"), ("r", "adv"))}
    words["n"] += ["dogs", "geese", "mice", "handbags", "kittens", "bicycles", "people"]
    words["v"] += ["running", "sat", "holds", "wearing", "carries"]
    assert sum(map(len, words.values())) > 1000
    for pos, some in words.items():
        for word in some:
            lemmas = stock._morphy(word, pos)
            assert language.lemmatize(word, pos) == (min(lemmas, key=len) if lemmas else word), (word, pos)
            assert language.synonyms(word) == {lemma.name() for synset in stock.synsets(word)
                                               for lemma in synset.lemmas()}, word
