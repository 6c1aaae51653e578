"""HICE-S converters: official Alpha-CLIP visual checkpoints (+ the OpenAI text tower of their size) and
Segment Anything / MobileSAM state dicts → capeval's safetensors layouts."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

from capeval.backbones.sam import TINY_VIT_KEY
from capeval.core.constants import OPENAI_PREPROCESS
from capeval.core.convert import load_torch_checkpoint, write_model_card

# (patch size, input resolution) of an Alpha-CLIP visual checkpoint → the OpenAI CLIP holding its text tower
TEXT_TOWERS = {(16, 224): "openai-clip-vit-b-16", (14, 224): "openai-clip-vit-l-14",
               (14, 336): "openai-clip-vit-l-14-336"}


def official_alpha_visual_to_open_clip(visual: Dict) -> Dict:
    """Official Alpha-CLIP visual keys → open_clip keys (``attn.in_proj.{weight,bias}`` → ``in_proj_{weight,bias}``)."""
    out = {}
    for key, value in visual.items():
        key = key[len("module."):] if key.startswith("module.") else key
        key = key.replace("attn.in_proj.weight", "attn.in_proj_weight").replace("attn.in_proj.bias", "attn.in_proj_bias")
        out[f"visual.{key}"] = value
    return out


def convert_alpha_clip(official: Path, out_dir: Path) -> None:
    import torch

    from capeval.backbones.clip import load_open_clip, openai_config_from_state_dict, save_open_clip

    visual = load_torch_checkpoint(official)
    if not isinstance(visual, dict) or "conv1_alpha.weight" not in {k.replace("module.", "") for k in visual}:
        raise ValueError(f"{official} is not an Alpha-CLIP visual state dict (no conv1_alpha.weight)")
    visual = official_alpha_visual_to_open_clip(visual)
    patch = int(visual["visual.conv1.weight"].shape[-1])
    grid = round((visual["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    text_weights = TEXT_TOWERS.get((patch, patch * grid))
    if text_weights is None:
        raise ValueError(f"no OpenAI CLIP text tower known for patch {patch} at {patch * grid}px")
    clip, _, _ = load_open_clip(text_weights)
    state_dict = {k: v for k, v in clip.state_dict().items() if not k.startswith("visual.") and k != "attn_mask"}
    state_dict.update(visual)
    if state_dict["visual.proj"].shape[1] != state_dict["text_projection"].shape[1]:
        raise ValueError(f"visual projection {tuple(state_dict['visual.proj'].shape)} does not match the text tower "
                         f"of {text_weights} {tuple(state_dict['text_projection'].shape)}")
    cfg = openai_config_from_state_dict(state_dict)
    save_open_clip(out_dir, {k: torch.as_tensor(v) for k, v in state_dict.items()}, cfg, OPENAI_PREPROCESS)
    write_model_card(out_dir, title="Alpha-CLIP (capeval layout)", source=official.name, license="apache-2.0",
                     body=f"Visual tower from the official Alpha-CLIP checkpoint, text tower and logit scale from "
                          f"`{text_weights}`. Load with `capeval.backbones.alpha_clip.AlphaClip(<this directory>)`.")


def _read_sam_checkpoint(official: Path, *, tiny_vit: bool = False) -> Dict:
    state_dict = load_torch_checkpoint(official)
    key = TINY_VIT_KEY if tiny_vit else "image_encoder.neck.0.weight"
    if not isinstance(state_dict, dict) or key not in state_dict:
        kind = "MobileSAM" if tiny_vit else "Segment Anything / MobileSAM"
        raise ValueError(f"{official} is not a {kind} state dict (no {key})")
    return state_dict


def _write_sam(state_dict: Dict, source: str, out_dir: Path) -> None:
    from capeval.backbones.sam import architecture_name, complete_state_dict, sam_config_from_state_dict, save_sam

    config = sam_config_from_state_dict(state_dict)
    save_sam(out_dir, complete_state_dict(state_dict, config), config)
    title = ("MobileSAM (TinyViT image encoder)" if "tiny_vit" in config
             else f"Segment Anything {architecture_name(config)}")
    write_model_card(out_dir, title=f"{title} (capeval layout)", source=source, license="apache-2.0",
                     body="`sam_config.json` + `sam_model.safetensors`; load with "
                          "`capeval.backbones.sam.SegmentEverything(<this directory>)`.")


def convert_sam(official: Path, out_dir: Path) -> None:
    _write_sam(_read_sam_checkpoint(official), official.name, out_dir)


def convert_mobile_sam(official: Path, out_dir: Path) -> None:
    _write_sam(_read_sam_checkpoint(official, tiny_vit=True), official.name, out_dir)
