"""Polos registration: the SimCSE encoder and head weights, the official-checkpoint converter, the scorer and
the M²LHF trainers."""

from __future__ import annotations

from capeval.core.convert import register_converter
from capeval.core.hub import Upstream, WeightSpec, register
from capeval.core.scoring import register_scorer
from capeval.core.training import register_trainer
from capeval.polos.checkpoint import HEAD_FILES, HEAD_LICENSE, OFFICIAL_TEXT_ENCODER, SIMCSE_FILES

register(WeightSpec(
    name="simcse-roberta-base", repo_id=OFFICIAL_TEXT_ENCODER,
    revision="4bf73c6b5df517f74188c5e9ec159b2208c89c08", files=SIMCSE_FILES, format="transformers",
    license="mit", source_url="https://github.com/princeton-nlp/SimCSE",
    description="Supervised SimCSE RoBERTa-base (Polos' text encoder)",
))
register(WeightSpec(
    name="polos", repo_id="capeval/polos", revision="main", files=HEAD_FILES, format="safetensors",
    license=HEAD_LICENSE, source_url="https://github.com/keio-smilab24/Polos (reprod.ckpt)",
    description="Polos scalar mix + MLP head converted from the official checkpoint",
    upstream=Upstream("reprod.zip", "polos", url="https://polos-polaris.s3.ap-northeast-1.amazonaws.com/reprod.zip",
                      page="https://github.com/keio-smilab24/Polos (README, Checkpoint)", member="*.ckpt",
                      beside=("hparams.yaml",)),
))


register_converter("polos", converter="capeval.polos.checkpoint:convert_polos",
                   help="Polos reprod.ckpt (PyTorch-Lightning; hparams.yaml beside it is checked) -> "
                        "polos_head.safetensors + polos_config.json")
register_scorer("polos", factory="capeval.polos.scorer:PolosScorer", images="required", references="required",
                help="Polos (Wada et al. 2024): CLIP + SimCSE features -> MLP, max over references",
                card="capeval.polos:module_cards.toml")
register_trainer("polos", configure="capeval.polos.training:configure_training", run="capeval.polos.training:train_polos",
                 help="M2LHF: train the Polos head on human judgments with frozen CLIP/SimCSE encoders")
register_trainer("polos-features", configure="capeval.polos.training:configure_features",
                 run="capeval.polos.training:run_polos_features",
                 help="M2LHF step 1, shardable: the frozen CLIP/SimCSE outputs of judgments, for `train polos --train`")
