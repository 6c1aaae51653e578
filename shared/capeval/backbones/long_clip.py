"""Long-CLIP (Zhang et al. 2024): an OpenAI CLIP fine-tuned to read 248 text tokens, stored in capeval's CLIP layout.

The authors' text encoder keeps two 248-row positional embeddings and adds, at every position, ``positional_embedding``
masked to the first :data:`KEPT_POSITIONS` positions plus ``positional_embedding_res`` masked to the others
(``model_longclip.CLIP.encode_text``; the second one began as CLIP's 77 positions from the 20th on, interpolated
4×). Exactly one of the two is added at each position (the other is multiplied by 0), so the text tower is an ordinary
CLIP whose positional embedding takes its first 20 rows from the first and the rest from the second: the conversion
writes that one embedding, and :class:`capeval.backbones.clip.ClipBackbone` runs the model with a 248-token context
(its official tokenisation, end-of-text token kept on truncation; longer texts counted and warned about). Everything
else (image tower, QuickGELU, preprocessing) is OpenAI CLIP's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import torch

from capeval.core.constants import OPENAI_PREPROCESS
from capeval.core.convert import load_torch_checkpoint, write_model_card
from capeval.core.errors import ConversionError

KEPT_POSITIONS = 20  # positions read from ``positional_embedding``; the rest from ``positional_embedding_res``
CONTEXT_LENGTH = 248
RESIDUAL_KEY = "positional_embedding_res"


def merge_positional_embeddings(state_dict: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The authors' state dict with its two positional embeddings replaced by the one the text tower adds."""
    kept, residual = state_dict.get("positional_embedding"), state_dict.get(RESIDUAL_KEY)
    if kept is None or residual is None:
        raise ConversionError(f"not a Long-CLIP checkpoint: it needs 'positional_embedding' and {RESIDUAL_KEY!r}")
    if kept.shape != residual.shape or kept.ndim != 2 or kept.shape[0] != CONTEXT_LENGTH:
        raise ConversionError(f"not a Long-CLIP checkpoint: positional embeddings of shapes {tuple(kept.shape)} and "
                              f"{tuple(residual.shape)}, expected two of ({CONTEXT_LENGTH}, width)")
    merged = torch.cat([kept[:KEPT_POSITIONS], residual[KEPT_POSITIONS:]])
    return {**{k: v for k, v in state_dict.items() if k != RESIDUAL_KEY}, "positional_embedding": merged}


def convert_long_clip_checkpoint(official: Path, out_dir: Path, *, title: str) -> None:
    """The authors' ``longclip-*.pt`` (a plain state dict, read with ``torch.load(weights_only=True)``) → capeval's
    CLIP layout (safetensors + open_clip config, 248-token context)."""
    from capeval.backbones.clip import openai_config_from_state_dict, save_open_clip

    checkpoint = load_torch_checkpoint(official)
    if not isinstance(checkpoint, dict):
        raise ConversionError(f"{official.name}: holds no state dict")
    state_dict = merge_positional_embeddings(checkpoint)
    cfg = openai_config_from_state_dict(state_dict)  # context_length 248 from the merged embedding
    save_open_clip(out_dir, state_dict, cfg, OPENAI_PREPROCESS)
    write_model_card(out_dir, title=title, source=official.name, license="apache-2.0",
                     body=f"Long-CLIP state dict stored as `open_clip_model.safetensors` (float32), its two positional "
                          f"embeddings merged into the one the text tower adds (rows 0-{KEPT_POSITIONS - 1} of "
                          f"`positional_embedding`, the rest of `{RESIDUAL_KEY}`), with its open_clip config in "
                          "`open_clip_config.json`. Load with `capeval.backbones.clip.ClipBackbone(<this directory>)`.")
