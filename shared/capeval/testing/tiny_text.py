"""Tiny random stand-ins for the weights of text/registration.py (tests and demos only)."""

from __future__ import annotations

import json
from pathlib import Path


def tiny_mpnet(out_dir: Path) -> None:
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
