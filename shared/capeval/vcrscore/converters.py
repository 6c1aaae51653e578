"""VCRScore converters: MCIP's OpenCLIP ViT-L-14-336 state dict → capeval's open_clip layout, checked first."""

from __future__ import annotations

from pathlib import Path

from capeval.backbones.registration import convert_clip_checkpoint
from capeval.core.constants import OPENAI_PREPROCESS

# the keys an OpenAI/OpenCLIP ViT CLIP state dict must hold for its config to be inferred
CLIP_STATE_DICT_KEYS = ("visual.proj", "visual.conv1.weight", "visual.positional_embedding", "ln_final.weight",
                        "text_projection", "positional_embedding", "token_embedding.weight")


def _weights_only_reason(message: str) -> str:
    """The line of torch's ``weights_only`` refusal that says what was refused (not its boilerplate)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if "WeightsUnpickler error:" in line:
            rest = line.split("WeightsUnpickler error:", 1)[1].strip()
            rest = rest or (lines[i + 1] if i + 1 < len(lines) else line)
            return rest.split(" was not an allowed global")[0]  # not torch's advice on how to allow it
    return lines[0] if lines else "refused"


def check_clip_state_dict_file(path: Path) -> None:
    """Refuse, with a one-line ``ValueError`` saying what is wrong, a file that is not an OpenAI/OpenCLIP ViT CLIP
    state dict readable by ``torch.load(weights_only=True)`` (empty, not a checkpoint, objects beyond tensors,
    another container, missing keys). Zip checkpoints are memory-mapped: checking costs no second full read."""
    import pickle
    import warnings
    import zipfile

    import torch

    if path.stat().st_size == 0:
        raise ValueError("not a PyTorch checkpoint: the file is empty")
    is_zip = zipfile.is_zipfile(path)
    if not is_zip:
        with open(path, "rb") as f:
            head = f.read(4)
        if head == b"PK\x03\x04":
            raise ValueError("not a readable PyTorch checkpoint: a truncated or corrupt zip archive")
        if head[:1] != b"\x80":  # torch.save's legacy format is a pickle (protocol >= 2)
            raise ValueError("not a PyTorch checkpoint: neither a torch.save zip archive nor a pickle")
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": the refusal below says it all
            warnings.simplefilter("ignore")
            checkpoint = torch.load(str(path), map_location="cpu", weights_only=True, mmap=is_zip)
    except pickle.UnpicklingError as exc:
        raise ValueError(f"not a plain state dict: torch.load(weights_only=True) refused it "
                         f"({_weights_only_reason(str(exc))})") from exc
    except Exception as exc:
        detail = str(exc).strip().splitlines()[0].split(". ")[0] if str(exc).strip() else (
            "the file ends early" if isinstance(exc, EOFError) else "unreadable")
        raise ValueError(f"not a readable PyTorch checkpoint ({exc.__class__.__name__}: {detail})") from exc
    if isinstance(checkpoint, dict) and isinstance(checkpoint.get("state_dict"), dict):
        checkpoint = checkpoint["state_dict"]
    if not isinstance(checkpoint, dict):
        raise ValueError(f"not a state dict: the checkpoint holds a {type(checkpoint).__name__}")
    keys = {k[len("module."):] if isinstance(k, str) and k.startswith("module.") else k: v
            for k, v in checkpoint.items()}
    missing = [k for k in CLIP_STATE_DICT_KEYS if not isinstance(keys.get(k), torch.Tensor)]
    if missing:
        raise ValueError(f"not an OpenAI/OpenCLIP ViT CLIP state dict: no tensor {', '.join(map(repr, missing))} "
                         f"among its {len(keys)} entries")


def convert_mcip(official: Path, out_dir: Path) -> None:
    check_clip_state_dict_file(official)
    convert_clip_checkpoint(official, out_dir, preprocess=OPENAI_PREPROCESS, quick_gelu=True,
                            title="MCIP OpenCLIP ViT-L-14-336 (capeval layout)")
