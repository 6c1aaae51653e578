"""BLIP-2 family: the ``Salesforce/blip2-itm-vit-g`` image-text matching weights (transformers
``Blip2ForImageTextRetrieval`` layout) with a tiny random stand-in, and the BLIP2Score scorer."""

from __future__ import annotations

from pathlib import Path

from capeval.hub import WeightSpec, register
from capeval.scoring import register_scorer

BLIP2_FILES = ("config.json", "model.safetensors", "tokenizer_config.json", "vocab.txt")
_TINY_WORDS = ("a an the of on in with and is are dog cat man woman car red blue field grass street "
               "runs sits photo picture two people riding bike ball playing white black").split()


def write_tiny_blip2(out_dir: Path, seed: int = 0) -> None:
    """A tiny random ``Blip2ForImageTextRetrieval`` (1-layer towers, 32 query tokens) and a tiny BERT vocab."""
    import torch
    from transformers import Blip2Config, Blip2ForImageTextRetrieval, BertTokenizer

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


register(WeightSpec(
    name="blip2-itm-vit-g", repo_id="Salesforce/blip2-itm-vit-g",
    revision="520bf73fd0ef6ccce791cd3f06908040aef2d8cc", files=BLIP2_FILES,
    format="transformers", license="mit", source_url="https://github.com/salesforce/LAVIS",
    description="BLIP-2 first-stage (\"pretrain\") image-text matching model, EVA ViT-g + Q-Former",
    tiny_factory=write_tiny_blip2,
))


@register_scorer("blip2_score", needs_images=True, needs_references=False,
                 help="BLIP2Score: max over Q-Former queries of the BLIP-2 ITC cosine (EnsembEval component)")
def blip2_score(weights: str = "blip2-itm-vit-g", **options):
    from capeval.scorers.blip2 import Blip2Scorer

    return Blip2Scorer(weights, **options)
