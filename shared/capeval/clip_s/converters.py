"""CLIP-S / PAC-S converters: the authors' PAC-S and Long-CLIP checkpoints → capeval's open_clip layout."""

from __future__ import annotations

from pathlib import Path

from capeval.backbones.long_clip import convert_long_clip_checkpoint
from capeval.backbones.registration import convert_clip_checkpoint
from capeval.core.constants import HALF_PREPROCESS, OPENAI_PREPROCESS


def convert_long_clip(official: Path, out_dir: Path) -> None:
    convert_long_clip_checkpoint(official, out_dir, title=f"Long-CLIP {official.stem} (capeval layout)")


def convert_pacs_vit_b_32(official: Path, out_dir: Path) -> None:
    convert_clip_checkpoint(official, out_dir, preprocess=OPENAI_PREPROCESS, quick_gelu=True,
                            title="PAC-S CLIP ViT-B/32 (capeval layout)")


def convert_pacs_vit_l_14(official: Path, out_dir: Path) -> None:
    convert_clip_checkpoint(official, out_dir, preprocess=HALF_PREPROCESS, quick_gelu=False,
                            title="PAC-S OpenCLIP ViT-L/14 (capeval layout)")
