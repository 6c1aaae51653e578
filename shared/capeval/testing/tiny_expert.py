"""A tiny random stand-in for EXPERT's LoRA adapter (``hjkim811/EXPERT-llava-13b-lora``), shaped for the tiny LLaVA
of :mod:`capeval.testing.tiny_judges`, in the layout LLaVA's LoRA training writes: peft's ``adapter_config.json`` and
adapter weights under original LLaVA names, LLaVA's ``config.json``, and the projector in ``non_lora_trainables.bin``
(a ``torch.save`` pickle, as the authors')."""

from __future__ import annotations

import json
from pathlib import Path

# the tiny LLaVA's shapes (tiny_judges.write_tiny_llava): 2 layers, width 32, MLP 64, a 32 -> 32 -> 32 projector
LAYERS, HIDDEN, INTERMEDIATE, VISION = 2, 32, 64, 32
TARGETS = {"self_attn.q_proj": (HIDDEN, HIDDEN), "self_attn.k_proj": (HIDDEN, HIDDEN),
           "self_attn.v_proj": (HIDDEN, HIDDEN), "self_attn.o_proj": (HIDDEN, HIDDEN),
           "mlp.gate_proj": (INTERMEDIATE, HIDDEN), "mlp.up_proj": (INTERMEDIATE, HIDDEN),
           "mlp.down_proj": (HIDDEN, INTERMEDIATE)}  # (out, in)
RANK, ALPHA = 4, 8
STD = 0.5
# the seed of the registered tiny adapter: the tiny judge with it merged writes some numbers in [0, 1] (4 of the 17
# answers of tests/judges/test_expert_scorer.py), so that the smoothing runs in the tests
SEED = 14


def tiny_adapter_tensors(seed: int = 0) -> dict:
    """``{peft key: tensor}`` of a rank-4 LoRA on every linear layer of the tiny LLaVA's language model."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(LAYERS):
        for module, (out, inp) in TARGETS.items():
            prefix = f"base_model.model.model.layers.{layer}.{module}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(RANK, inp, generator=generator) * STD
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(out, RANK, generator=generator) * STD
    return tensors


def tiny_projector_tensors(seed: int = 1) -> dict:
    """``non_lora_trainables.bin``'s tensors: the projector under LLaVA's training names."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    prefix = "base_model.model.model.mm_projector"
    return {f"{prefix}.0.weight": torch.randn(HIDDEN, VISION, generator=generator),
            f"{prefix}.0.bias": torch.randn(HIDDEN, generator=generator),
            f"{prefix}.2.weight": torch.randn(HIDDEN, HIDDEN, generator=generator),
            f"{prefix}.2.bias": torch.randn(HIDDEN, generator=generator)}


def write_tiny_expert_adapter(out_dir: Path, seed: int = SEED, weights_format: str = "safetensors") -> None:
    """The adapter's files in ``out_dir`` (``weights_format``: "safetensors" or "bin", as peft writes either)."""
    import torch
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "adapter_config.json").write_text(json.dumps({
        "base_model_name_or_path": "liuhaotian/llava-v1.5-13b", "peft_type": "LORA", "task_type": "CAUSAL_LM",
        "r": RANK, "lora_alpha": ALPHA, "lora_dropout": 0.05, "bias": "none", "fan_in_fan_out": False,
        "target_modules": sorted({m.split(".")[-1] for m in TARGETS}), "use_rslora": False, "use_dora": False,
        "modules_to_save": None, "inference_mode": True}, indent=2))
    (out_dir / "config.json").write_text(json.dumps({
        "architectures": ["LlavaLlamaForCausalLM"], "model_type": "llava_llama", "hidden_size": HIDDEN,
        "intermediate_size": INTERMEDIATE, "num_hidden_layers": LAYERS, "mm_hidden_size": VISION,
        "mm_projector_type": "mlp2x_gelu", "mm_vision_select_layer": -2, "image_aspect_ratio": "pad"}, indent=2))
    adapter = tiny_adapter_tensors(seed)
    if weights_format == "bin":
        torch.save(adapter, out_dir / "adapter_model.bin")
    else:
        save_file(adapter, str(out_dir / "adapter_model.safetensors"))
    torch.save(tiny_projector_tensors(seed + 1), out_dir / "non_lora_trainables.bin")
