"""Polos family: the SimCSE-RoBERTa encoder, the Polos head artifact, its converter and its scorer."""

from __future__ import annotations

import json
from pathlib import Path

from capeval.convert import load_torch_checkpoint, register_converter, write_model_card
from capeval.hub import WeightSpec, register
from capeval.scoring import register_scorer
from capeval.training import register_trainer

SIMCSE_FILES = ("config.json", "pytorch_model.bin", "vocab.json", "merges.txt", "tokenizer_config.json",
                "special_tokens_map.json")
HEAD_FILES = ("polos_config.json", "polos_head.safetensors")
NUM_LAYERS = 13


def _tiny_roberta(out_dir: Path) -> None:
    """12-layer (13 hidden states, as RoBERTa-base), 16-wide random RoBERTa with a byte-level BPE vocabulary."""
    import torch
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    out_dir.mkdir(parents=True, exist_ok=True)
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {tok: i for i, tok in enumerate(specials + sorted(set(bytes_to_unicode().values())) + ["<mask>"])}
    RobertaTokenizer(vocab=vocab, merges=[]).save_pretrained(str(out_dir))
    (out_dir / "vocab.json").write_text(json.dumps(vocab))  # the hub repo's files, whatever save_pretrained wrote
    (out_dir / "merges.txt").write_text("#version: 0.2\n")
    torch.manual_seed(4)
    config = RobertaConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=12, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=600, pad_token_id=1, bos_token_id=0,
                           eos_token_id=2)
    model = RobertaModel(config)
    with torch.no_grad():  # fresh LayerNorms output mean 0 / var 1 per token, hiding batch-statistics effects
        for name, param in model.named_parameters():
            if "LayerNorm" in name:
                param.normal_(0.5 if name.endswith("weight") else 0.0, 0.5)
    model.save_pretrained(str(out_dir))
    # the hub repo ships pytorch_model.bin (read by transformers with weights_only=True)
    (out_dir / "model.safetensors").unlink(missing_ok=True)
    torch.save(model.state_dict(), out_dir / "pytorch_model.bin")
    if not (out_dir / "special_tokens_map.json").exists():
        (out_dir / "special_tokens_map.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>",
                                                                     "pad_token": "<pad>", "unk_token": "<unk>"}))


def write_head(out_dir: Path, state_dict, *, text_dim: int, clip_dim: int, hidden, clip_weights: str,
               text_encoder: str, extra=None) -> None:
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    config = {"feature_dim": 4 * text_dim + 6 * clip_dim, "text_dim": text_dim, "clip_dim": clip_dim,
              "hidden": list(hidden), "num_layers": NUM_LAYERS, "clip_weights": clip_weights,
              "text_encoder": text_encoder, **(extra or {})}
    (out_dir / "polos_config.json").write_text(json.dumps(config, indent=2))
    save_file({k: v.float().contiguous() for k, v in state_dict.items()}, str(out_dir / "polos_head.safetensors"))


def _tiny_head(out_dir: Path) -> None:
    import torch

    from capeval.scorers.polos import PolosHead

    torch.manual_seed(5)
    head = PolosHead(4 * 16 + 6 * 32, (24, 12), NUM_LAYERS)
    with torch.no_grad():
        head.scalar_parameters.normal_()
    write_head(out_dir, head.state_dict(), text_dim=16, clip_dim=32, hidden=(24, 12),
               clip_weights="openai-clip-vit-b-32", text_encoder="simcse-roberta-base")


register(WeightSpec(
    name="simcse-roberta-base", repo_id="princeton-nlp/sup-simcse-roberta-base",
    revision="4bf73c6b5df517f74188c5e9ec159b2208c89c08", files=SIMCSE_FILES, format="transformers",
    license="mit", source_url="https://github.com/princeton-nlp/SimCSE",
    description="Supervised SimCSE RoBERTa-base (Polos' text encoder)", tiny_factory=_tiny_roberta,
))
register(WeightSpec(
    name="polos", repo_id="capeval/polos", revision="main", files=HEAD_FILES, format="safetensors",
    license="bsd-3-clause-clear", source_url="https://github.com/keio-smilab24/Polos (reprod.ckpt)",
    description="Polos scalar mix + MLP head converted from the official checkpoint", tiny_factory=_tiny_head,
))

# official Lightning keys -> ours
_MLP_KEYS = {f"ff.0.ff.linear_{i}.{p}": f"mlp.{j}.{p}" for i, j in ((1, 0), (2, 3), (3, 6)) for p in ("weight", "bias")}


