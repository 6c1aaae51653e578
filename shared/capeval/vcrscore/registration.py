"""VCRScore registration: the weights of its feature extractors (ViLT retrieval, DETR and YOLOS detectors, MCIP
OpenCLIP ViT-L-14-336) and of its regressor, the MCIP and regressor converters, the scorer and the trainer."""

from __future__ import annotations

from pathlib import Path

from capeval.backbones.registration import convert_clip_checkpoint, register_clip_weights
from capeval.core.constants import OPENAI_PREPROCESS
from capeval.core.convert import register_converter
from capeval.core.hub import Upstream, WeightSpec, register
from capeval.core.scoring import register_scorer
from capeval.core.training import register_trainer
from capeval.vcrscore.constants import DETECTOR_FILES, VILT_FILES
from capeval.vcrscore.regressor import GBR_FILE, convert_vcrscore_gbr

register(WeightSpec(
    name="vilt-b32-finetuned-coco", repo_id="dandelin/vilt-b32-finetuned-coco", revision="main", files=VILT_FILES,
    format="transformers", license="apache-2.0", source_url="https://github.com/dandelin/ViLT",
    description="ViLT-B/32 fine-tuned for COCO image-text retrieval (VCRScore feature 2)",
))
register(WeightSpec(
    # the snapshot commit public code loads it from (models--facebook--detr-resnet-50/snapshots/1d5f47b…)
    name="detr-resnet-50", repo_id="facebook/detr-resnet-50", revision="1d5f47bd3bdd2c4bbfa585418ffe6da5028b4c0b",
    files=DETECTOR_FILES,
    format="transformers", license="apache-2.0", source_url="https://github.com/facebookresearch/detr",
    description="DETR ResNet-50 COCO object detector (VCRScore word pool)",
))
register(WeightSpec(
    name="yolos-small", repo_id="hustvl/yolos-small", revision="main", files=DETECTOR_FILES,
    format="transformers", license="apache-2.0", source_url="https://github.com/hustvl/YOLOS",
    description="YOLOS-S COCO object detector: capeval's stand-in for VCRScore's unpublished Keras YOLOv3",
))
# the pickle at a commit of the official repository (its README says to load the .pickle beside the modules)
VCRSCORE_GBR_URL = ("https://raw.githubusercontent.com/ResearchInfoGeo/VCRScore/"
                    "5a81e9f251f2a045b8ee53d36f126161c1d3b438/model_GBR_VCR.pickle")
register(WeightSpec(
    name="vcrscore-gbr", repo_id="capeval/vcrscore-gbr", revision="main", files=(GBR_FILE,), format="json",
    license="unknown (no licence file upstream)",
    source_url="https://github.com/ResearchInfoGeo/VCRScore (model_GBR_VCR.pickle, sklearn 1.6.1)",
    description="Official VCRScore GradientBoostingRegressor as a JSON tree ensemble",
    upstream=Upstream("model_GBR_VCR.pickle", "vcrscore-gbr", url=VCRSCORE_GBR_URL,
                      sha256="95dc58f5b00a254e89f8b13a5be162d607a9efad8bb54729114d14904630c540",
                      page="https://github.com/ResearchInfoGeo/VCRScore"),
))
# The authors' site (linked by the MCIP and VCRScore READMEs); no sha256 is published
MCIP_URL = "https://visual-computing.com/files/MCIP/MCIP-ViT-L-14-336.pth"
register_clip_weights("mcip-vit-l-14-336", "capeval/mcip-vit-l-14-336", "main", "other",
                      f"{MCIP_URL} (not on the Hugging Face Hub)",
                      "MCIP retrieval-optimised OpenCLIP ViT-L-14-336 (OpenAI architecture, QuickGELU)",
                      upstream=Upstream("MCIP-ViT-L-14-336.pth", "mcip", url=MCIP_URL,
                                        page="https://github.com/ResearchInfoGeo/VCRScore (README, Download)"))


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


@register_converter("mcip", help="MCIP-ViT-L-14-336.pth (OpenCLIP ViT-L-14-336 state dict) -> capeval CLIP layout")
def convert_mcip(official: Path, out_dir: Path) -> None:
    check_clip_state_dict_file(official)
    convert_clip_checkpoint(official, out_dir, preprocess=OPENAI_PREPROCESS, quick_gelu=True,
                            title="MCIP OpenCLIP ViT-L-14-336 (capeval layout)")


register_converter("vcrscore-gbr", help="VCRScore model_GBR_VCR.pickle (read with a restricted unpickler) -> "
                                        "JSON")(convert_vcrscore_gbr)
register_scorer("vcrscore", factory="capeval.vcrscore.scorer:VcrScorer", images="required", references="required",
                help="VCRScore (Ruiz et al. 2024): word precision vs references + detected objects, ViLT retrieval "
                     "logit, MCIP RefCLIP-S -> official gradient-boosted regressor",
                card="capeval.vcrscore:module_cards.toml")
register_trainer("vcrscore", configure="capeval.vcrscore.regressor:configure_training",
                 run="capeval.vcrscore.regressor:train_vcrscore",
                 help="fit VCRScore's GradientBoostingRegressor on cached feature rows; exports JSON")
