"""Tiny random stand-ins for the weights of blip2/registration.py (tests and demos only)."""

from __future__ import annotations

from pathlib import Path

_TINY_WORDS = ("a an the of on in with and is are dog cat man woman car red blue field grass street "
               "runs sits photo picture two people riding bike ball playing white black").split()


def write_tiny_blip2(out_dir: Path, seed: int = 0) -> None:
    """A tiny random ``Blip2ForImageTextRetrieval`` (1-layer towers, 32 query tokens) and a tiny BERT vocab."""
    import torch
    from transformers import BertTokenizer, Blip2Config, Blip2ForImageTextRetrieval

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_TINY_WORDS,
             *"abcdefghijklmnopqrstuvwxyz0123456789", *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz")]
    (out_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(out_dir / "vocab.txt"), do_lower_case=True).save_pretrained(str(out_dir))
    config = Blip2Config(
        vision_config={"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 224, "patch_size": 32},
        qformer_config={"vocab_size": len(vocab), "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                        "intermediate_size": 37, "max_position_embeddings": 64, "cross_attention_frequency": 1,
                        "encoder_hidden_size": 32, "use_qformer_text_input": True},
        num_query_tokens=32, image_text_hidden_size=16,
    )
    torch.manual_seed(seed)
    model = Blip2ForImageTextRetrieval(config)
    with torch.no_grad():  # transformers initialises query tokens to zeros and the vision tower near zero
        for parameter in model.parameters():
            parameter.normal_(0, 0.2)
    model.save_pretrained(str(out_dir), safe_serialization=True)
