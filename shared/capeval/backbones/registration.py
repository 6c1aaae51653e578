"""Weights of the shared CLIP backbones (OpenAI CLIP at every size a family uses) and the helpers families use to
register and convert CLIP-format weights of their own."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

from capeval.core.constants import CLIP_FILES
from capeval.core.convert import load_torch_checkpoint, write_model_card
from capeval.core.hub import Upstream, WeightSpec, register

DINOV2_FILES = ("config.json", "model.safetensors", "preprocessor_config.json")  # a transformers DINOv2 repo


def register_clip_weights(name, repo_id, revision, license, source_url, description, *, quick_gelu=True,
                          upstream: Optional[Upstream] = None):
    """Register open_clip-layout weights (``open_clip_config.json`` + ``open_clip_model.safetensors``), converted
    from ``upstream`` when capeval's hub repo is not there."""
    return register(WeightSpec(
        name=name, repo_id=repo_id, revision=revision, files=CLIP_FILES, format="open_clip", license=license,
        source_url=source_url, description=description, options={"model_cfg": {"quick_gelu": quick_gelu}},
        upstream=upstream,
    ))


# Revisions: third-party repos are pinned to a commit that public code documents; "main" where none was found
# (`capeval weights` and the README say "unpinned"; a result's provenance records the commit actually loaded).
# capeval's own converted artifacts are converted from their upstream file until published (`capeval push`).
register_clip_weights("openai-clip-vit-b-32", "timm/vit_base_patch32_clip_224.openai",
                      "a6f597a30f7b82c51704746581f9a4e41421e878", "mit",
                      "https://github.com/openai/CLIP", "OpenAI CLIP ViT-B/32 (CLIPScore's backbone)")
register_clip_weights("openai-clip-vit-l-14", "timm/vit_large_patch14_clip_224.openai",
                      "18d0535469bb561bf468d76c1d73aa35156c922b", "mit",
                      "https://github.com/openai/CLIP", "OpenAI CLIP ViT-L/14")
# OpenAI text towers of the Alpha-CLIP visual checkpoints, at the commits public code names for these repos (a pinned
# `timm/vit_base_patch16_clip_224.openai@977e3dd…` with its open_clip_model.safetensors, and hub-cache snapshot paths
# `models--timm--vit_large_patch14_clip_336.openai/snapshots/81e38ef…` in published scripts).
register_clip_weights("openai-clip-vit-b-16", "timm/vit_base_patch16_clip_224.openai",
                      "977e3dd0ec55ab8da155f2fbeb6b5f54948b6e3d", "mit",
                      "https://github.com/openai/CLIP", "OpenAI CLIP ViT-B/16")
register_clip_weights("openai-clip-vit-l-14-336", "timm/vit_large_patch14_clip_336.openai",
                      "81e38efc4637de5023b10e75a7f9bd1c6fa6b010", "mit",
                      "https://github.com/openai/CLIP", "OpenAI CLIP ViT-L/14@336px")


def _state_dict_of(checkpoint) -> Dict:
    if isinstance(checkpoint, dict) and "state_dict" in checkpoint:
        checkpoint = checkpoint["state_dict"]
    if not isinstance(checkpoint, dict):
        raise ValueError("checkpoint holds no state dict")
    return {k[len("module."):] if k.startswith("module.") else k: v for k, v in checkpoint.items()}


def convert_clip_checkpoint(official: Path, out_dir: Path, *, preprocess: Dict, quick_gelu: bool, title: str) -> None:
    """An authors' CLIP state dict (OpenAI/OpenCLIP key layout) → capeval's open_clip safetensors layout."""
    from capeval.backbones.clip import openai_config_from_state_dict, save_open_clip

    state_dict = _state_dict_of(load_torch_checkpoint(official))
    cfg = openai_config_from_state_dict(state_dict)
    cfg["quick_gelu"] = quick_gelu
    save_open_clip(out_dir, state_dict, cfg, preprocess)
    write_model_card(out_dir, title=title, source=official.name, license="other",
                     body="OpenAI-format CLIP state dict stored as `open_clip_model.safetensors` (float32) with "
                          "its open_clip config in `open_clip_config.json`. Load with "
                          "`capeval.backbones.clip.ClipBackbone(<this directory or repo id>)`.")