def official_to_head_state(state_dict):
    """Map the official checkpoint's trained keys to :class:`PolosHead`; encoders' keys are not needed."""
    import torch

    missing = [k for k in _MLP_KEYS if k not in state_dict]
    missing += [f"scalar_mix.scalar_parameters.{i}" for i in range(NUM_LAYERS)
                if f"scalar_mix.scalar_parameters.{i}" not in state_dict]
    if "scalar_mix.gamma" not in state_dict:
        missing.append("scalar_mix.gamma")
    if missing:
        raise ValueError(f"not an official Polos checkpoint: missing {missing[:5]}")
    head = {ours: state_dict[theirs] for theirs, ours in _MLP_KEYS.items()}
    head["scalar_parameters"] = torch.stack([state_dict[f"scalar_mix.scalar_parameters.{i}"].reshape(())
                                             for i in range(NUM_LAYERS)])
    head["gamma"] = state_dict["scalar_mix.gamma"].reshape(1)
    return head


def head_config(head_state) -> dict:
    """The config of an official head (RoBERTa-base text features, CLIP ViT-B/32 encoders)."""
    h1, feature_dim = head_state["mlp.0.weight"].shape
    text_dim = 768
    return {"feature_dim": int(feature_dim), "text_dim": text_dim, "clip_dim": int(feature_dim - 4 * text_dim) // 6,
            "hidden": [int(h1), int(head_state["mlp.3.weight"].shape[0])], "num_layers": NUM_LAYERS,
            "clip_weights": "openai-clip-vit-b-32", "text_encoder": "simcse-roberta-base"}


@register_converter("polos", help="Polos reprod.ckpt (PyTorch-Lightning) -> polos_head.safetensors + config")
def convert_polos(official: Path, out_dir: Path) -> None:
    checkpoint = load_torch_checkpoint(official)
    head = official_to_head_state(checkpoint.get("state_dict", checkpoint))
    config = head_config(head)
    write_head(out_dir, head, text_dim=config["text_dim"], clip_dim=config["clip_dim"], hidden=config["hidden"],
               clip_weights=config["clip_weights"], text_encoder=config["text_encoder"])
    write_model_card(out_dir, title="Polos head (capeval layout)", source=official.name, license="bsd-3-clause-clear",
                     body="The scalar mix (13 layers + gamma) and MLP of the official Polos checkpoint. Encoders: "
                          "CLIP ViT-B/32 (`openai-clip-vit-b-32`) and `princeton-nlp/sup-simcse-roberta-base`.")


@register_scorer("polos", needs_images=True, needs_references=True,
                 help="Polos (Wada et al. 2024): CLIP + SimCSE features -> MLP, max over references")
def polos(weights: str = "polos", **options):
    from capeval.scorers.polos import PolosScorer

    return PolosScorer(weights, **options)


def _configure_training(parser) -> None:
    from capeval.polos_training import Recipe

    parser.add_argument("--train", required=True, help='JSONL/parquet rows {"image", "candidate", "references", "score"}')
    parser.add_argument("--val", required=True, help="validation rows, same format")
    parser.add_argument("--images", help="directory the 'image' paths are relative to")
    parser.add_argument("--out", required=True, help="output directory (hub-ready head artifact + card)")
    parser.add_argument("--init", default="polos", help="head to start from (registry name, hub id or directory)")
    parser.add_argument("--lr", type=float, default=Recipe.lr, help="Adam learning rate (official 3e-5)")
    parser.add_argument("--max-epochs", type=int, default=Recipe.max_epochs)
    parser.add_argument("--device", default="auto")


@register_trainer("polos", configure=_configure_training,
                  help="M2LHF: train the Polos head on human judgments with frozen CLIP/SimCSE encoders")
def train_polos(args) -> Path:
    from capeval.polos_training import Recipe, read_judgments, train_head
    from capeval.scorers.polos import PolosScorer

    scorer = PolosScorer(args.init, device=args.device)
    recipe = Recipe(lr=args.lr, max_epochs=args.max_epochs)
    history = train_head(scorer, read_judgments(args.train, args.images), read_judgments(args.val, args.images), recipe)
    out = Path(args.out)
    config = scorer.config
    write_head(out, scorer.head.state_dict(), text_dim=config["text_dim"], clip_dim=config["clip_dim"],
               hidden=config["hidden"], clip_weights=config["clip_weights"], text_encoder=config["text_encoder"])
    (out / "training.json").write_text(json.dumps({"recipe": vars(recipe), "history": history}, indent=2))
    best = max(history, key=lambda h: h["pearson"])
    write_model_card(out, title="Polos head (trained with capeval M2LHF)", source=f"{args.train} / {args.val}",
                     license="bsd-3-clause-clear",
                     body=f"Best validation Pearson {best['pearson']:.4f} (MSE {best['mse']:.5f}) at epoch "
                          f"{best['epoch']}; recipe {vars(recipe)}.")
    return out
