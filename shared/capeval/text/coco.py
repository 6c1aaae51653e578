"""The COCO caption metrics: BLEU-1..4, METEOR, ROUGE-L, CIDEr-D and SPICE with pycocoevalcap 1.2's semantics (PTB
tokenisation of candidates and references, one call over the whole scored corpus), as scorers and as the group of
several systems scored in one pass (:func:`score_coco_group`, with corpus statistics for resampling). The default
backend computes them in Python (:mod:`capeval.text.ptb`, :mod:`capeval.text.meteor`, :mod:`capeval.text.bleu`,
:mod:`capeval.text.rouge`, :mod:`capeval.text.cider`); ``"java"`` runs pycocoevalcap's jars
(:mod:`capeval.text.coco_jars`), as SPICE always does."""

from __future__ import annotations

import functools
import os
import sys
from typing import Annotated, Dict, List, Optional, Sequence, Tuple

import numpy as np

from capeval.core.corpus_statistics import CorpusStatistics, KeyScores, mean_statistics
from capeval.core.errors import InputError
from capeval.core.inputs import ValidInputs, as_list, check_captions, check_references, is_empty_caption
from capeval.core.keys import ScoreKey
from capeval.core.option_types import BatchSize, Device, Dtype, OneOf
from capeval.core.scoring import Scorer, summarize
from capeval.text.bleu import BleuReferences, bleu_from_statistics, bleu_scores, combine_bleu
from capeval.text.cider import CIDER_KEY, CiderReferences
from capeval.text.coco_jars import (JarMeteorRun, keep_meteor_jar, load_spice, ptb_tokenize_blocks, spice_missing,
                                    spice_setup, spice_value, take_meteor_jar)
from capeval.text.meteor_score import combine, segment_score
from capeval.text.ngrams import ReferenceNgrams
from capeval.text.ptb import refuse_line_break, tokenize_block
from capeval.text.rouge import RougeReferences


BLEU_KEYS = tuple(f"bleu_{n}" for n in range(1, 5))


class CocoCaptionScorer(Scorer):
    """One metric of the COCO group (``metric``, a subclass's), computed by :func:`score_coco_group`, the one
    implementation behind ``load_scorer``, ``capeval score``, the suite and ``COCOEvalCap``: pycocoevalcap 1.2's
    corpus values (BLEU's and METEOR's are not the means of their per-sample values) and per-sample values.
    ``coco_backend``: ``"python"`` (the default: no Java) or ``"java"`` (pycocoevalcap's jars). CPU only: the runtime
    options change nothing."""

    images, references = "unused", "required"
    metric = ""
    scores_empty_text = True  # as pycocoevalcap: empty and whitespace-only captions and references (score_coco_group)
    states_corpus_statistics = True  # score_systems: the group's statistics over the whole input (score_coco_group)
    text_rule = staticmethod(refuse_line_break)  # the PTB tokenizer's one refusal: a line break other than "\n"

    def __init__(self, *, coco_backend: Annotated[str, OneOf(COCO_BACKENDS)] = "python",
                 device: Optional[Device] = None, dtype: Optional[Dtype] = None,
                 batch_size: Optional[BatchSize] = None):
        self.name = self.metric
        self.coco_backend = check_coco_backend(coco_backend)

    def score_keys(self, inputs: ValidInputs) -> Tuple[str, ...]:
        return BLEU_KEYS if self.metric == "bleu" else (self.metric,)

    def _score(self, inputs: ValidInputs) -> Dict:
        (values,) = score_coco_group([inputs.predictions], inputs.references, metrics=[self.metric],
                                     coco_backend=self.coco_backend, systems_field="predictions")
        result = summarize({key: value.per_sample for key, value in values.items()})
        result.update({key: value.corpus for key, value in values.items()})
        return result

    def score_systems(self, systems: Sequence[Sequence[str]], images=None, references=None, *,
                      peers: Sequence[Scorer] = ()) -> List[Dict[str, KeyScores]]:
        """This metric and its ``peers`` (other COCO metrics, on the same backend) over the whole input of every
        system in one :func:`score_checked_group` call (the suite's input is checked): references tokenized once for
        all."""
        group = [self, *peers]
        backends = {scorer.name: scorer.coco_backend for scorer in group}
        if len(set(backends.values())) > 1:
            raise InputError(f"the COCO metrics of a suite run in one pass on one backend, not {backends}")
        return score_checked_group([list(captions) for captions in systems], references,
                                   _group_metrics([scorer.metric for scorer in group]),
                                   self.coco_backend)


