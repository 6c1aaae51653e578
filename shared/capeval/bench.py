"""``capeval throughput``: CLIP-S throughput on a full-size random CLIP, batched+cached vs a naive per-sample loop."""

from __future__ import annotations

import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Dict

import numpy as np
import torch
from PIL import Image

from capeval.core.constants import CLIPSCORE_PREFIX, OPENAI_PREPROCESS


def random_clip_dir(arch: str, out_dir: Path) -> Path:
    """Write a full-size open_clip architecture with random weights in capeval's CLIP layout."""
    import open_clip

    from capeval.backbones.clip import save_open_clip

    model_cfg = dict(open_clip.get_model_config(arch))
    model_cfg["quick_gelu"] = True
    torch.manual_seed(0)
    model = open_clip.create_model(arch, pretrained=None, force_quick_gelu=True)
    save_open_clip(out_dir, model.state_dict(), model_cfg, OPENAI_PREPROCESS)
    return out_dir


def synthetic_workload(n_images: int, n_captions: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    images = [Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)) for _ in range(n_images)]
    captions = [f"a photo of object number {i} standing in scene {i % 7}" for i in range(n_captions)]
    return [images[i % n_images] for i in range(n_captions)], captions


def machine(device: torch.device) -> str:
    """What a speed figure was measured on (a figure without its machine means nothing)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.machine()} CPU, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"


def run_clip_bench(*, arch: str = "ViT-B-32", n_images: int = 20, n_captions: int = 200, device: str = "auto",
                   batch_size: int = 64, dtype: str = "float32", naive_samples: int = 50) -> Dict:
    from capeval.backbones.clip import ClipBackbone
    from capeval.clip_s.scorer import ClipScorer

    images, captions = synthetic_workload(n_images, n_captions)
    with tempfile.TemporaryDirectory() as tmp:
        backbone = ClipBackbone(str(random_clip_dir(arch, Path(tmp))), device=device, dtype=dtype,
                                batch_size=batch_size)
    scorer = ClipScorer(None, clip_backbone=backbone)
    scorer.score(captions[:2], images[:2])  # warm-up, then start from empty caches
    backbone.reset_caches()

    sync = torch.cuda.synchronize if backbone.device.type == "cuda" else (lambda: None)
    start = time.perf_counter()
    backbone.encode_images(images, show_progress=False)
    sync()
    image_seconds = time.perf_counter() - start
    start = time.perf_counter()
    backbone.encode_texts([CLIPSCORE_PREFIX + c for c in captions], show_progress=False)
    sync()
    text_seconds = time.perf_counter() - start
    batched_seconds = image_seconds + text_seconds

    naive = min(naive_samples, n_captions)
    start = time.perf_counter()
    with torch.inference_mode():
        for image, caption in zip(images[:naive], captions[:naive]):
            pixels = backbone.preprocess(image)[None].to(backbone.device, backbone.dtype)
            image_emb = backbone.model.encode_image(pixels)
            text_emb = backbone.model.encode_text(backbone.tokenize([CLIPSCORE_PREFIX + caption]).to(backbone.device))
            torch.nn.functional.cosine_similarity(image_emb.float(), text_emb.float())
    sync()
    naive_per_pair = (time.perf_counter() - start) / naive
    batched_per_pair = batched_seconds / n_captions
    return {
        "arch": arch, "device": str(backbone.device), "machine": machine(backbone.device),
        "dtype": str(backbone.dtype), "batch_size": batch_size,
        "naive_loop": "one image and one 77-token caption per forward (no batching, no cache)",
        "pairs": n_captions, "distinct_images": n_images,
        "images_per_s": n_images / image_seconds,
        "captions_per_s": n_captions / text_seconds,
        "pairs_per_s": 1 / batched_per_pair,
        "naive_pairs_per_s": 1 / naive_per_pair,
        "speedup_vs_naive": naive_per_pair / batched_per_pair,
    }
