"""Tiny random stand-ins for the weights of vcrscore/regressor.py, vcrscore/registration.py (tests and demos only)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from capeval.vcrscore.constants import COCO_LABELS, DETECTOR_FILES, VILT_FILES
from capeval.vcrscore.regressor import GBR_FILE


def tiny_regressor(out_dir: Path) -> None:
    from sklearn.ensemble import GradientBoostingRegressor

    from capeval.vcrscore.gradient_boosting import gbr_to_json, save_json

    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(0, 100, 200), rng.normal(0, 3, 200), rng.uniform(0, 1, 200)])
    y = np.clip(0.005 * x[:, 0] + 0.3 * x[:, 2] + 0.1, 0, 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_json(gbr_to_json(GradientBoostingRegressor(random_state=0, n_estimators=5).fit(x, y)), out_dir / GBR_FILE)


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
