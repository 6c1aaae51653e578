"""VCRScore family: the weights of its three feature extractors (ViLT retrieval, DETR and YOLOS detectors, MCIP
OpenCLIP ViT-L-14-336) with tiny random stand-ins, the MCIP converter, the ``vcrscore`` scorer, and feature rows
for retraining. The regressor itself lives in :mod:`capeval.models.vcrscore_regressor`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

from capeval.convert import register_converter
from capeval.hub import WeightSpec, register
from capeval.models.clip import OPENAI_PREPROCESS, _convert_clip_checkpoint, register_clip_weights
from capeval.models.vcrscore_regressor import FEATURE_NAMES
from capeval.scoring import register_scorer

VILT_FILES = ("config.json", "preprocessor_config.json", "pytorch_model.bin", "tokenizer_config.json", "vocab.txt")
DETECTOR_FILES = ("config.json", "preprocessor_config.json", "pytorch_model.bin")

# COCO detection category names by id as the DETR/YOLOS configs list them ("N/A" for the 11 unused ids).
COCO_LABELS = (
    "N/A", "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train", "truck", "boat", "traffic light",
    "fire hydrant", "N/A", "stop sign", "parking meter", "bench", "bird", "cat", "dog", "horse", "sheep", "cow",
    "elephant", "bear", "zebra", "giraffe", "N/A", "backpack", "umbrella", "N/A", "N/A", "handbag", "tie",
    "suitcase", "frisbee", "skis", "snowboard", "sports ball", "kite", "baseball bat", "baseball glove",
    "skateboard", "surfboard", "tennis racket", "bottle", "N/A", "wine glass", "cup", "fork", "knife", "spoon",
    "bowl", "banana", "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake",
    "chair", "couch", "potted plant", "bed", "N/A", "dining table", "N/A", "N/A", "toilet", "N/A", "tv", "laptop",
    "mouse", "remote", "keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator", "N/A",
    "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush",
)
# The official YOLOv3 names the same 80 classes with Darknet's coco.names; these six are spelled differently.
COCO_TO_DARKNET = {"motorcycle": "motorbike", "airplane": "aeroplane", "couch": "sofa", "potted plant": "pottedplant",
                   "dining table": "diningtable", "tv": "tvmonitor"}

_TINY_WORDS = ("a an the of on in with and is are to at cake plate blueberry butter orange table food dog cat man "
               "woman tennis court playing bowl water drinking black white red blue picture").split()


def _tiny_bert_vocab(out_dir: Path) -> int:
    from transformers import BertTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_TINY_WORDS, *".,!?;:'\"-",
             *"abcdefghijklmnopqrstuvwxyz0123456789", *(f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789")]
    (out_dir / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(out_dir / "vocab.txt"), do_lower_case=True, model_max_length=40).save_pretrained(str(out_dir))
    return len(vocab)


def _save_bin(model, out_dir: Path) -> None:
    """The hub repos ship ``pytorch_model.bin``: write that layout (read back with ``weights_only=True``)."""
    import torch

    model.save_pretrained(str(out_dir))
    (out_dir / "model.safetensors").unlink(missing_ok=True)
    torch.save(model.state_dict(), out_dir / "pytorch_model.bin")


def _write_preprocessor(out_dir: Path, config: dict) -> None:
    (out_dir / "preprocessor_config.json").write_text(json.dumps(config, indent=2))


def _keep_only(out_dir: Path, files) -> None:
    """Leave exactly the files a hub download of ``files`` gives, so tiny models load the way real ones do."""
    for path in out_dir.iterdir():
        if path.name not in files:
            path.unlink()


def write_tiny_vilt(out_dir: Path, seed: int = 0) -> None:
    """A tiny random ``ViltForImageAndTextRetrieval`` (2 layers, 32 wide, 40 text positions as the real model) with
    a tiny BERT vocabulary and the real repo's preprocessing (shorter side 384, multiples of 32, mean = std = 0.5)."""
    import torch
    from transformers import ViltConfig, ViltForImageAndTextRetrieval

    out_dir.mkdir(parents=True, exist_ok=True)
    vocab_size = _tiny_bert_vocab(out_dir)
    config = ViltConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=40, image_size=384, patch_size=32)
    torch.manual_seed(seed)
    model = ViltForImageAndTextRetrieval(config)
    _spread_weights(model, seed, std=0.2, head_std=0.0)  # transformers' init gives near-constant logits
    _save_bin(model, out_dir)
    _write_preprocessor(out_dir, {"do_normalize": True, "do_resize": True,
                                  "feature_extractor_type": "ViltFeatureExtractor",
                                  "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 3,
                                  "size": 384, "size_divisor": 32})
    _keep_only(out_dir, VILT_FILES)


def _spread_weights(model, seed: int, *, std: float, head_std: float) -> None:
    """Redraw the transformer's weight matrices (std ``std``) and the class head (``head_std``): transformers' small
    init makes every query predict the same class with a low score, so tiny detectors would find nothing."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() > 1 and "backbone" not in name:
                scale = head_std if head_std and "class_labels_classifier" in name else std
                param.copy_(torch.randn(param.shape, generator=generator) * scale)


def _save_tiny_detector(model, out_dir: Path, seed: int, *, head_std: float, extractor: str) -> None:
    """Spread the random weights (so the tiny detector finds objects), save them with an old-style COCO detection
    preprocessor config (64 px, ImageNet normalisation), and keep only the repo's files."""
    _spread_weights(model, seed, std=0.3, head_std=head_std)
    _save_bin(model, out_dir)
    _write_preprocessor(out_dir, {"do_normalize": True, "do_resize": True, "feature_extractor_type": extractor,
                                  "format": "coco_detection", "image_mean": [0.485, 0.456, 0.406],
                                  "image_std": [0.229, 0.224, 0.225], "max_size": 96, "size": 64})
    _keep_only(out_dir, DETECTOR_FILES)


