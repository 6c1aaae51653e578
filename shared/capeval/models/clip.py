"""CLIP family: OpenAI CLIP and PAC-S weights, the PAC-S checkpoint converters, CLIP-S and PAC-S scorers."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

from capeval.convert import load_torch_checkpoint, register_converter, write_model_card
from capeval.hub import WeightSpec, register
from capeval.scoring import register_scorer

OPENAI_PREPROCESS = {"mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711]}
HALF_PREPROCESS = {"mean": [0.5, 0.5, 0.5], "std": [0.5, 0.5, 0.5]}
CLIP_FILES = ("open_clip_config.json", "open_clip_model.safetensors")


def tiny_clip_factory(*, preprocess_cfg: Dict = OPENAI_PREPROCESS, quick_gelu: bool = True, image_size: int = 224,
                      patch_size: int = 32, embed_dim: int = 32, seed: int = 0):
    """A factory writing a tiny random CLIP (1 layer per tower, 64 wide) with the real 77-token CLIP vocabulary."""

    def write(out_dir: Path) -> None:
        import torch

        from capeval.clip import build_clip, save_open_clip

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


def register_clip_weights(name, repo_id, revision, license, source_url, description, preprocess=OPENAI_PREPROCESS,
               quick_gelu=True, image_size=224, patch_size=32, seed=0):
    return register(WeightSpec(
        name=name, repo_id=repo_id, revision=revision, files=CLIP_FILES, format="open_clip", license=license,
        source_url=source_url, description=description, options={"model_cfg": {"quick_gelu": quick_gelu}},
        tiny_factory=tiny_clip_factory(preprocess_cfg=preprocess, quick_gelu=quick_gelu, image_size=image_size,
                                       patch_size=patch_size, seed=seed),
    ))


# Revisions: third-party repos are pinned to the commit capeval was checked against; capeval's own converted
# artifacts are pinned when published (`capeval push` prints the commit to pin).
register_clip_weights("openai-clip-vit-b-32", "timm/vit_base_patch32_clip_224.openai",
           "a6f597a30f7b82c51704746581f9a4e41421e878", "mit",
           "https://github.com/openai/CLIP", "OpenAI CLIP ViT-B/32 (CLIPScore's backbone)")
register_clip_weights("openai-clip-vit-l-14", "timm/vit_large_patch14_clip_224.openai",
           "18d0535469bb561bf468d76c1d73aa35156c922b", "mit",
           "https://github.com/openai/CLIP", "OpenAI CLIP ViT-L/14", patch_size=14, seed=1)
register_clip_weights("pacs-clip-vit-b-32", "capeval/pacs-clip-vit-b-32", "main", "other",
           "https://github.com/aimagelab/pacscore (checkpoints/clip_ViT-B-32.pth)",
           "PAC-S positive-augmented CLIP ViT-B/32 (OpenAI format)", seed=2)
register_clip_weights("pacs-openclip-vit-l-14", "capeval/pacs-openclip-vit-l-14", "main", "other",
           "https://github.com/aimagelab/pacscore (checkpoints/openClip_ViT-L-14.pth)",
           "PAC-S positive-augmented OpenCLIP ViT-L/14 (mean = std = 0.5 normalisation)",
           preprocess=HALF_PREPROCESS, quick_gelu=False, patch_size=14, seed=3)


def _state_dict_of(checkpoint) -> Dict:
    if isinstance(checkpoint, dict) and "state_dict" in checkpoint:
        checkpoint = checkpoint["state_dict"]
    if not isinstance(checkpoint, dict):
        raise ValueError("checkpoint holds no state dict")
    return {k[len("module."):] if k.startswith("module.") else k: v for k, v in checkpoint.items()}


def _convert_clip_checkpoint(official: Path, out_dir: Path, *, preprocess: Dict, quick_gelu: bool, title: str) -> None:
    from capeval.clip import openai_config_from_state_dict, save_open_clip

    state_dict = _state_dict_of(load_torch_checkpoint(official))
    cfg = openai_config_from_state_dict(state_dict)
    cfg["quick_gelu"] = quick_gelu
    save_open_clip(out_dir, state_dict, cfg, preprocess)
    write_model_card(out_dir, title=title, source=official.name, license="other",
                     body="OpenAI-format CLIP state dict stored as `open_clip_model.safetensors` (float32) with "
                          "its open_clip config in `open_clip_config.json`. Load with "
                          "`capeval.clip.ClipBackbone(<this directory or repo id>)`.")


@register_converter("pac-s", help="PAC-S clip_ViT-B-32.pth (OpenAI-format CLIP ViT-B/32 state dict)")
def convert_pacs_vit_b_32(official: Path, out_dir: Path) -> None:
    _convert_clip_checkpoint(official, out_dir, preprocess=OPENAI_PREPROCESS, quick_gelu=True,
                             title="PAC-S CLIP ViT-B/32 (capeval layout)")


@register_converter("pac-s-vit-l-14", help="PAC-S openClip_ViT-L-14.pth (OpenCLIP ViT-L/14 state dict)")
def convert_pacs_vit_l_14(official: Path, out_dir: Path) -> None:
    _convert_clip_checkpoint(official, out_dir, preprocess=HALF_PREPROCESS, quick_gelu=False,
                             title="PAC-S OpenCLIP ViT-L/14 (capeval layout)")


@register_scorer("clip_s", needs_images=True, needs_references=False,
                 help="CLIP-S (w=2.5) and, with references, RefCLIP-S (Hessel et al. 2021)")
def clip_s(weights: str = "openai-clip-vit-b-32", **options):
    from capeval.scorers.clip_score import ClipScorer

    return ClipScorer(weights, w=2.5, name="clip_s", **options)


@register_scorer("pac_s", needs_images=True, needs_references=False,
                 help="PAC-S (w=2.0) and, with references, RefPAC-S (Sarto et al. 2023)")
def pac_s(weights: str = "pacs-clip-vit-b-32", **options):
    from capeval.scorers.clip_score import ClipScorer

    return ClipScorer(weights, w=2.0, name="pac_s", **options)
