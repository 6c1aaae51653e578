"""Tiny random Long-CLIP checkpoints in the authors' layout, and the registered weights converted from them."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Dict


def tiny_long_clip_state_dict(*, patch_size: int = 16, image_size: int = 224, seed: int = 0) -> Dict:
    """A random authors'-layout Long-CLIP state dict (1 layer per tower, 64 wide, the real vocabulary): OpenAI CLIP
    keys with two different 248-row positional embeddings, ``positional_embedding`` and ``positional_embedding_res``."""
    import torch

    from capeval.backbones.clip import build_clip
    from capeval.backbones.long_clip import CONTEXT_LENGTH, RESIDUAL_KEY

    cfg = {"embed_dim": 32, "quick_gelu": True,
           "vision_cfg": {"layers": 1, "width": 64, "patch_size": patch_size, "image_size": image_size},
           "text_cfg": {"context_length": CONTEXT_LENGTH, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1}}
    torch.manual_seed(seed)
    state_dict = {k: v for k, v in build_clip(cfg).state_dict().items() if k != "attn_mask"}
    state_dict["positional_embedding"] = torch.randn(CONTEXT_LENGTH, 64) * 0.3
    state_dict[RESIDUAL_KEY] = torch.randn(CONTEXT_LENGTH, 64) * 0.3
    return state_dict


def tiny_long_clip_factory(*, patch_size: int = 16, image_size: int = 224, seed: int = 0):
    """A factory writing a registered Long-CLIP weight: a tiny authors' checkpoint through the real converter."""

    def write(out_dir: Path) -> None:
        import torch

        from capeval.core.convert import convert

        with tempfile.TemporaryDirectory() as tmp:
            official = Path(tmp) / "longclip-tiny.pt"
            torch.save(tiny_long_clip_state_dict(patch_size=patch_size, image_size=image_size, seed=seed), official)
            convert("long-clip", official, out_dir)

    return write
