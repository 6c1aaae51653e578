"""BLIP-2 family: the ``Salesforce/blip2-itm-vit-g`` image-text matching weights (transformers
``Blip2ForImageTextRetrieval`` layout) and the BLIP2Score scorer."""

from __future__ import annotations

from capeval.core.hub import WeightSpec, register
from capeval.core.scoring import register_scorer

BLIP2_FILES = ("config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt")


register(WeightSpec(
    name="blip2-itm-vit-g", repo_id="Salesforce/blip2-itm-vit-g",
    revision="520bf73fd0ef6ccce791cd3f06908040aef2d8cc", files=BLIP2_FILES,
    format="transformers", license="mit", source_url="https://github.com/salesforce/LAVIS",
    description="BLIP-2 first-stage (\"pretrain\") image-text matching model, EVA ViT-g + Q-Former",
))


register_scorer("blip2_score", factory="capeval.blip2.scorer:Blip2Scorer", images="required", references="unused",
                help="BLIP2Score: max over Q-Former queries of the BLIP-2 ITC cosine (EnsembEval component)",
                card="capeval.blip2:module_cards.toml")
