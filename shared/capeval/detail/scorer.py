"""CAPTURE, ``spice_factual`` and ``soft_spice``: scene-graph metrics for detailed captions on the FACTUAL parser.

All three hold the process's one FACTUAL parser of their settings
(:func:`capeval.backbones.scene_graph_parser.shared_scene_graph_parser`), CAPTURE and Soft-SPICE its one
all-mpnet-base-v2 of their settings (:func:`capeval.text.mpnet.shared_mpnet_encoder`): each distinct
text (a sentence for CAPTURE, a whole text for the SPICE variants, as their official code parses them) is generated
once per run, across systems, references and metrics. The formulas are :mod:`capeval.functional.capture` and
:mod:`capeval.functional.factual_spice`.

- **capture** (``capture-metric`` 0.1.13): ``nltk.sent_tokenize``, FACTUAL per sentence (beam 5, at most 128 output
  tokens, each text's sentences cut as the official ``parse`` call cuts them: :meth:`CaptureScorer._official_limits`),
  merging, the noun and stop-word filters, the exact, synonym and soft
  (all-mpnet-base-v2) matching stages; a caption's score is the mean over its references. ``capture_details``: per
  sample, per kind, precision, recall, F1 (means over references) and the matched, missed and invented elements.
- **spice_factual** / **soft_spice** (FactualSceneGraph 0.7.3's ``Evaluator``): each whole text parsed once (the
  package's ``parse`` defaults: the same beam and lengths; cut beyond 64 tokens only, not at the longest text of
  each batch of 4 as the package's order-dependent batching does), candidate and references pooled. Not the SPICE
  jar: another parser, another matching.
"""

from __future__ import annotations

from typing import Annotated, Dict, List, Optional, Sequence

import numpy as np

from capeval.backbones.scene_graph_parser import DEFAULT_WEIGHTS, shared_scene_graph_parser
from capeval.core.caches import DEFAULT_CACHE_BYTES
from capeval.core.errors import InputError
from capeval.core.hub import get_spec, resolve
from capeval.core.inputs import ValidInputs
from capeval.core.keys import ScoreKey
from capeval.core.option_types import AtLeast, BatchSize, Bytes, Device, Dtype, PathLike
from capeval.core.scoring import Scorer, summarize
from capeval.core.truncation import warn_truncated
from capeval.detail.language import (PUNKT_WEIGHTS, SPICE_SYNONYM_FILES, SPICE_SYNONYM_WEIGHTS, TAGGER_WEIGHTS,
                                     WORDNET_WEIGHTS, NltkLanguage)
from capeval.functional import capture as capture_fn
from capeval.functional.factual_graph import graph_text
from capeval.functional.factual_spice import read_spice_synonyms, soft_spice, spice_factual
from capeval.text.mpnet import ENCODER_WEIGHTS, shared_mpnet_encoder

# the official parse settings of both packages (capture-metric's call, FactualSceneGraph's ``parse`` defaults)
PARSE_SETTINGS = dict(max_input_length=64, max_output_length=128, num_beams=5)
OFFICIAL_PARSE_BATCH = 32  # FactualSceneGraph's ``parse`` batch size, which capture-metric keeps
Weight = Annotated[float, AtLeast(0)]


def _resolved(name: str, cache_dir):
    return resolve(name, list(get_spec(name).files), cache_dir=cache_dir)


class _FactualScorer(Scorer):
    """What the three share: references required, images unused, the shared FACTUAL parser."""

    images, references = "unused", "required"

    def _load_parser(self, parser: str, *, device, dtype, batch_size: int, cache_dir, persist_dir, cache_bytes: int):
        self.parser = shared_scene_graph_parser(parser, device=device, dtype=dtype, batch_size=batch_size,
                                                cache_dir=cache_dir, persist_dir=persist_dir,
                                                cache_bytes=cache_bytes, **PARSE_SETTINGS)

    def provenance_parts(self):
        return (self, self.parser)

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        """Phrase embeddings (float64 from the encoder's float32) for CAPTURE's soft stage and Soft-SPICE."""
        return self.encoder.encode_texts(list(texts), show_progress=False).double().numpy()

    def _graph_texts(self, texts: Sequence[str]) -> Dict[str, str]:
        """Each distinct text → its official graph text (the whole text parsed, input cut at 64 tokens)."""
        distinct = list(dict.fromkeys(texts))
        return dict(zip(distinct, map(graph_text, self.parser.parse(distinct))))

    def _warn_parser_truncation(self, parsed: Sequence[str], result: dict) -> None:
        result["truncated_texts"] = truncated = self.parser.count_truncated(parsed)
        warn_truncated([self.parser.truncation.describe(truncated, len(parsed)) if truncated else ""])


