"""Polos family: the SimCSE-RoBERTa encoder, the Polos head artifact, the official-checkpoint converter, the
scorer and the M²LHF trainer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Tuple

from capeval.convert import load_torch_checkpoint, register_converter, write_model_card
from capeval.hub import WeightSpec, register
from capeval.scoring import register_scorer
from capeval.training import register_trainer

SIMCSE_FILES = ("config.json", "pytorch_model.bin", "vocab.json", "merges.txt", "tokenizer_config.json",
                "special_tokens_map.json")
HEAD_FILES = ("polos_config.json", "polos_head.safetensors")
NUM_LAYERS = 13
OFFICIAL_HIDDEN = (2304, 1152)
OFFICIAL_TEXT_ENCODER = "princeton-nlp/sup-simcse-roberta-base"
HEAD_LICENSE = "bsd-3-clause-clear"


def _tiny_roberta(out_dir: Path) -> None:
    """A 12-layer (13 hidden states, as RoBERTa-base), 16-wide random RoBERTa with a byte-level BPE vocabulary
    (the 256 byte symbols, no merges) in the hub repo's file layout."""
    import torch
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    out_dir.mkdir(parents=True, exist_ok=True)
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials + sorted(set(bytes_to_unicode().values())) + ["<mask>"])}
    RobertaTokenizer(vocab=vocab, merges=[]).save_pretrained(str(out_dir))
    (out_dir / "vocab.json").write_text(json.dumps(vocab))
    (out_dir / "merges.txt").write_text("#version: 0.2\n")
    if not (out_dir / "special_tokens_map.json").exists():
        (out_dir / "special_tokens_map.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>",
                                                                     "pad_token": "<pad>", "unk_token": "<unk>"}))
    torch.manual_seed(4)
    config = RobertaConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=12, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=514, pad_token_id=1, bos_token_id=0,
                           eos_token_id=2)
    model = RobertaModel(config)
    with torch.no_grad():  # fresh LayerNorms output mean 0 / var 1 per token, hiding batch-statistics effects
        for name, param in model.named_parameters():
            if "LayerNorm" in name:
                param.normal_(0.5 if name.endswith("weight") else 0.0, 0.5)
    model.save_pretrained(str(out_dir))
    (out_dir / "model.safetensors").unlink(missing_ok=True)  # the hub repo ships pytorch_model.bin
    torch.save(model.state_dict(), out_dir / "pytorch_model.bin")


def head_config(*, text_dim: int, clip_dim: int, hidden=OFFICIAL_HIDDEN, num_layers: int = NUM_LAYERS,
                clip_weights: str = "openai-clip-vit-b-32", text_encoder: str = "simcse-roberta-base") -> Dict:
    return {"feature_dim": 4 * text_dim + 6 * clip_dim, "text_dim": text_dim, "clip_dim": clip_dim,
            "hidden": [int(h) for h in hidden], "num_layers": num_layers, "clip_weights": clip_weights,
            "text_encoder": text_encoder}


def write_head(out_dir: Path, state_dict, config: Dict) -> None:
    """Our head layout: ``polos_config.json`` + ``polos_head.safetensors`` (float32)."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "polos_config.json").write_text(json.dumps(config, indent=2))
    save_file({k: v.detach().float().contiguous().cpu() for k, v in state_dict.items()},
              str(out_dir / "polos_head.safetensors"))


def _tiny_head(out_dir: Path) -> None:
    import torch

    from capeval.scorers.polos import head_from_config

    config = head_config(text_dim=16, clip_dim=32, hidden=(24, 12))
    torch.manual_seed(5)
    head = head_from_config(config)
    with torch.no_grad():
        head.scalar_parameters.normal_()
        head.gamma.fill_(0.7)
    write_head(out_dir, head.state_dict(), config)


register(WeightSpec(
    name="simcse-roberta-base", repo_id=OFFICIAL_TEXT_ENCODER,
    revision="4bf73c6b5df517f74188c5e9ec159b2208c89c08", files=SIMCSE_FILES, format="transformers",
    license="mit", source_url="https://github.com/princeton-nlp/SimCSE",
    description="Supervised SimCSE RoBERTa-base (Polos' text encoder)", tiny_factory=_tiny_roberta,
))
register(WeightSpec(
    name="polos", repo_id="capeval/polos", revision="main", files=HEAD_FILES, format="safetensors",
    license=HEAD_LICENSE, source_url="https://github.com/keio-smilab24/Polos (reprod.ckpt)",
    description="Polos scalar mix + MLP head converted from the official checkpoint", tiny_factory=_tiny_head,
))


class _InertGlobal:
    """Stands in for a class or function named in a checkpoint's metadata (e.g. Lightning callback classes used as
    dict keys): it is never the named object, runs no code and keeps no state."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


