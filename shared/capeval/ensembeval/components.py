"""EnsembEval's component catalogue and the official weights with their provenance (data only)."""

from __future__ import annotations

from typing import Dict, NamedTuple


class Component(NamedTuple):
    scorer: str  # registered capeval scorer producing it
    official_name: str  # the metric's name in the official code and weights file
    needs_references: bool


# Every candidate of the original search (minus SPICE sub-scores and CLIPImageScore), by capeval output key.
COMPONENTS: Dict[str, Component] = {
    "blip2_score": Component("blip2_score", "BLIP2Score", False),
    "polos": Component("polos", "polos", True),
    "clip_s": Component("clip_s", "CLIPScore", False),
    "refclip_s": Component("clip_s", "RefCLIPScore", True),
    "pac_s": Component("pac_s", "PACScore", False),
    "refpac_s": Component("pac_s", "RefPACScore", True),
    "bleu_1": Component("bleu", "BLEU1", True),
    "bleu_2": Component("bleu", "BLEU2", True),
    "bleu_3": Component("bleu", "BLEU3", True),
    "bleu_4": Component("bleu", "BLEU4", True),
    "meteor": Component("meteor", "METEOR", True),
    "rouge_l": Component("rouge_l", "ROUGE", True),
    "cider": Component("cider", "CIDEr", True),
    "spice": Component("spice", "SPICE", True),
    "mpnet_score": Component("mpnet_score", "MPNetScore", True),
    "exact_noun_overlap": Component("noun_verb_overlap", "Exact noun overlap", True),
    "fuzzy_noun_overlap": Component("noun_verb_overlap", "Fuzzy noun overlap", True),
    "exact_verb_overlap": Component("noun_verb_overlap", "Exact verb overlap", True),
    "fuzzy_verb_overlap": Component("noun_verb_overlap", "Fuzzy verb overlap", True),
}

OFFICIAL_WEIGHTS = {
    "format": "capeval-ensembeval-weights/1",
    "name": "official",
    "weights": {  # coef_ of the official LinearRegression; no intercept is used
        "blip2_score": 0.8274333922692476,
        "polos": 0.6228690619075461,
        "pac_s": 0.291263618044046,
        "refclip_s": -0.16006389033030913,
        "exact_noun_overlap": 0.07592364139733229,
        "rouge_l": -0.0724533563543587,
        "bleu_1": 0.06679993033857672,
        "cider": -0.021775644060801347,
        "fuzzy_verb_overlap": 0.01857124581057623,
    },
    "provenance": {
        "source": "https://github.com/uriberger/caption_evaluation (ensemble_weights.json)",
        "paper": "Berger et al. 2025, Surveying the Landscape of Image Captioning Evaluation",
        "data": "Polaris train split, one row per human judgment",
        "procedure": "sklearn SequentialFeatureSelector(LinearRegression(), direction='forward', tol=1e-4, "
                     "cv=5 unshuffled KFold, R^2) over ~19 candidate metrics, then LinearRegression on the "
                     "selected ones; coef_ kept, intercept dropped",
        "component_versions": {
            "blip2_score": "LAVIS blip2_image_text_matching 'pretrain' (ViT-g), ITC head",
            "polos": "Polos reprod.ckpt (CLIP ViT-B/32, SimCSE RoBERTa-base)",
            "pac_s": "PAC-S clip_ViT-B-32.pth, w = 2.0",
            "refclip_s": "OpenAI CLIP ViT-B/32, w = 2.5",
            "exact_noun_overlap": "spaCy en_core_web_sm (lg when installed)",
            "fuzzy_verb_overlap": "spaCy en_core_web_sm (lg when installed)",
            "rouge_l": "pycocoevalcap ROUGE-L, PTB tokenisation",
            "bleu_1": "pycocoevalcap BLEU-1, PTB tokenisation",
            "cider": "pycocoevalcap CIDEr-D, IDF over the scored corpus, PTB tokenisation",
        },
    },
}
