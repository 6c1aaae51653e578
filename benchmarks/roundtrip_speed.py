"""Seconds per caption of the image round-trip metric with the default generator architecture (SD-Turbo: the
Stable Diffusion 2.1 UNet, OpenCLIP ViT-H text encoder and SD VAE) and the default ViT-g/14 CLIP image encoder,
all with random weights (speed does not depend on the weights).

    python benchmarks/roundtrip_speed.py --captions 1 --steps 1 --device cpu
"""

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from PIL import Image

SD_TURBO_UNET = dict(
    sample_size=64, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(320, 640, 1280, 1280),
    down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
    cross_attention_dim=1024, attention_head_dim=(5, 10, 20, 20), use_linear_projection=True)
SD_TURBO_TEXT = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=23, num_attention_heads=16,
                     max_position_embeddings=77, hidden_act="gelu", projection_dim=512)
SD_VAE = dict(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(128, 256, 512, 512),
              layers_per_block=2, down_block_types=("DownEncoderBlock2D",) * 4,
              up_block_types=("UpDecoderBlock2D",) * 4, sample_size=512)


def write_random_sd_turbo(out_dir: Path) -> Path:
    """The full-size SD-Turbo architecture with random weights, in the diffusers layout (tiny tokenizer)."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from capeval.image_roundtrip.registration import write_tiny_sd_turbo

    write_tiny_sd_turbo(out_dir)  # tokenizer, scheduler and model index; the models are replaced below
    vocab = json.loads((out_dir / "tokenizer" / "vocab.json").read_text())
    torch.manual_seed(0)
    CLIPTextModel(CLIPTextConfig(vocab_size=len(vocab), bos_token_id=vocab["<|startoftext|>"],
                                 eos_token_id=vocab["<|endoftext|>"], pad_token_id=vocab["<|endoftext|>"],
                                 **SD_TURBO_TEXT)).save_pretrained(str(out_dir / "text_encoder"))
    UNet2DConditionModel(**SD_TURBO_UNET).save_pretrained(str(out_dir / "unet"))
    AutoencoderKL(**SD_VAE).save_pretrained(str(out_dir / "vae"))
    return out_dir


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--captions", type=int, default=1)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--generation-dtype", default="auto")
    parser.add_argument("--generation-batch-size", type=int, default=4)
    parser.add_argument("--clip-arch", default="ViT-g-14")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from capeval.bench import random_clip_dir
    from capeval.backbones.image_features import ClipImageFeatures
    from capeval.image_roundtrip.pipeline import DiffusersGenerator
    from capeval.image_roundtrip.scorer import ImageRoundTripScorer

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        generator = DiffusersGenerator(str(write_random_sd_turbo(tmp / "sd")), steps=args.steps, height=args.size,
                                       width=args.size, device=args.device, dtype=args.generation_dtype,
                                       batch_size=args.generation_batch_size)
        features = ClipImageFeatures(str(random_clip_dir(args.clip_arch, tmp / "clip")), device=args.device)
        setup = time.perf_counter() - start
        scorer = ImageRoundTripScorer(generator, features=features, use_image_cache=False)
        sync = torch.cuda.synchronize if generator.device.type == "cuda" else (lambda: None)
        images = [Image.new("RGB", (640, 480), (i % 256, 90, 160)) for i in range(args.captions)]
        if generator.device.type == "cuda":  # warm-up (kernels, allocator) on a caption not timed below
            scorer.score(["warm-up caption"], images[:1])
        sync()
        start = time.perf_counter()
        scorer.score([f"a photo of a dog number {i} on the grass" for i in range(args.captions)], images)
        sync()
        seconds = time.perf_counter() - start
    print(json.dumps({"device": str(generator.device), "generation_dtype": generator.settings["dtype"],
                      "steps": args.steps, "size": args.size, "captions": args.captions,
                      "clip_arch": args.clip_arch, "setup_seconds": setup, "seconds": seconds,
                      "seconds_per_caption": seconds / args.captions}, indent=2))


if __name__ == "__main__":
    main()
