"""CIDEr-D with a fixed IDF: PTB tokenisation (:mod:`capeval.text.ptb`, pycocoevalcap's tokens without Java) and
pycocoevalcap's CIDEr-D (:mod:`capeval.text.cider`) with a table of document frequencies
(:mod:`capeval.functional.fixed_idf_cider`) in place of the scored corpus's.

Official CIDEr takes its IDF from the scored corpus, so a caption's score changes with the other captions
scored beside it (and is 0 when one caption is scored alone: log(1) = 0). A fixed IDF, built once from a
reference corpus with :func:`build_document_frequencies`, gives every caption a score of its own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from capeval.core.errors import InputError
from capeval.core.inputs import ValidInputs, check_references
from capeval.core.option_types import BatchSize, Device, Dtype
from capeval.core.scoring import Scorer, summarize
from capeval.functional.fixed_idf_cider import DocumentFrequencies
from capeval.text.cider import CIDER_KEY, CiderReferences

IDF_FILE = "cider_idf.json"


def ptb_tokenize(texts: Sequence[str]) -> List[str]:
    """pycocoevalcap's PTBTokenizer (lower case, punctuation removed) on ``texts`` as one call, in Python."""
    from capeval.text.ptb import tokenize_block

    return tokenize_block(list(texts))


def tokenize_reference_sets(reference_sets: Sequence[Sequence[str]]) -> List[List[str]]:
    flat = ptb_tokenize([r for refs in reference_sets for r in refs])
    out, start = [], 0
    for refs in reference_sets:
        out.append(flat[start:start + len(refs)])
        start += len(refs)
    return out


def build_document_frequencies(reference_sets: Sequence[Sequence[str]]) -> DocumentFrequencies:
    """IDF corpus from raw reference sets (one document per set, as pycocoevalcap counts one per scored sample)."""
    reference_sets = check_references(reference_sets, len(reference_sets))
    return DocumentFrequencies.from_reference_sets(tokenize_reference_sets(reference_sets))


def save_document_frequencies(df: DocumentFrequencies, path: Union[str, os.PathLike], provenance: Dict) -> Path:
    path = Path(path)
    path.write_text(json.dumps({"format": "capeval-cider-idf/1", "provenance": provenance, **df.to_json()}))
    return path


def load_document_frequencies(idf: Union[str, os.PathLike, DocumentFrequencies]) -> DocumentFrequencies:
    """A :class:`DocumentFrequencies`, a JSON file written by :func:`save_document_frequencies` or its folder."""
    if isinstance(idf, DocumentFrequencies):
        return idf
    path = Path(idf)
    if path.is_dir():
        path = path / IDF_FILE
    if not path.is_file():
        raise InputError(f"CIDEr IDF file not found: {path}")
    try:
        return DocumentFrequencies.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{path}: not a CIDEr IDF file of `capeval train cider-idf` ({exc!r})") from None


class FixedIdfCiderScorer(Scorer):
    """Per-sample CIDEr-D (key ``cider``) with document frequencies fixed by ``idf``."""

    name, images, references = "cider", "unused", "required"
    key_metadata = {"cider": CIDER_KEY}

    def __init__(self, idf: Union[str, os.PathLike, DocumentFrequencies], *, device: Optional[Device] = None,
                 dtype: Optional[Dtype] = None, batch_size: Optional[BatchSize] = None):
        """Pure Python on the CPU: the runtime options change nothing."""
        self.document_frequencies = load_document_frequencies(idf)

    def _score(self, inputs: ValidInputs) -> dict:
        references = CiderReferences(tokenize_reference_sets(inputs.references), self.document_frequencies)
        return summarize({"cider": references.scores(ptb_tokenize(inputs.predictions)).tolist()})