class BleuScorer(CocoCaptionScorer):
    """BLEU-1..4; corpus-level: its corpus values pool the n-gram counts of every sample."""

    metric, corpus_level = "bleu", True
    key_metadata = {f"bleu_{n}": ScoreKey(f"BLEU-{n}", 100.0, coco_method=f"Bleu_{n}") for n in range(1, 5)}


class MeteorScorer(CocoCaptionScorer):
    """METEOR 1.5; corpus-level: its corpus value pools the alignments of every sample."""

    metric, corpus_level = "meteor", True
    key_metadata = {"meteor": ScoreKey("METEOR", 100.0, coco_method="METEOR")}


class RougeLScorer(CocoCaptionScorer):
    """ROUGE-L (per sample; the corpus value is their mean)."""

    metric = "rouge_l"
    key_metadata = {"rouge_l": ScoreKey("ROUGE-L", 100.0, coco_method="ROUGE_L")}


class CiderScorer(CocoCaptionScorer):
    """CIDEr-D; corpus-level: its document frequencies are those of the scored references."""

    metric, corpus_level = "cider", True
    key_metadata = {"cider": CIDER_KEY}


class SpiceScorer(CocoCaptionScorer):
    """SPICE (Java and the Stanford CoreNLP jars; its captions PTB-tokenized in Python, the same tokens)."""

    metric = "spice"
    key_metadata = {"spice": ScoreKey("SPICE", 100.0, coco_method="SPICE")}
    scores_empty_text = False  # how SPICE's jar scores an empty text is not checked here (no CoreNLP jars)

    def __init__(self, *, device: Optional[Device] = None, dtype: Optional[Dtype] = None,
                 batch_size: Optional[BatchSize] = None):
        super().__init__(device=device, dtype=dtype, batch_size=batch_size)


# ---------------------------------------------------------------------------------------------------------------
# The COCO group: BLEU-1..4, METEOR, ROUGE-L, CIDEr-D (and SPICE) of several systems on the same images in one pass
# ---------------------------------------------------------------------------------------------------------------

COCO_GROUP: Tuple[str, ...] = ("bleu", "meteor", "rouge_l", "cider", "spice")
COCO_KEYS: Dict[str, Tuple[str, ...]] = {"bleu": BLEU_KEYS, "meteor": ("meteor",), "rouge_l": ("rouge_l",),
                                         "cider": ("cider",), "spice": ("spice",)}
_SPICE_NOTICED = []


def spice_notice(missing: Sequence[str]) -> str:
    """The one line saying why the coco group runs without SPICE (``missing``) and what SPICE needs."""
    return (f"capeval: the coco group runs without SPICE ({', '.join(missing)}). {spice_setup()}. Name spice among "
            "the metrics to get its error instead.")


def coco_group_names(asked: Sequence[str] = ()) -> Tuple[str, ...]:
    """The ``coco`` group available here. Where SPICE cannot run it is left out, and one plain line on stderr says
    why and what it needs (once per process; not when ``asked``, the scorers named besides the group, holds
    ``spice``: its own error then says it)."""
    missing = spice_missing()
    if not missing:
        return COCO_GROUP
    if "spice" not in asked and not _SPICE_NOTICED:
        _SPICE_NOTICED.append(True)
        print(spice_notice(missing), file=sys.stderr)
    return tuple(name for name in COCO_GROUP if name != "spice")


