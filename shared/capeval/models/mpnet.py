"""all-mpnet-base-v2 weights and the MPNetScore scorer."""

from __future__ import annotations

import json
from pathlib import Path

from capeval.hub import WeightSpec, register
from capeval.scoring import register_scorer

MPNET_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt")


def _tiny_mpnet(out_dir: Path) -> None:
    """A 2-layer, 16-wide random MPNet with a small WordPiece vocabulary (letters and continuation pieces)."""
    import string

    import torch
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    tokens = ["<s>", "<pad>", "</s>", "[UNK]", "<mask>"] + list(string.ascii_lowercase + string.digits + ".,")
    tokens += [f"##{c}" for c in string.ascii_lowercase + string.digits]
    vocab = {t: i for i, t in enumerate(tokens)}
    MPNetTokenizer(vocab=vocab).save_pretrained(str(out_dir))
    (out_dir / "vocab.txt").write_text("\n".join(tokens) + "\n")
    torch.manual_seed(6)
    config = MPNetConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=514, pad_token_id=1)
    MPNetModel(config).save_pretrained(str(out_dir))
    if not (out_dir / "tokenizer_config.json").exists():
        (out_dir / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "MPNetTokenizer"}))


register(WeightSpec(
    name="all-mpnet-base-v2", repo_id="sentence-transformers/all-mpnet-base-v2",
    revision="e8c3b32edf5434bc2275fc9bab85f82640a19130", files=MPNET_FILES, format="transformers",
    license="apache-2.0", source_url="https://huggingface.co/sentence-transformers/all-mpnet-base-v2",
    description="Sentence embeddings for MPNetScore", tiny_factory=_tiny_mpnet,
))


@register_scorer("mpnet_score", needs_images=False, needs_references=True,
                 help="MPNetScore: all-mpnet-base-v2 cosine, mean over references")
def mpnet_score(weights: str = "all-mpnet-base-v2", **options):
    from capeval.scorers.mpnet import MPNetScorer

    options = {k: v for k, v in options.items() if k in ("device", "dtype", "batch_size", "cache_dir", "persist_dir")}
    return MPNetScorer(weights, **options)