def _all_texts(inputs: ValidInputs) -> List[str]:
    """Every caption, then every reference, in order."""
    return [*inputs.predictions, *(r for refs in inputs.references for r in refs)]


class CaptureScorer(_FactualScorer):
    name = "capture"
    key_metadata = {"capture": ScoreKey("CAPTURE", scale=100.0)}
    detail_keys = {"capture": "capture_details"}

    def __init__(self, *, synonym_matching: bool = True, soft_matching: bool = True, stop_words: bool = True,
                 alpha: Weight = capture_fn.ALPHA, beta: Weight = capture_fn.BETA, gamma: Weight = capture_fn.GAMMA,
                 parser: str = DEFAULT_WEIGHTS, encoder: str = ENCODER_WEIGHTS, device: Device = "auto",
                 dtype: Optional[Dtype] = None, batch_size: BatchSize = 32, cache_dir: Optional[PathLike] = None,
                 persist_dir: Optional[PathLike] = None, cache_bytes: Bytes = DEFAULT_CACHE_BYTES):
        if alpha + beta != 1:
            raise InputError(f"capture: alpha + beta must be 1 (as the official CAPTURE asserts), not "
                             f"{alpha} + {beta}")
        self.options = dict(synonym_matching=synonym_matching, soft_matching=soft_matching, alpha=alpha, beta=beta,
                            gamma=gamma)
        self.stop_words = capture_fn.STOP_WORDS if stop_words else frozenset()
        self.language = NltkLanguage(*(_resolved(name, cache_dir)
                                       for name in (PUNKT_WEIGHTS, TAGGER_WEIGHTS, WORDNET_WEIGHTS)))
        self._load_parser(parser, device=device, dtype=dtype, batch_size=batch_size, cache_dir=cache_dir,
                          persist_dir=persist_dir, cache_bytes=cache_bytes)
        self.encoder = shared_mpnet_encoder(encoder, device=device, dtype=dtype, batch_size=batch_size,
                                            cache_dir=cache_dir, persist_dir=persist_dir,
                                            cache_bytes=cache_bytes) if soft_matching else None

    def _official_limits(self, sentences: Sequence[str]) -> List[int]:
        """Each sentence's input limit as the official call cuts it: ``parse(sentences)`` takes a text's sentences in
        batches of 32 and truncates each batch at its longest prompt's length without the end token (at most 64),
        so the longest sentence of a batch loses its last token to the end token."""
        lengths = [self.parser.input_length(s) - 1 for s in sentences]
        limits: List[int] = []
        for start in range(0, len(sentences), OFFICIAL_PARSE_BATCH):
            batch = lengths[start:start + OFFICIAL_PARSE_BATCH]
            limits += [min(PARSE_SETTINGS["max_input_length"], max(batch))] * len(batch)
        return limits

    def elements(self, sentences: Dict[str, List[str]]) -> Dict[str, capture_fn.CaptureElements]:
        """Each text (→ its sentences) → its merged, filtered elements; each distinct sentence parsed once."""
        limits = {text: self._official_limits(text_sentences) for text, text_sentences in sentences.items()}
        flat = [(s, limit) for text, text_sentences in sentences.items()
                for s, limit in zip(text_sentences, limits[text])]
        outputs = self.parser.parse([s for s, _ in flat], input_limits=[limit for _, limit in flat])
        graphs = dict(zip(flat, map(graph_text, outputs)))
        lemmatize = self.language.lemmatize
        return {text: capture_fn.capture_elements(
            [graphs[entry] for entry in zip(text_sentences, limits[text])],
            capture_fn.text_nouns(self.language.tagged_words(text), lemmatize), lemmatize,
            stop_words=self.stop_words) for text, text_sentences in sentences.items()}

    def _score(self, inputs: ValidInputs) -> dict:
        texts = _all_texts(inputs)
        sentences = {text: self.language.sentences(text) for text in dict.fromkeys(texts)}
        elements = self.elements(sentences)
        options = dict(self.options, synonyms=self.language.synonyms,
                       encode=self._encode if self.encoder is not None else None)
        results = [capture_fn.capture_sample(elements[caption], [elements[r] for r in refs], **options)
                   for caption, refs in zip(inputs.predictions, inputs.references)]
        result = summarize({"capture": [r.score for r in results]})
        result["capture_details"] = [{kind: _kind_detail(getattr(r, kind)) for kind in capture_fn.KINDS}
                                     for r in results]
        self._warn_parser_truncation([s for text in texts for s in sentences[text]], result)
        return result


