"""Text metrics registration: pycocoevalcap BLEU/METEOR/ROUGE-L/CIDEr-D/SPICE, fixed-IDF CIDEr-D, spaCy noun/verb
overlap, and MPNetScore with its weights."""

from __future__ import annotations

from capeval.core.hub import WeightSpec, register
from capeval.core.scoring import CACHE_OPTIONS, RUNTIME_OPTIONS, register_scorer

MPNET_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt")

for _metric, _help, _corpus_level in (
        ("bleu", "BLEU-1..4 (pycocoevalcap, PTB-tokenised; corpus values are pycocoevalcap's)", True),
        ("meteor", "METEOR 1.5 (pycocoevalcap; Java)", True),
        ("rouge_l", "ROUGE-L (pycocoevalcap)", False),
        ("cider", "CIDEr-D (pycocoevalcap; IDF over the scored corpus)", True),
        ("spice", "SPICE (pycocoevalcap; needs Stanford CoreNLP jars)", False)):
    register_scorer(_metric, factory=f"capeval.text.coco:{_metric}", images="unused", references="required",
                    options=RUNTIME_OPTIONS, help=_help, corpus_level=_corpus_level)
register_scorer("cider_fixed_idf", factory="capeval.text.fixed_idf_cider:FixedIdfCiderScorer", images="unused",
                references="required", options=("idf", *RUNTIME_OPTIONS),
                help="CIDEr-D with document frequencies fixed from a reference corpus (key: cider)")
register_scorer("noun_verb_overlap", factory="capeval.text.coco:noun_verb_overlap", images="unused",
                references="required", options=("spacy_model", *RUNTIME_OPTIONS),
                help="exact/fuzzy noun and verb overlap with the joined references (spaCy)")

register(WeightSpec(
    name="all-mpnet-base-v2", repo_id="sentence-transformers/all-mpnet-base-v2",
    revision="e8c3b32edf5434bc2275fc9bab85f82640a19130", files=MPNET_FILES, format="transformers",
    license="apache-2.0", source_url="https://huggingface.co/sentence-transformers/all-mpnet-base-v2",
    description="Sentence embeddings for MPNetScore",
))
register_scorer("mpnet_score", factory="capeval.text.mpnet:MPNetScorer", images="unused", references="required",
                options=("weights", *RUNTIME_OPTIONS, *CACHE_OPTIONS),
                help="MPNetScore: all-mpnet-base-v2 cosine, mean over references")