def load_lightning_checkpoint(path: Path) -> Dict:
    """A PyTorch-Lightning checkpoint via ``torch.load(weights_only=True)``; non-tensor globals in its metadata
    (callback states, hyper-parameter containers) are replaced by inert stand-ins instead of being imported."""
    import torch
    from torch.serialization import get_unsafe_globals_in_checkpoint, safe_globals

    try:
        unsafe = get_unsafe_globals_in_checkpoint(str(path))
    except (RuntimeError, ValueError):  # not a zip-format checkpoint: plain weights-only loading
        return load_torch_checkpoint(path)
    stand_ins = [(type(name.rsplit(".", 1)[-1], (_InertGlobal,), {}), name) for name in unsafe]
    with safe_globals(stand_ins):
        return torch.load(str(path), map_location="cpu", weights_only=True)


_MLP_KEYS = {f"ff.0.ff.linear_{i}.{p}": f"mlp.{j}.{p}" for i, j in ((1, 0), (2, 3), (3, 6)) for p in ("weight", "bias")}
_EXPECTED_HPARAMS = {"layer": "mix", "pool": "cls", "activations": "Tanh", "final_activation": False}


def check_official_hparams(hparams: Dict) -> None:
    """Refuse official configurations capeval does not implement (other pooling, activations or encoders)."""
    wrong = {k: hparams[k] for k, v in _EXPECTED_HPARAMS.items() if k in hparams and hparams[k] != v}
    model = hparams.get("pretrained_model", OFFICIAL_TEXT_ENCODER)
    if model != OFFICIAL_TEXT_ENCODER:
        wrong["pretrained_model"] = model
    if wrong:
        raise ValueError(f"unsupported Polos configuration {wrong}; capeval implements {_EXPECTED_HPARAMS} with "
                         f"{OFFICIAL_TEXT_ENCODER}")


def _read_hparams(checkpoint: Dict, official: Path) -> Dict:
    """``hparams.yaml`` beside the checkpoint (as the official loader reads it), else the checkpoint's own."""
    yaml_file = official.with_name("hparams.yaml")
    if yaml_file.exists():
        import yaml

        return yaml.safe_load(yaml_file.read_text()) or {}
    hparams = checkpoint.get("hyper_parameters", {}) if isinstance(checkpoint, dict) else {}
    return hparams if isinstance(hparams, dict) else {}


def official_to_head_state(state_dict: Dict) -> Dict:
    """Map the official checkpoint's trained keys to :class:`capeval.scorers.polos.PolosHead`."""
    import torch

    mix_keys = sorted((k for k in state_dict if k.startswith("scalar_mix.scalar_parameters.")),
                      key=lambda k: int(k.rsplit(".", 1)[1]))
    missing = [k for k in (*_MLP_KEYS, "scalar_mix.gamma") if k not in state_dict]
    if missing or not mix_keys:
        raise ValueError(f"not an official Polos checkpoint: missing {(missing or ['scalar_mix.scalar_parameters.*'])[:5]}")
    head = {ours: state_dict[theirs] for theirs, ours in _MLP_KEYS.items()}
    head["scalar_parameters"] = torch.stack([state_dict[k].reshape(()) for k in mix_keys])
    head["gamma"] = state_dict["scalar_mix.gamma"].reshape(1)
    return head


def official_head_config(state_dict: Dict, head: Dict) -> Dict:
    """Dimensions of an official head, cross-checked against the encoders' weights stored beside it."""
    h1, feature_dim = head["mlp.0.weight"].shape
    embeddings = state_dict.get("encoder.model.embeddings.word_embeddings.weight")
    text_dim = int(embeddings.shape[1]) if embeddings is not None else 768
    projection = state_dict.get("clip.text_projection")
    clip_dim = int(projection.shape[1]) if projection is not None else (int(feature_dim) - 4 * text_dim) // 6
    config = head_config(text_dim=text_dim, clip_dim=clip_dim, hidden=(h1, head["mlp.3.weight"].shape[0]),
                         num_layers=int(head["scalar_parameters"].numel()))
    if config["feature_dim"] != feature_dim:
        raise ValueError(f"official head takes {feature_dim} features but its encoders give 4·{text_dim} + "
                         f"6·{clip_dim} = {config['feature_dim']}")
    return config


def read_official_head(official: Path) -> Tuple[Dict, Dict]:
    """(head state dict, config) of the official ``reprod.ckpt`` (+ ``hparams.yaml`` beside it, when present)."""
    checkpoint = load_lightning_checkpoint(official)
    check_official_hparams(_read_hparams(checkpoint, official))
    state_dict = checkpoint.get("state_dict", checkpoint)
    head = official_to_head_state(state_dict)
    return head, official_head_config(state_dict, head)


@register_converter("polos", help="Polos reprod.ckpt (PyTorch-Lightning; hparams.yaml beside it is checked) -> "
                                  "polos_head.safetensors + polos_config.json")
