"""Tiny stand-ins of the detailed-caption family's data (never product code paths): the three NLTK packages in
their fetched layout (:mod:`capeval.testing.tiny_nltk`: a Punkt model and a tagger trained on a few captions, the
tiny WordNet) and SPICE's synonym files in FactualSceneGraph's format (line pairs: a base form, then its inflected
forms; a word, then its synset ids)."""

from __future__ import annotations

from pathlib import Path

from capeval.detail.language import PUNKT_ENGLISH, TAGGER_ENG, WORDNET_DIR
from capeval.testing.tiny_nltk import (trained_punkt_params, trained_tagger, write_punkt_tab, write_tagger_json,
                                       write_tiny_wordnet)

# word -> synset ids, and base form -> inflected forms, in SPICE's file formats
TINY_SPICE_SYNSETS = {"car": (1,), "automobile": (1,), "auto": (1,), "dog": (2,), "puppy": (2, 3), "red": (4,),
                      "crimson": (4,), "street": (5,), "road": (5, 6), "man": (7,), "person": (7, 8),
                      "on": (9,), "atop": (9,), "sit": (10,), "seat": (10,)}
TINY_SPICE_EXCEPTIONS = {"man": ("men",), "sit": ("sat", "sitting")}


def write_tiny_punkt(out_dir: Path) -> None:
    write_punkt_tab(trained_punkt_params(), Path(out_dir) / PUNKT_ENGLISH)


def write_tiny_tagger(out_dir: Path) -> None:
    write_tagger_json(trained_tagger(), Path(out_dir) / TAGGER_ENG)


def write_tiny_wordnet_package(out_dir: Path) -> None:
    write_tiny_wordnet(Path(out_dir) / WORDNET_DIR)


def write_tiny_spice_synonyms(out_dir: Path) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "english.synsets").write_text("".join(
        f"{word}\n{' '.join(map(str, ids))}\n" for word, ids in sorted(TINY_SPICE_SYNSETS.items())), encoding="utf-8")
    (out_dir / "english.exceptions").write_text("".join(
        f"{base}\n{' '.join(forms)}\n" for base, forms in sorted(TINY_SPICE_EXCEPTIONS.items())), encoding="utf-8")
