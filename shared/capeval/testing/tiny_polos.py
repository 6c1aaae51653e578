"""Tiny random stand-ins for the weights of polos/registration.py (tests and demos only)."""

from __future__ import annotations

import json
from pathlib import Path

from capeval.polos.checkpoint import head_config, write_head


def tiny_roberta(out_dir: Path) -> None:
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


def tiny_polos_head(out_dir: Path) -> None:
    import torch

    from capeval.polos.scorer import head_from_config

    config = head_config(text_dim=16, clip_dim=32, hidden=(24, 12))
    torch.manual_seed(5)
    head = head_from_config(config)
    with torch.no_grad():
        head.scalar_parameters.normal_()
        head.gamma.fill_(0.7)
    write_head(out_dir, head.state_dict(), config)