def score_coco_group(systems: Sequence[Sequence[str]], references: Sequence[Sequence[str]], *,
                     metrics: Optional[Sequence[str]] = None, coco_backend: str = "python",
                     systems_field: str = "systems") -> List[Dict[str, KeyScores]]:
    """Score every system's captions (``systems[s][i]`` describes image i) against the same references with
    pycocoevalcap 1.2's BLEU-1..4, METEOR, ROUGE-L, CIDEr-D (and SPICE): one dict per system, keys ``bleu_1`` ..
    ``bleu_4``, ``meteor``, ``rouge_l``, ``cider``, ``spice``, each value equal (==) to pycocoevalcap run on that
    system alone. The references are tokenized once and every system's captions as its own text block, exactly as
    pycocoevalcap's separate calls; CIDEr-D's document frequencies and the references' n-grams are computed once.

    ``coco_backend="python"`` (the default) needs no Java: the PTB tokenizer (:mod:`capeval.text.ptb`) and METEOR
    1.5 (:mod:`capeval.text.meteor`) in Python, equal to the jars. ``coco_backend="java"`` runs pycocoevalcap's jars
    (one tokenizer JVM for every block; the METEOR jar beside the Python metrics, one per process, kept between calls),
    for cross-checking. SPICE always runs on Java and Stanford CoreNLP. ``systems_field``: how a refused caption is
    named (``systems[s][i]``; ``predictions[i]`` for a scorer's one system).

    Empty and whitespace-only captions and references are scored as pycocoevalcap scores them (both backends equal
    to its jars on them: the PTB tokenizer writes an empty line, BLEU and CIDEr-D score an empty candidate 0, ROUGE-L
    compares ``"".split(" ")`` as pycocoevalcap does, METEOR gets pycocoevalcap's SCORE line), except by SPICE
    (refused: :attr:`SpiceScorer.scores_empty_text`)."""
    names = _group_metrics(metrics)
    check_coco_backend(coco_backend)
    references = as_list(references, "references") if not isinstance(references, str) else None
    if not references:
        raise InputError("references must be a non-empty list with one reference list per image")
    references = check_references(references, len(references), empty=True)
    systems = _check_systems(systems, len(references))
    _refuse_line_breaks(systems, references, systems_field)
    if "spice" in names:
        _refuse_empty_for_spice(systems, references, systems_field)
    return score_checked_group(systems, references, names, coco_backend)


def score_checked_group(systems: List[List[str]], references: List[List[str]], names: Sequence[str],
                        coco_backend: str) -> List[Dict[str, KeyScores]]:
    """:func:`score_coco_group` of input already checked (a suite's: validated, its texts' rules run, empty texts
    refused where SPICE is among ``names``, the group's metric names in :data:`COCO_GROUP` order)."""
    spice = load_spice() if "spice" in names else None
    meteor = take_meteor_jar() if "meteor" in names and coco_backend == "java" else None
    meteor_run = None
    finished = False
    try:
        tokenized = tokenize_blocks([[r for refs in references for r in refs], *systems], coco_backend)
        refs_tok = _regroup(tokenized[0], [len(refs) for refs in references])
        candidates = tokenized[1:]
        if "meteor" in names:  # started first: its jar or worker processes run while the other metrics are scored
            meteor_run = JarMeteorRun(meteor, candidates, refs_tok) if meteor else PythonMeteorRun(candidates, refs_tok)
        results: List[Dict[str, KeyScores]] = [{} for _ in systems]
        overlap = OverlapReferences(refs_tok, [n for n in names if n in OVERLAP_METRICS])
        for result, cands in zip(results, candidates):
            result.update(overlap.values(cands))
        if meteor_run is not None:
            for result, value in zip(results, meteor_run.values()):
                result["meteor"] = value
        if spice is not None:
            for result, cands in zip(results, candidates):
                result["spice"] = spice_value(spice, cands, refs_tok)
        finished = True
    finally:
        if isinstance(meteor_run, PythonMeteorRun):
            meteor_run.close()
        if meteor is not None and finished:
            keep_meteor_jar(meteor)
        elif meteor is not None:  # a jar left mid-exchange would answer the next request with old replies
            meteor.close()
    order = [key for name in COCO_GROUP if name in names for key in COCO_KEYS[name]]
    return [{key: result[key] for key in order} for result in results]


