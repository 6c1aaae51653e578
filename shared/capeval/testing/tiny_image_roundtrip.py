"""Tiny random stand-ins for the weights of image_roundtrip/registration.py (tests and demos only)."""

from __future__ import annotations

import json
from pathlib import Path

_TINY_MERGES = 300  # the first CLIP BPE merges: enough for short English words


def _write_tiny_clip_tokenizer(out_dir: Path) -> dict:
    """CLIP's byte-level BPE cut down to its 512 byte tokens and first merges (diffusers tokenizer layout)."""
    from open_clip.tokenizer import SimpleTokenizer

    bpe = SimpleTokenizer()
    merges = [pair for pair, _ in sorted(bpe.bpe_ranks.items(), key=lambda item: item[1])][:_TINY_MERGES]
    tokens = [token for token, _ in sorted(bpe.encoder.items(), key=lambda item: item[1])][:512]
    tokens += ["".join(pair) for pair in merges] + ["<|startoftext|>", "<|endoftext|>"]
    vocab = {token: i for i, token in enumerate(dict.fromkeys(tokens))}
    special = {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
               "pad_token": "<|endoftext|>"}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (out_dir / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    (out_dir / "special_tokens_map.json").write_text(json.dumps(special))
    (out_dir / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "CLIPTokenizer", "model_max_length": 77, **special}))
    return vocab


def write_tiny_sd_turbo(out_dir: Path, seed: int = 0) -> None:
    """A tiny random Stable Diffusion pipeline shaped like SD-Turbo's (linear-projection cross attention, GELU
    CLIP text encoder, Euler scheduler with trailing timesteps), written in the diffusers layout."""
    import torch
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    vocab = _write_tiny_clip_tokenizer(out_dir / "tokenizer")
    torch.manual_seed(seed)
    text_encoder = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(vocab), hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=77, hidden_act="gelu", projection_dim=32, bos_token_id=vocab["<|startoftext|>"],
        eos_token_id=vocab["<|endoftext|>"], pad_token_id=vocab["<|endoftext|>"]))
    unet = UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, attention_head_dim=(2, 4), use_linear_projection=True, norm_num_groups=16)
    # four blocks: the VAE shrinks images 8x, as SD-Turbo's does (with two, a 512-pixel image left the UNet attending
    # over 65,536 latent positions: minutes per generation on a CPU)
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(16, 32, 32, 32), layers_per_block=1,
        down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
        norm_num_groups=16, sample_size=32)
    scheduler = EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                       timestep_spacing="trailing", steps_offset=1, prediction_type="epsilon")
    text_encoder.save_pretrained(str(out_dir / "text_encoder"))
    for name, component in (("unet", unet), ("vae", vae), ("scheduler", scheduler)):
        component.save_pretrained(str(out_dir / name))
    components = {"scheduler": ["diffusers", "EulerDiscreteScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
                  "tokenizer": ["transformers", "CLIPTokenizer"], "unet": ["diffusers", "UNet2DConditionModel"],
                  "vae": ["diffusers", "AutoencoderKL"], "safety_checker": [None, None],
                  "feature_extractor": [None, None], "requires_safety_checker": False}
    (out_dir / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline", **components},
                                                         indent=2))


def write_tiny_dinov2(out_dir: Path, seed: int = 0) -> None:
    """A tiny random DINOv2 (1 layer, 32 wide, patch 14) and the official preprocessing config."""
    import torch
    from transformers import Dinov2Config, Dinov2Model

    torch.manual_seed(seed)
    config = Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, mlp_ratio=2, patch_size=14,
                          image_size=518)
    Dinov2Model(config).save_pretrained(str(out_dir), safe_serialization=True)
    (out_dir / "preprocessor_config.json").write_text(json.dumps({
        "crop_size": {"height": 224, "width": 224}, "do_center_crop": True, "do_convert_rgb": True,
        "do_normalize": True, "do_rescale": True, "do_resize": True, "image_mean": [0.485, 0.456, 0.406],
        "image_std": [0.229, 0.224, 0.225], "image_processor_type": "BitImageProcessor", "resample": 3,
        "rescale_factor": 1 / 255, "size": {"shortest_edge": 256}}, indent=2))
