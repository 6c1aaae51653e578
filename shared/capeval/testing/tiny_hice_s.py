"""Tiny random stand-ins for the weights of hice_s/factual_registration.py, hice_s/registration.py (tests and demos only)."""

from __future__ import annotations

from pathlib import Path

from capeval.core.constants import OPENAI_PREPROCESS

_TINY_CORPUS = ["Generate Scene Graph: two brown dogs run on the green grass",
                "( dogs , is , 2 ) , ( dogs , is , brown ) , ( dogs , run on , grass ) , ( grass , is , green )",
                "Generate Scene Graph: a man riding a horse in a field near the trees",
                "( man , ride , horse ) , ( horse , in , field ) , ( field , near , trees )"]


def tiny_factual_factory(seed: int = 0):
    """Tiny random T5 with a Unigram tokenizer trained here (``tokenizers``, T5's special ids and Metaspace
    pre-tokenisation), in the hub repo's file layout; loads with ``AutoTokenizer``/``AutoModelForSeq2SeqLM``."""

    def write(out_dir: Path) -> None:
        import torch
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
        from transformers import T5Config, T5ForConditionalGeneration, T5TokenizerFast

        backend = Tokenizer(models.Unigram())
        backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        backend.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        backend.train_from_iterator(_TINY_CORPUS, trainers.UnigramTrainer(
            vocab_size=64, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>", show_progress=False))
        backend.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                               special_tokens=[("</s>", 1)])
        tokenizer = T5TokenizerFast(tokenizer_object=backend, eos_token="</s>", unk_token="<unk>",
                                    pad_token="<pad>", extra_ids=0)
        tokenizer.save_pretrained(str(out_dir))
        torch.manual_seed(seed)
        config = T5Config(vocab_size=len(tokenizer), d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
                          num_heads=2, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        T5ForConditionalGeneration(config).save_pretrained(str(out_dir))

    return write


def tiny_alpha_clip_factory(*, patch_size: int, image_size: int = 224, seed: int = 0):
    """Tiny random Alpha-CLIP (1 layer per tower, 64 wide, non-zero alpha kernel, the real CLIP vocabulary)."""

    def write(out_dir: Path) -> None:
        import torch

        from capeval.backbones.alpha_clip import build_alpha_clip
        from capeval.backbones.clip import save_open_clip

        cfg = {"embed_dim": 32, "quick_gelu": True,
               "vision_cfg": {"layers": 1, "width": 64, "patch_size": patch_size, "image_size": image_size},
               "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1}}
        torch.manual_seed(seed)
        model = build_alpha_clip(cfg)
        torch.nn.init.normal_(model.visual.conv1_alpha.weight, std=0.05)
        save_open_clip(out_dir, model.state_dict(), cfg, OPENAI_PREPROCESS)

    return write


def tiny_sam_factory(seed: int = 0):
    """Tiny random SAM (16-wide one-block encoder, one-block decoder) in our layout."""

    def write(out_dir: Path) -> None:
        import torch

        from capeval.backbones.sam import build_sam, save_sam

        # a 256-pixel input side (official: 1024): the automatic mask generator's 32x32 points then upsample their
        # masks to 256², not 1024², which made one image's default segmentation take about a minute on a CPU
        config = {"encoder_embed_dim": 16, "encoder_depth": 1, "encoder_num_heads": 1,
                  "encoder_global_attn_indexes": [0], "prompt_embed_dim": 16, "decoder_depth": 1,
                  "decoder_mlp_dim": 32, "decoder_num_heads": 1, "iou_head_depth": 1, "iou_head_hidden_dim": 16,
                  "mask_in_chans": 4, "image_size": 256}
        torch.manual_seed(seed)
        save_sam(out_dir, build_sam(config).state_dict(), config)

    return write


def tiny_mobile_sam_factory(seed: int = 0):
    """Tiny random MobileSAM: a 4-stage TinyViT (8–32 wide, one block per stage) and a one-block decoder."""

    def write(out_dir: Path) -> None:
        import torch

        from capeval.backbones.sam import build_sam, save_sam

        config = {"tiny_vit": {"embed_dims": [8, 16, 16, 32], "depths": [1, 1, 1, 1], "num_heads": [1, 1, 2, 2],
                               "window_sizes": [7, 7, 14, 7], "mlp_ratio": 2.0, "mbconv_expand_ratio": 2.0,
                               "local_conv_size": 3, "merge_strides": [2, 2, 1], "num_classes": 10},
                  "prompt_embed_dim": 16, "decoder_depth": 1, "decoder_mlp_dim": 32, "decoder_num_heads": 1,
                  "iou_head_depth": 1, "iou_head_hidden_dim": 16, "mask_in_chans": 4}
        torch.manual_seed(seed)
        sam = build_sam(config)
        for name, tensor in sam.image_encoder.state_dict().items():  # no zero-initialised branches
            if name.endswith(("bn.weight", "attention_biases")):
                tensor.uniform_(0.5, 1.5)
        save_sam(out_dir, sam.state_dict(), config)

    return write
