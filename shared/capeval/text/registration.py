"""Text metrics registration: pycocoevalcap BLEU/METEOR/ROUGE-L/CIDEr-D/SPICE, fixed-IDF CIDEr-D, spaCy noun/verb
overlap, and MPNetScore with its weights."""

from __future__ import annotations

from capeval.core.hub import WeightSpec, register
from capeval.core.scoring import register_group, register_scorer

MPNET_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt")

for _metric, _factory, _help in (
        ("bleu", "BleuScorer", "BLEU-1..4 (pycocoevalcap, PTB-tokenised; corpus values are pycocoevalcap's)"),
        ("meteor", "MeteorScorer", "METEOR 1.5 (pycocoevalcap's, computed in Python by default)"),
        ("rouge_l", "RougeLScorer", "ROUGE-L (pycocoevalcap)"),
        ("cider", "CiderScorer", "CIDEr-D (pycocoevalcap; IDF over the scored corpus)"),
        ("spice", "SpiceScorer", "SPICE (pycocoevalcap; needs Java and the Stanford CoreNLP jars)")):
    register_scorer(_metric, factory=f"capeval.text.coco:{_factory}", images="unused", references="required",
                    help=_help, group="coco")
register_group("coco", members="capeval.text.coco:coco_group_names",
               help="BLEU-1..4, METEOR, ROUGE-L, CIDEr-D and SPICE (where its jars exist), as pycocoevalcap")
register_scorer("cider_fixed_idf", factory="capeval.text.fixed_idf_cider:FixedIdfCiderScorer", images="unused",
                references="required",
                help="CIDEr-D with document frequencies fixed from a reference corpus (key: cider)",
                card="capeval.text:module_cards.toml")
register_scorer("noun_verb_overlap", factory="capeval.text.noun_verb_overlap:noun_verb_overlap",
                images="unused", references="required",
                help="exact/fuzzy noun and verb overlap with the joined references (spaCy)",
                card="capeval.text:module_cards.toml")

register(WeightSpec(
    name="all-mpnet-base-v2", repo_id="sentence-transformers/all-mpnet-base-v2",
    revision="e8c3b32edf5434bc2275fc9bab85f82640a19130", files=MPNET_FILES, format="transformers",
    license="apache-2.0", source_url="https://huggingface.co/sentence-transformers/all-mpnet-base-v2",
    description="Sentence embeddings for MPNetScore",
))
register_scorer("mpnet_score", factory="capeval.text.mpnet:MPNetScorer", images="unused", references="required",
                help="MPNetScore: all-mpnet-base-v2 cosine, mean over references")
