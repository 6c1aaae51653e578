"""The NLTK pieces CAPTURE reads (Punkt sentences, Treebank words, the averaged-perceptron tagger, WordNet), loaded
from the fetched data folders, not from NLTK's global search path, and SPICE's synonym files for ``spice_factual``.

Each resource is a registered artifact (``capeval fetch capture``): the official nltk_data packages at a pinned
commit, checked by sha256, and ``english.synsets`` / ``english.exceptions`` from FactualSceneGraph 0.7.3's wheel.
The functions below are those of the official code: ``nltk.sent_tokenize`` (Punkt, English), ``nltk.word_tokenize``
(Punkt sentences, then NLTK's Treebank word tokenizer), ``nltk.pos_tag`` (the English averaged perceptron),
``WordNetLemmatizer().lemmatize`` (the shortest of WordNet's ``_morphy`` lemmas, else the word) and the lemma names
of ``wordnet.synsets(word)``.
"""

from __future__ import annotations

import shutil
import warnings
import zipfile
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import FrozenSet, List, Tuple

from capeval.core.errors import ConversionError

PUNKT_WEIGHTS, TAGGER_WEIGHTS, WORDNET_WEIGHTS = "nltk-punkt-tab", "nltk-averaged-perceptron-tagger-eng", "nltk-wordnet"
SPICE_SYNONYM_WEIGHTS = "factual-spice-synonyms"
PUNKT_ENGLISH = "tokenizers/punkt_tab/english"
TAGGER_ENG = "taggers/averaged_perceptron_tagger_eng"
WORDNET_DIR = "corpora/wordnet"
PUNKT_FILES = tuple(f"{PUNKT_ENGLISH}/{name}" for name in (
    "collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"))
TAGGER_FILES = tuple(f"{TAGGER_ENG}/averaged_perceptron_tagger_eng.{part}.json"
                     for part in ("weights", "tagdict", "classes"))
WORDNET_FILES = tuple(f"{WORDNET_DIR}/{name}" for name in (
    "adj.exc", "adv.exc", "noun.exc", "verb.exc", "cntlist.rev", "data.adj", "data.adv", "data.noun", "data.verb",
    "index.adj", "index.adv", "index.noun", "index.verb", "index.sense", "lexnames"))
SPICE_SYNONYM_FILES = ("english.exceptions", "english.synsets")


class NltkLanguage:
    """Sentences, tagged words, lemmas and WordNet synonyms, from the folders of the three fetched packages."""

    def __init__(self, punkt_root: Path, tagger_root: Path, wordnet_root: Path):
        from nltk.data import FileSystemPathPointer
        from nltk.tag.perceptron import PerceptronTagger
        from nltk.tokenize.destructive import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktSentenceTokenizer, load_punkt_params

        for root in (punkt_root, tagger_root, wordnet_root):
            _allow_reading(root)
        self.sentence_tokenizer = PunktSentenceTokenizer()
        self.sentence_tokenizer._params = load_punkt_params(FileSystemPathPointer(str(punkt_root / PUNKT_ENGLISH)))
        self.word_tokenizer = NLTKWordTokenizer()
        self.tagger = PerceptronTagger(load=False)
        self.tagger.load_from_json(loc=FileSystemPathPointer(str(tagger_root / TAGGER_ENG)))
        with warnings.catch_warnings():  # "multilingual functions are not available": no Open Multilingual Wordnet
            warnings.filterwarnings("ignore", message="The multilingual functions")
            self.wordnet = english_wordnet_reader()(FileSystemPathPointer(str(wordnet_root / WORDNET_DIR)), None)

    def sentences(self, text: str) -> List[str]:
        """``nltk.sent_tokenize(text)``."""
        return self.sentence_tokenizer.tokenize(text)

    def tagged_words(self, text: str) -> List[Tuple[str, str]]:
        """``nltk.pos_tag(nltk.word_tokenize(text))``."""
        words = [word for sentence in self.sentences(text) for word in self.word_tokenizer.tokenize(sentence)]
        return self.tagger.tag(words)

    def lemmatize(self, word: str, pos: str) -> str:
        """``WordNetLemmatizer().lemmatize(word, pos)``."""
        lemmas = self.wordnet._morphy(word, pos)
        return min(lemmas, key=len) if lemmas else word

    def synonyms(self, word: str) -> FrozenSet[str]:
        """The lemma names of every synset of ``word`` (the official ``get_synonyms``)."""
        return frozenset(lemma.name() for synset in self.wordnet.synsets(word) for lemma in synset.lemmas())


@lru_cache(maxsize=1)
def english_wordnet_reader() -> type:
    """NLTK's ``WordNetCorpusReader`` without the mapping to WordNet 3.0 it builds as it opens (``map_wn``: about 6 CPU
    seconds), which only the Open Multilingual Wordnet's lookups read: with no OMW reader, every English lookup is
    NLTK's own (``tests/detail/test_language.py``)."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class EnglishWordNetReader(WordNetCorpusReader):
        def map_wn(self, version: str = "wordnet") -> None:
            return None

    return EnglishWordNetReader


def _allow_reading(root: Path) -> None:
    """NLTK (3.10's path checks) reads data files only under a folder of ``nltk.data.path``: the fetched folder is
    appended there (once), so NLTK's own search order is unchanged; the loaders above name their files directly."""
    import nltk.data

    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))


def _extract(archive: Path, out_dir: Path, subdir: str) -> None:
    """Every file of the zip ``archive`` under ``out_dir/subdir``, at its path in the archive (none leaving it)."""
    if not zipfile.is_zipfile(archive):
        raise ConversionError(f"{archive}: not a zip archive")
    target = (out_dir / subdir).resolve()
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            parts = PurePosixPath(info.filename).parts
            if info.is_dir():
                continue
            if info.filename.startswith("/") or ".." in parts:
                raise ConversionError(f"{archive}: member {info.filename!r} leaves the archive's folder")
            path = target.joinpath(*parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)


def convert_nltk_tokenizers(archive, out_dir) -> None:
    """nltk_data's ``punkt_tab.zip`` unpacked under ``tokenizers/`` (its ``subdir``)."""
    _extract(Path(archive), Path(out_dir), "tokenizers")


def convert_nltk_taggers(archive, out_dir) -> None:
    """nltk_data's ``averaged_perceptron_tagger_eng.zip`` unpacked under ``taggers/``."""
    _extract(Path(archive), Path(out_dir), "taggers")


def convert_nltk_corpora(archive, out_dir) -> None:
    """nltk_data's ``wordnet.zip`` unpacked under ``corpora/``."""
    _extract(Path(archive), Path(out_dir), "corpora")


def convert_spice_synonyms(synsets_file, out_dir) -> None:
    """``english.synsets`` and, beside it, ``english.exceptions`` (taken from FactualSceneGraph's wheel) copied."""
    source, out = Path(synsets_file).parent, Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in SPICE_SYNONYM_FILES:
        if not (source / name).is_file():
            raise ConversionError(f"{source / name}: missing (expected beside english.synsets in the wheel)")
        shutil.copyfile(source / name, out / name)