COCO_BACKENDS = ("python", "java")


def check_coco_backend(coco_backend: str) -> str:
    if coco_backend not in COCO_BACKENDS:
        raise InputError(f"coco_backend: {coco_backend!r} is not one of {COCO_BACKENDS} (python, the default: no "
                         "Java; java: pycocoevalcap's jars, for cross-checking)")
    return coco_backend


def tokenize_blocks(blocks: Sequence[Sequence[str]], coco_backend: str) -> List[List[str]]:
    """Each block tokenized as one pycocoevalcap ``PTBTokenizer.tokenize`` call would (:func:`ptb_tokenize_blocks`
    on the jar, or :func:`capeval.text.ptb.tokenize_block`, equal to it, in Python)."""
    if coco_backend == "java":
        return ptb_tokenize_blocks(blocks)
    return [tokenize_block(block) for block in blocks]


METEOR_PROCESSES_FROM = 4000  # segments: from this many on, METEOR's alignments are split over two processes


class PythonMeteorRun:
    """Every system's METEOR in Python (:mod:`capeval.text.meteor`): the jar's segment scores, its corpus score and
    statistics whose sums the jar scores as it scores a corpus (no JVM, on resamples either). From
    :data:`METEOR_PROCESSES_FROM` segments on, the alignments run in worker processes, started here, while the
    caller scores the other metrics; :meth:`values` waits for them."""

    def __init__(self, systems: List[List[str]], references: List[List[str]]):
        from capeval.text.meteor import shared_meteor

        candidates = [c for captions in systems for c in captions]
        processes = min(2, os.cpu_count() or 1) if len(candidates) >= METEOR_PROCESSES_FROM else 1
        self.images = len(references)
        self.pending = shared_meteor().start_statistics(candidates, references * len(systems), processes=processes)

    def values(self) -> List[KeyScores]:
        stats = self.pending.result()
        values = []
        for start in range(0, len(stats), self.images):
            per_unit = stats[start:start + self.images]
            values.append(KeyScores(float(combine(per_unit.sum(axis=0))[0]), segment_score(per_unit).tolist(),
                                    CorpusStatistics(per_unit, combine)))
        return values

    def close(self) -> None:
        """Stop its worker processes (after :meth:`values`, or when the call failed before it)."""
        self.pending.close()


def _group_metrics(metrics: Optional[Sequence[str]]) -> List[str]:
    if metrics is None:
        return list(coco_group_names())
    if isinstance(metrics, str):
        metrics = [metrics]
    unknown = [m for m in metrics if m not in COCO_GROUP]
    if unknown:
        raise InputError(f"metrics: {unknown[0]!r} is not in the COCO group; known: {', '.join(COCO_GROUP)}")
    if not metrics:
        raise InputError("metrics is empty: name at least one of " + ", ".join(COCO_GROUP))
    return [m for m in COCO_GROUP if m in metrics]


def _check_systems(systems: Sequence[Sequence[str]], n: int) -> List[List[str]]:
    if isinstance(systems, str) or not systems:
        raise InputError("systems must be a non-empty list with one list of captions per system")
    checked = []
    for s, captions in enumerate(systems):
        captions = check_captions(captions, f"systems[{s}]", empty=True)
        if len(captions) != n:
            raise InputError(f"systems[{s}] has {len(captions)} captions for {n} reference lists")
        checked.append(captions)
    return checked