def convert_polos(official: Path, out_dir: Path) -> None:
    head, config = read_official_head(official)
    write_head(out_dir, head, config)
    write_model_card(out_dir, title="Polos head (capeval layout)", source=official.name, license=HEAD_LICENSE,
                     body="The scalar mix (13 logits + gamma) and MLP of the official Polos checkpoint; the frozen "
                          "encoders are not copied: CLIP ViT-B/32 (`openai-clip-vit-b-32`) and "
                          f"`{OFFICIAL_TEXT_ENCODER}`. Score with `capeval score polos --weights <this dir>` or "
                          "`evaluate.load('capeval/polos', weights=...)`.")


@register_scorer("polos", needs_images=True, needs_references=True,
                 help="Polos (Wada et al. 2024): CLIP + SimCSE features -> MLP, max over references")
def polos(weights: str = "polos", **options):
    from capeval.scorers.polos import PolosScorer

    return PolosScorer(weights, **options)


def _configure_training(parser) -> None:
    from capeval.polos_training import Recipe

    parser.add_argument("--train", required=True, help="judgments: JSONL, JSON, CSV or parquet rows with image, "
                                                       "candidate, references, score (see capeval.polos_training); "
                                                       "or a feature folder of `capeval train polos-features` "
                                                       "(merged), read instead of running the encoders")
    parser.add_argument("--val", required=True, help="validation judgments or feature folder, same formats")
    parser.add_argument("--images", help="directory the image paths are relative to")
    parser.add_argument("--out", required=True, help="output directory (hub-ready head artifact + model card)")
    parser.add_argument("--init", help="head to fine-tune (registry name, hub id, directory or reprod.ckpt); "
                                       "default: a new head, as the official recipe")
    parser.add_argument("--clip-weights", default="openai-clip-vit-b-32", help="CLIP of a new head")
    parser.add_argument("--text-encoder", default="simcse-roberta-base", help="SimCSE encoder of a new head")
    parser.add_argument("--hidden", default=",".join(map(str, OFFICIAL_HIDDEN)), help="MLP hidden sizes of a new head")
    parser.add_argument("--statistics", choices=("per_sentence", "batch"), default="per_sentence",
                        help="scalar-mix statistics while training (batch: the official batch-wide ones)")
    parser.add_argument("--lr", type=float, default=Recipe.lr, help="Adam learning rate (official 3e-5)")
    parser.add_argument("--max-epochs", type=int, default=Recipe.max_epochs)
    parser.add_argument("--seed", type=int, default=Recipe.seed)
    parser.add_argument("--device", default="auto")


@register_trainer("polos", configure=_configure_training,
                  help="M2LHF: train the Polos head on human judgments with frozen CLIP/SimCSE encoders")
def train_polos(args) -> Path:
    from capeval.polos_training import Recipe, load_training_data, train_and_save

    recipe = Recipe(lr=args.lr, max_epochs=args.max_epochs, seed=args.seed, statistics=args.statistics)
    hidden = tuple(int(h) for h in str(args.hidden).split(","))
    return train_and_save(load_training_data(args.train, args.images), load_training_data(args.val, args.images),
                          Path(args.out), recipe=recipe, init=args.init, clip_weights=args.clip_weights,
                          text_encoder=args.text_encoder, hidden=hidden, device=args.device,
                          data_description=f"train {args.train}, validation {args.val}")


def _configure_features(parser) -> None:
    parser.add_argument("--data", required=True, help="judgments file (same formats as `capeval train polos --train`)")
    parser.add_argument("--images", help="directory the image paths are relative to")
    parser.add_argument("--output", required=True, help="feature folder to write (safetensors + JSON)")
    parser.add_argument("--shard", help="i/n: encode only the judgments with index %% n == i (then `capeval merge` "
                                        "the n folders)")
    parser.add_argument("--init", help="take the encoders from this head (as `capeval train polos --init`)")
    parser.add_argument("--clip-weights", default="openai-clip-vit-b-32", help="CLIP of a new head")
    parser.add_argument("--text-encoder", default="simcse-roberta-base", help="SimCSE encoder of a new head")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=64)


@register_trainer("polos-features", configure=_configure_features,
                  help="M2LHF step 1, shardable: the frozen CLIP/SimCSE outputs of judgments, for `train polos --train`")
def polos_features(args) -> Path:
    from capeval.cli import parse_shard
    from capeval.polos_training import new_scorer, precompute_features

    shard, num_shards = parse_shard(args.shard)
    scorer = new_scorer(init=args.init, clip_weights=args.clip_weights, text_encoder=args.text_encoder,
                        hidden=(8, 8), seed=0, device=args.device)  # the head is not used: encoders only
    scorer.batch_size = args.batch_size
    scorer.clip.batch_size = args.batch_size
    return precompute_features(scorer, args.data, Path(args.output), images_dir=args.images, shard=shard,
                               num_shards=num_shards)
