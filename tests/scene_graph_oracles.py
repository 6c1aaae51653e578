"""The official scene-graph metric packages as test oracles: capture-metric 0.1.13 and FactualSceneGraph 0.7.3.

Installed with ``pip install --no-deps capture-metric==0.1.13 FactualSceneGraph==0.7.3`` (their dependency
``discosg`` would replace torch). Nothing of theirs loads a model here: the parser is replaced by the graph texts a
test writes, the sentence encoder by :class:`HashedCharEncoder` (given to both sides), and WordNet is NLTK's reader
over Debian's WordNet 3.0 database (``apt-get install wordnet-base wordnet-sense-index``), copied into a
temporary folder with the ``lexnames`` file NLTK's reader also needs.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import zlib
from pathlib import Path
from typing import Iterable, List, Sequence, Set, Tuple

import numpy as np
import pytest

# hand-written FACTUAL outputs (raw, as the model decodes them) of the sentences the detail tests score
SENTENCE_GRAPHS = {
    "A red car is on the street.": "(car, is, red), (car, on, street)",
    "Two men walk a dog.": "(men, is, 2), (men, walk, dog)",
    "A dog sits on a red car.": "(dog, sit on, car), (car, is, red)",
    "The man sits on a bench.": "(man, sit on, bench)",
    "A red automobile is on a road.": "(automobile, is, red), (automobile, on, road)",
    "Two men and a dog are near a car.": "(men, near, car), (dog, near, car), (men, is, 2)",
    "A puppy is on a car.": "(puppy, on, car)",
    "A man is sitting on a bench.": "(man, sit on, bench)",
    "The bench is wooden.": "(bench, is, wooden)",
}
DEBIAN_WORDNET = Path("/usr/share/wordnet")
WORDNET_FILES = ("cntlist.rev", "index.sense", "index.adj", "index.adv", "index.noun", "index.verb", "data.adj",
                 "data.adv", "data.noun", "data.verb", "adj.exc", "adv.exc", "noun.exc", "verb.exc")
# WordNet 3.0's lexicographer files (lexnames(5WN)): number = line, name, part of speech
LEXNAMES = ("adj.all 3", "adj.pert 3", "adv.all 4", "noun.Tops 1", "noun.act 1", "noun.animal 1", "noun.artifact 1",
            "noun.attribute 1", "noun.body 1", "noun.cognition 1", "noun.communication 1", "noun.event 1",
            "noun.feeling 1", "noun.food 1", "noun.group 1", "noun.location 1", "noun.motive 1", "noun.object 1",
            "noun.person 1", "noun.phenomenon 1", "noun.plant 1", "noun.possession 1", "noun.process 1",
            "noun.quantity 1", "noun.relation 1", "noun.shape 1", "noun.state 1", "noun.substance 1",
            "noun.time 1", "verb.body 2", "verb.change 2", "verb.cognition 2", "verb.communication 2",
            "verb.competition 2", "verb.consumption 2", "verb.contact 2", "verb.creation 2", "verb.emotion 2",
            "verb.motion 2", "verb.perception 2", "verb.possession 2", "verb.social 2", "verb.stative 2",
            "verb.weather 2", "adj.ppl 3")


def import_official(name: str):
    """An official module; without it, a skip naming the pip line that installs it (a failure in CI, which installs
    it)."""
    rank = os.environ.get("RANK")
    os.environ["RANK"] = "1"  # capture_metric downloads NLTK data when imported on rank 0 only
    try:
        return importlib.import_module(name)
    except ImportError as error:
        missing = (f"official package not importable ({error}): pip install --no-deps capture-metric==0.1.13 "
                   f"FactualSceneGraph==0.7.3")
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing} (.ci/run installs it)")
        pytest.skip(missing, allow_module_level=True)  # also from a module's top level
    finally:
        if rank is None:
            del os.environ["RANK"]
        else:
            os.environ["RANK"] = rank


def nltk_data_with_wordnet(root: Path) -> Path:
    """An NLTK data folder holding Debian's WordNet 3.0 as ``corpora/wordnet``."""
    missing = [name for name in WORDNET_FILES if not (DEBIAN_WORDNET / name).is_file()]
    if missing:
        pytest.fail(f"Debian's WordNet database lacks {missing} in {DEBIAN_WORDNET}: "
                    "apt-get install wordnet-base wordnet-sense-index")
    folder = root / "corpora" / "wordnet"
    folder.mkdir(parents=True, exist_ok=True)
    for name in WORDNET_FILES:
        shutil.copyfile(DEBIAN_WORDNET / name, folder / name)
    (folder / "lexnames").write_text("".join(f"{i:02d}\t{line.replace(' ', chr(9))}\n"
                                             for i, line in enumerate(LEXNAMES)))
    return root


def wordnet_reader(nltk_root: Path, monkeypatch):
    """NLTK's WordNet reader over the folder. The folder is put first on NLTK's data path (with ``monkeypatch``): the
    reader's sense-index mapping looks ``corpora/wordnet`` up there, and NLTK opens files under its data path only."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    monkeypatch.setattr(nltk.data, "path", [str(nltk_root), *nltk.data.path])
    with pytest.warns(UserWarning, match="multilingual"):
        return WordNetCorpusReader(str(nltk_root / "corpora" / "wordnet"), None)


class HashedCharEncoder:
    """A deterministic stand-in sentence encoder: counts of hashed character bigrams (crc32) plus a constant
    component, so that no text, the empty one included, has a zero vector. ``encode(texts, batch_size=...)``
    follows SentenceTransformer's call; ``dtype`` float32 mimics its output."""

    def __init__(self, dim: int = 48, dtype=np.float64):
        self.dim, self.dtype = dim, dtype

    def vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim)
        v[0] = 1.0
        padded = f"^{text}$"
        for a, b in zip(padded, padded[1:]):
            v[1 + zlib.crc32((a + b).encode()) % (self.dim - 1)] += 1.0
        return v

    def encode(self, texts: Sequence[str], batch_size: int = 32, **_) -> np.ndarray:
        return np.stack([self.vector(t) for t in texts]).astype(self.dtype) if texts else np.zeros((0, self.dim))

    __call__ = encode


def tokens(text: str) -> List[str]:
    return re.findall(r"\w+|[^\w\s]", text)


def tagged(text: str, nouns: Iterable[str]) -> List[Tuple[str, str]]:
    """A stand-in POS tagging: the listed words are nouns (``NN``), every other token ``JJ``."""
    nouns: Set[str] = set(nouns)
    return [(token, "NN" if token in nouns else "JJ") for token in tokens(text)]