def _named_texts(systems: List[List[str]], references: List[List[str]], systems_field: str):
    """Every caption and reference with its name in errors (``systems_field``: how the captions are named,
    ``systems[s][i]``; ``predictions[i]`` for one system)."""
    one = systems_field != "systems"
    texts = [(f"{systems_field}{'' if one else f'[{s}]'}[{i}]", c)
             for s, captions in enumerate(systems) for i, c in enumerate(captions)]
    return texts + [(f"references[{i}][{j}]", r) for i, refs in enumerate(references) for j, r in enumerate(refs)]


def _refuse_line_breaks(systems: List[List[str]], references: List[List[str]], systems_field: str = "systems"
                        ) -> None:
    for where, text in _named_texts(systems, references, systems_field):
        refuse_line_break(text, where)


def _refuse_empty_for_spice(systems: List[List[str]], references: List[List[str]], systems_field: str) -> None:
    for where, text in _named_texts(systems, references, systems_field):
        if is_empty_caption(text):
            raise InputError(f"{where} is an empty caption: spice does not score empty captions; leave spice out "
                             "(the other COCO metrics score them as pycocoevalcap does)")


def _regroup(flat: List[str], sizes: List[int]) -> List[List[str]]:
    out, start = [], 0
    for size in sizes:
        out.append(flat[start:start + size])
        start += size
    return out


# BLEU-1..4, ROUGE-L, CIDEr-D: pure Python/numpy, equal to pycocoevalcap's (capeval.text.bleu / rouge / cider)

OVERLAP_METRICS = ("bleu", "rouge_l", "cider")


def bleu_values(stats: np.ndarray) -> Dict[str, KeyScores]:
    """BLEU-1..4 of one system from its per-image statistics (``BleuReferences.statistics``)."""
    rows = stats.tolist()
    per_image = [bleu_scores(row) for row in rows]
    totals = [sum(column) for column in zip(*rows)]
    per_unit = np.asarray(stats, dtype=np.float64)
    return {key: KeyScores(bleu_from_statistics(totals, order), [scores[order - 1] for scores in per_image],
                           CorpusStatistics(per_unit, functools.partial(combine_bleu, order=order)))
            for order, key in enumerate(BLEU_KEYS, start=1)}


def mean_value(scores: np.ndarray) -> KeyScores:
    """A metric whose corpus value is the mean of its per-image scores (ROUGE-L, CIDEr-D), as pycocoevalcap's."""
    return KeyScores(float(np.mean(scores)), [float(s) for s in scores], mean_statistics(scores))


class OverlapReferences:
    """The reference side of BLEU, ROUGE-L and CIDEr-D (``metrics``, a subset of :data:`OVERLAP_METRICS`), computed
    once for every system; BLEU and CIDEr-D share the references' n-grams."""

    def __init__(self, references: List[List[str]], metrics: Sequence[str]):
        ngrams = ReferenceNgrams(references) if {"bleu", "cider"} & set(metrics) else None
        self.ngrams = ngrams
        self.bleu = BleuReferences(ngrams) if "bleu" in metrics else None
        self.rouge = RougeReferences(references) if "rouge_l" in metrics else None
        self.cider = CiderReferences(ngrams) if "cider" in metrics else None

    def values(self, candidates: List[str]) -> Dict[str, KeyScores]:
        """One system's values: ``bleu_1`` .. ``bleu_4``, ``rouge_l``, ``cider`` (those asked for)."""
        values: Dict[str, KeyScores] = {}
        encoded = self.ngrams.encode(candidates) if self.ngrams is not None else None
        if self.bleu is not None:
            values.update(bleu_values(self.bleu.statistics(encoded)))
        if self.rouge is not None:
            values["rouge_l"] = mean_value(self.rouge.scores(candidates))
        if self.cider is not None:
            values["cider"] = mean_value(self.cider.scores(encoded))
        return values
