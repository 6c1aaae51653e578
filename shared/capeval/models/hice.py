"""HICE-S family: Alpha-CLIP, SAM and MobileSAM weights, their converters, and the ``hice_s`` scorer."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

from capeval.convert import load_torch_checkpoint, register_converter, write_model_card
from capeval.hub import WeightSpec, register
from capeval.models.clip import CLIP_FILES, OPENAI_PREPROCESS, register_clip_weights
from capeval.regions import SAM_FILES, TINY_VIT_KEY
from capeval.scoring import register_scorer

ALPHA_CLIP_SOURCE = "https://github.com/SunzeY/AlphaCLIP (visual checkpoints, e.g. clip_l14_grit20m_fultune_2xe.pth)"

# OpenAI text towers for the Alpha-CLIP visual checkpoints (B/32 and L/14 are registered by the CLIP family).
# Revision "main": not checked against the Hub (unreachable here); pin when verified.
register_clip_weights("openai-clip-vit-b-16", "timm/vit_base_patch16_clip_224.openai", "main", "mit",
           "https://github.com/openai/CLIP", "OpenAI CLIP ViT-B/16", patch_size=16, seed=4)
register_clip_weights("openai-clip-vit-l-14-336", "timm/vit_large_patch14_clip_336.openai", "main", "mit",
           "https://github.com/openai/CLIP", "OpenAI CLIP ViT-L/14@336px", patch_size=14, image_size=336, seed=5)

# (patch size, input resolution) of an Alpha-CLIP visual checkpoint → the OpenAI CLIP holding its text tower
TEXT_TOWERS = {(16, 224): "openai-clip-vit-b-16", (14, 224): "openai-clip-vit-l-14",
               (14, 336): "openai-clip-vit-l-14-336"}


def tiny_alpha_clip_factory(*, patch_size: int, image_size: int = 224, seed: int = 0):
    """Tiny random Alpha-CLIP (1 layer per tower, 64 wide, non-zero alpha kernel, the real CLIP vocabulary)."""

    def write(out_dir: Path) -> None:
        import torch

        from capeval.alpha_clip import build_alpha_clip
        from capeval.clip import save_open_clip

        cfg = {"embed_dim": 32, "quick_gelu": True,
               "vision_cfg": {"layers": 1, "width": 64, "patch_size": patch_size, "image_size": image_size},
               "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1}}
        torch.manual_seed(seed)
        model = build_alpha_clip(cfg)
        torch.nn.init.normal_(model.visual.conv1_alpha.weight, std=0.05)
        save_open_clip(out_dir, model.state_dict(), cfg, OPENAI_PREPROCESS)

    return write


for _name, _title, _patch, _size, _seed in (("alpha-clip-vit-b-16", "ViT-B/16", 16, 224, 10),
                                             ("alpha-clip-vit-l-14", "ViT-L/14", 14, 224, 11),
                                             ("alpha-clip-vit-l-14-336", "ViT-L/14@336px", 14, 336, 12)):
    register(WeightSpec(
        name=_name, repo_id=f"capeval/{_name}", revision="main", files=CLIP_FILES, format="open_clip",
        license="apache-2.0", source_url=ALPHA_CLIP_SOURCE,
        description=f"Alpha-CLIP {_title} (GRIT-20M visual tower + OpenAI CLIP text tower), capeval layout",
        options={"model_cfg": {"quick_gelu": True}},
        tiny_factory=tiny_alpha_clip_factory(patch_size=_patch, image_size=_size, seed=_seed)))


def tiny_sam_factory(seed: int = 0):
    """Tiny random SAM (16-wide one-block encoder, one-block decoder) in our layout."""

    def write(out_dir: Path) -> None:
        import torch

        from capeval.regions import build_sam, save_sam

        config = {"encoder_embed_dim": 16, "encoder_depth": 1, "encoder_num_heads": 1,
                  "encoder_global_attn_indexes": [0], "prompt_embed_dim": 16, "decoder_depth": 1,
                  "decoder_mlp_dim": 32, "decoder_num_heads": 1, "iou_head_depth": 1, "iou_head_hidden_dim": 16,
                  "mask_in_chans": 4}
        torch.manual_seed(seed)
        save_sam(out_dir, build_sam(config).state_dict(), config)

    return write


for _arch, _file in (("vit_b", "sam_vit_b_01ec64.pth"), ("vit_l", "sam_vit_l_0b3195.pth"),
                     ("vit_h", "sam_vit_h_4b8939.pth")):
    register(WeightSpec(
        name=f"sam-{_arch.replace('_', '-')}", repo_id=f"capeval/sam-{_arch.replace('_', '-')}", revision="main",
        files=SAM_FILES, format="safetensors", license="apache-2.0",
        source_url=f"https://dl.fbaipublicfiles.com/segment_anything/{_file}",
        description=f"Segment Anything {_arch} (converted to safetensors)", options={"architecture": _arch},
        tiny_factory=tiny_sam_factory(seed=20)))


def tiny_mobile_sam_factory(seed: int = 0):
    """Tiny random MobileSAM: a 4-stage TinyViT (8–32 wide, one block per stage) and a one-block decoder."""

    def write(out_dir: Path) -> None:
        import torch

        from capeval.regions import build_sam, save_sam

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


MOBILE_SAM_URL = "https://github.com/ChaoningZhang/MobileSAM/raw/master/weights/mobile_sam.pt"
register(WeightSpec(
    name="mobile-sam", repo_id="capeval/mobile-sam", revision="main", files=SAM_FILES, format="safetensors",
    license="apache-2.0", source_url=MOBILE_SAM_URL,
    description="MobileSAM (TinyViT-5M image encoder + SAM's prompt encoder and mask decoder), converted to "
                "safetensors", options={"architecture": "mobile_sam"}, tiny_factory=tiny_mobile_sam_factory(seed=21)))


def official_alpha_visual_to_open_clip(visual: Dict) -> Dict:
    """Official Alpha-CLIP visual keys → open_clip keys (``attn.in_proj.{weight,bias}`` → ``in_proj_{weight,bias}``)."""
    out = {}
    for key, value in visual.items():
        key = key[len("module."):] if key.startswith("module.") else key
        key = key.replace("attn.in_proj.weight", "attn.in_proj_weight").replace("attn.in_proj.bias", "attn.in_proj_bias")
        out[f"visual.{key}"] = value
    return out


@register_converter("alpha-clip", help="Alpha-CLIP visual checkpoint (.pth) + the OpenAI CLIP text tower of its size")
def convert_alpha_clip(official: Path, out_dir: Path) -> None:
    import torch

    from capeval.clip import load_open_clip, openai_config_from_state_dict, save_open_clip

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
                          f"`{text_weights}`. Load with `capeval.alpha_clip.AlphaClip(<this directory>)`.")


def _read_sam_checkpoint(official: Path, *, tiny_vit: bool = False) -> Dict:
    state_dict = load_torch_checkpoint(official)
    key = TINY_VIT_KEY if tiny_vit else "image_encoder.neck.0.weight"
    if not isinstance(state_dict, dict) or key not in state_dict:
        kind = "MobileSAM" if tiny_vit else "Segment Anything / MobileSAM"
        raise ValueError(f"{official} is not a {kind} state dict (no {key})")
    return state_dict


def _write_sam(state_dict: Dict, source: str, out_dir: Path) -> None:
    from capeval.regions import architecture_name, complete_state_dict, sam_config_from_state_dict, save_sam

    config = sam_config_from_state_dict(state_dict)
    save_sam(out_dir, complete_state_dict(state_dict, config), config)
    title = ("MobileSAM (TinyViT image encoder)" if "tiny_vit" in config
             else f"Segment Anything {architecture_name(config)}")
    write_model_card(out_dir, title=f"{title} (capeval layout)", source=source, license="apache-2.0",
                     body="`sam_config.json` + `sam_model.safetensors`; load with "
                          "`capeval.regions.SegmentEverything(<this directory>)`.")


@register_converter("sam", help="Segment Anything sam_vit_{b,l,h}_*.pth or MobileSAM mobile_sam.pt "
                                "(official state dicts)")
def convert_sam(official: Path, out_dir: Path) -> None:
    _write_sam(_read_sam_checkpoint(official), official.name, out_dir)


@register_converter("mobile-sam", help="MobileSAM mobile_sam.pt (official state dict, TinyViT image encoder)")
def convert_mobile_sam(official: Path, out_dir: Path) -> None:
    _write_sam(_read_sam_checkpoint(official, tiny_vit=True), official.name, out_dir)


@register_scorer("hice_s", needs_images=True, needs_references=False,
                 help="HICE-S and, with references, RefHICE-S (Zeng et al. 2024): Alpha-CLIP global + "
                      "region/phrase local scores")
def hice_s(weights: str = "alpha-clip-vit-l-14", **options):
    from capeval.scorers.hice import HiceScorer

    return HiceScorer(weights, **options)
