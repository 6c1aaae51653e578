"""Tiny random stand-ins for the weights of clip_s/registration.py (tests and demos only)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

from capeval.core.constants import OPENAI_PREPROCESS


def tiny_clip_factory(*, preprocess_cfg: Dict = OPENAI_PREPROCESS, quick_gelu: bool = True, image_size: int = 224,
                      patch_size: int = 32, embed_dim: int = 32, seed: int = 0):
    """A factory writing a tiny random CLIP (1 layer per tower, 64 wide) with the real 77-token CLIP vocabulary."""

    def write(out_dir: Path) -> None:
        import torch

        from capeval.backbones.clip import build_clip, save_open_clip

        cfg = {
            "embed_dim": embed_dim,
            "quick_gelu": quick_gelu,
            "vision_cfg": {"layers": 1, "width": 64, "patch_size": patch_size, "image_size": image_size},
            "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1},
        }
        torch.manual_seed(seed)
        model = build_clip(cfg)
        save_open_clip(out_dir, model.state_dict(), cfg, preprocess_cfg)

    return write