def _kind_detail(kind: capture_fn.KindResult) -> dict:
    return {"precision": kind.precision, "recall": kind.recall, "f1": kind.f1,
            "matched": [list(pair) for pair in kind.matched], "missed": list(kind.missed),
            "invented": list(kind.invented)}


class SpiceFactualScorer(_FactualScorer):
    name = "spice_factual"
    key_metadata = {"spice_factual": ScoreKey("SPICE (FACTUAL parser)", scale=100.0)}
    detail_keys = {"spice_factual": "spice_factual_details"}

    def __init__(self, *, synonym_match: bool = True, merge_tuples_synonyms: bool = False,
                 parser: str = DEFAULT_WEIGHTS, synonyms: str = SPICE_SYNONYM_WEIGHTS, device: Device = "auto",
                 dtype: Optional[Dtype] = None, batch_size: BatchSize = 32, cache_dir: Optional[PathLike] = None,
                 persist_dir: Optional[PathLike] = None, cache_bytes: Bytes = DEFAULT_CACHE_BYTES):
        folder = _resolved(synonyms, cache_dir) if synonyms == SPICE_SYNONYM_WEIGHTS else \
            resolve(synonyms, list(SPICE_SYNONYM_FILES), cache_dir=cache_dir)
        exceptions, synsets = ((folder / name).read_text(encoding="utf-8") for name in SPICE_SYNONYM_FILES)
        self.synonyms = read_spice_synonyms(exceptions, synsets)
        self.options = dict(synonym_match=synonym_match, merge_tuples_synonyms=merge_tuples_synonyms)
        self._load_parser(parser, device=device, dtype=dtype, batch_size=batch_size, cache_dir=cache_dir,
                          persist_dir=persist_dir, cache_bytes=cache_bytes)

    def _score(self, inputs: ValidInputs) -> dict:
        texts = _all_texts(inputs)
        graphs = self._graph_texts(texts)
        results = [spice_factual([graphs[caption]], [graphs[r] for r in refs], self.synonyms, **self.options)
                   for caption, refs in zip(inputs.predictions, inputs.references)]
        result = summarize({"spice_factual": [r.f1 for r in results]})
        result["spice_factual_details"] = [{"precision": r.precision, "recall": r.recall, "matches": r.matches,
                                            "candidate_tuples": r.candidate_tuples,
                                            "reference_tuples": r.reference_tuples} for r in results]
        self._warn_parser_truncation(texts, result)
        return result


class SoftSpiceScorer(_FactualScorer):
    name = "soft_spice"
    key_metadata = {"soft_spice": ScoreKey("Soft-SPICE (FACTUAL parser)", scale=100.0)}

    def __init__(self, *, bidirectional: bool = False, parser: str = DEFAULT_WEIGHTS, encoder: str = ENCODER_WEIGHTS,
                 device: Device = "auto", dtype: Optional[Dtype] = None, batch_size: BatchSize = 32,
                 cache_dir: Optional[PathLike] = None, persist_dir: Optional[PathLike] = None,
                 cache_bytes: Bytes = DEFAULT_CACHE_BYTES):
        self.bidirectional = bidirectional
        self._load_parser(parser, device=device, dtype=dtype, batch_size=batch_size, cache_dir=cache_dir,
                          persist_dir=persist_dir, cache_bytes=cache_bytes)
        self.encoder = shared_mpnet_encoder(encoder, device=device, dtype=dtype, batch_size=batch_size,
                                            cache_dir=cache_dir, persist_dir=persist_dir, cache_bytes=cache_bytes)

    def _score(self, inputs: ValidInputs) -> dict:
        texts = _all_texts(inputs)
        graphs = self._graph_texts(texts)
        values = [soft_spice([graphs[caption]], [graphs[r] for r in refs], self._encode,
                             bidirectional=self.bidirectional)
                  for caption, refs in zip(inputs.predictions, inputs.references)]
        result = summarize({"soft_spice": values})
        self._warn_parser_truncation(texts, result)
        return result