def write_tiny_detr(out_dir: Path, seed: int = 0) -> None:
    """A tiny random ``DetrForObjectDetection`` with a transformers ResNet backbone (``use_timm_backbone=False``; the
    real repo's timm ResNet-50 config loads through the same code) and the 91 COCO ids of the real config."""
    import torch
    from transformers import DetrConfig, DetrForObjectDetection, ResNetConfig

    out_dir.mkdir(parents=True, exist_ok=True)
    backbone = ResNetConfig(embedding_size=8, hidden_sizes=[8, 8, 16, 16], depths=[1, 1, 1, 1], layer_type="basic",
                            out_features=["stage4"])
    config = DetrConfig(use_timm_backbone=False, backbone_config=backbone, d_model=16, encoder_layers=1,
                        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                        decoder_ffn_dim=32, num_queries=12, id2label=dict(enumerate(COCO_LABELS)),
                        label2id={name: i for i, name in enumerate(COCO_LABELS)})
    torch.manual_seed(seed)
    _save_tiny_detector(DetrForObjectDetection(config), out_dir, seed, head_std=4.0, extractor="DetrFeatureExtractor")


def write_tiny_yolos(out_dir: Path, seed: int = 1) -> None:
    """A tiny random ``YolosForObjectDetection`` (2 layers, 12 detection tokens) with the 91 COCO ids."""
    import torch
    from transformers import YolosConfig, YolosForObjectDetection

    out_dir.mkdir(parents=True, exist_ok=True)
    config = YolosConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                         image_size=[64, 96], patch_size=16, num_detection_tokens=12,
                         id2label=dict(enumerate(COCO_LABELS)), label2id={n: i for i, n in enumerate(COCO_LABELS)})
    torch.manual_seed(seed)
    _save_tiny_detector(YolosForObjectDetection(config), out_dir, seed, head_std=1.0, extractor="YolosFeatureExtractor")


register(WeightSpec(
    name="vilt-b32-finetuned-coco", repo_id="dandelin/vilt-b32-finetuned-coco", revision="main", files=VILT_FILES,
    format="transformers", license="apache-2.0", source_url="https://github.com/dandelin/ViLT",
    description="ViLT-B/32 fine-tuned for COCO image-text retrieval (VCRScore feature 2)", tiny_factory=write_tiny_vilt,
))
register(WeightSpec(
    name="detr-resnet-50", repo_id="facebook/detr-resnet-50", revision="main", files=DETECTOR_FILES,
    format="transformers", license="apache-2.0", source_url="https://github.com/facebookresearch/detr",
    description="DETR ResNet-50 COCO object detector (VCRScore word pool)", tiny_factory=write_tiny_detr,
))
register(WeightSpec(
    name="yolos-small", repo_id="hustvl/yolos-small", revision="main", files=DETECTOR_FILES,
    format="transformers", license="apache-2.0", source_url="https://github.com/hustvl/YOLOS",
    description="YOLOS-S COCO object detector: capeval's stand-in for VCRScore's unpublished Keras YOLOv3",
    tiny_factory=write_tiny_yolos,
))
MCIP_URL = "https://visual-computing.com/files/MCIP/MCIP-ViT-L-14-336.pth"
register_clip_weights("mcip-vit-l-14-336", "capeval/mcip-vit-l-14-336", "main", "other",
                      f"{MCIP_URL} (not on the Hugging Face Hub: convert with `capeval convert mcip`)",
                      "MCIP retrieval-optimised OpenCLIP ViT-L-14-336 (OpenAI architecture, QuickGELU)",
                      quick_gelu=True, image_size=336, patch_size=14, seed=7)


@register_converter("mcip", help="MCIP-ViT-L-14-336.pth (OpenCLIP ViT-L-14-336 state dict) -> capeval CLIP layout")
def convert_mcip(official: Path, out_dir: Path) -> None:
    _convert_clip_checkpoint(official, out_dir, preprocess=OPENAI_PREPROCESS, quick_gelu=True,
                             title="MCIP OpenCLIP ViT-L-14-336 (capeval layout)")


@register_scorer("vcrscore", needs_images=True, needs_references=True,
                 help="VCRScore (Ruiz et al. 2024): word precision vs references + detected objects, ViLT retrieval "
                      "logit, MCIP RefCLIP-S -> official gradient-boosted regressor")
def vcrscore(weights: str = "vcrscore-gbr", **options):
    from capeval.scorers.vcrscore import VcrScorer

    return VcrScorer(weights, **options)


def feature_rows(features: Sequence[Sequence[float]], scores: Optional[Iterable[float]] = None,
                 extra: Optional[Iterable[dict]] = None) -> List[dict]:
    """``{"features": [f1, f2, f3]}`` rows (plus ``"score"`` and any extra fields) as ``capeval train vcrscore`` and
    ``capeval score vcrscore --from-features`` read them."""
    rows = []
    scores = list(scores) if scores is not None else None
    extra = list(extra) if extra is not None else None
    for i, row in enumerate(features):
        if len(row) != len(FEATURE_NAMES):
            raise ValueError(f"feature row {i} has {len(row)} values, expected {len(FEATURE_NAMES)}")
        out = dict(extra[i]) if extra is not None else {}
        out["features"] = [float(v) for v in row]
        if scores is not None:
            out["score"] = float(scores[i])
        rows.append(out)
    return rows


def write_feature_rows(path, rows: Iterable[dict]) -> Path:
    """Write feature rows as JSONL (one ``{"features": [...], ...}`` per line)."""
    path = Path(path)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path
