"""EXPERT's LoRA merged into the llava-hf base: each changed weight equals W + (alpha / r) · B @ A computed here, the
merged model's logits equal the base model running the LoRA unmerged (hooks adding scale · B(A(x))), every name of an
original-format LLaVA checkpoint maps onto exactly one llava-hf tensor, and malformed adapters are refused."""

import json

import pytest
import torch
from safetensors.torch import load_file

from capeval.core.convert import convert
from capeval.core.errors import ConversionError
from capeval.judges.expert_weights import hf_key, merge_adapter
from capeval.judges.generation import JudgeModel
from capeval.judges.prompts import render_llava_v1
from capeval.testing.tiny_expert import write_tiny_expert_adapter
from capeval.testing.tiny_judges import write_tiny_llava

MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
           "mlp.up_proj", "mlp.down_proj")
PROJECTOR = {0: "linear_1", 2: "linear_2"}


def _tiny(tmp_path, weights_format="safetensors"):
    base, adapter = tmp_path / "base", tmp_path / f"adapter-{weights_format}"
    if not base.is_dir():
        write_tiny_llava(base)
    write_tiny_expert_adapter(adapter, weights_format=weights_format)
    return base, adapter


def _tensors(folder):
    tensors = {}
    for shard in sorted(folder.glob("*.safetensors")):
        tensors.update(load_file(str(shard)))
    return tensors


def _lora(adapter):
    config = json.loads((adapter / "adapter_config.json").read_text())
    return load_file(str(adapter / "adapter_model.safetensors")), config["lora_alpha"] / config["r"]


def test_each_changed_weight_is_the_base_plus_scaled_b_times_a_and_nothing_else_changes(tmp_path):
    base, adapter = _tiny(tmp_path)
    before, after = _tensors(base), _tensors(merge_adapter(base, adapter, tmp_path / "out"))
    lora, scale = _lora(adapter)
    projector = torch.load(adapter / "non_lora_trainables.bin", weights_only=True)
    assert set(after) == set(before)
    changed = set()
    for layer in range(2):
        for module in MODULES:
            peft = f"base_model.model.model.layers.{layer}.{module}"
            a, b = lora[f"{peft}.lora_A.weight"].double(), lora[f"{peft}.lora_B.weight"].double()
            name = f"language_model.model.layers.{layer}.{module}.weight"
            expected = before[name].double() + scale * (b @ a)
            assert torch.allclose(after[name].double(), expected, atol=1e-5, rtol=0), name
            assert not torch.equal(after[name], before[name])
            changed.add(name)
    for index, linear in PROJECTOR.items():
        for part in ("weight", "bias"):
            name = f"multi_modal_projector.{linear}.{part}"
            assert torch.equal(after[name], projector[f"base_model.model.model.mm_projector.{index}.{part}"])
            changed.add(name)
    for name in set(before) - changed:
        assert torch.equal(after[name], before[name]), name
    assert len(changed) == 2 * len(MODULES) + 4


def test_an_adapter_saved_as_bin_merges_to_the_same_weights(tmp_path):
    base, safetensors_adapter = _tiny(tmp_path)
    _, bin_adapter = _tiny(tmp_path, "bin")
    assert not (bin_adapter / "adapter_model.safetensors").exists()
    one = _tensors(merge_adapter(base, safetensors_adapter, tmp_path / "a"))
    other = _tensors(merge_adapter(base, bin_adapter, tmp_path / "b"))
    assert one.keys() == other.keys() and all(torch.equal(one[k], other[k]) for k in one)


def test_the_merged_judge_gives_the_logits_of_the_base_running_the_lora_unmerged(tmp_path):
    base, adapter = _tiny(tmp_path)
    merged = JudgeModel(str(merge_adapter(base, adapter, tmp_path / "out")), device="cpu")
    reference = JudgeModel(str(base), device="cpu")
    lora, scale = _lora(adapter)
    modules = dict(reference.model.named_modules())
    for layer in range(2):
        for module in MODULES:
            found = [m for name, m in modules.items() if name.endswith(f"language_model.layers.{layer}.{module}")]
            assert len(found) == 1
            peft = f"base_model.model.model.layers.{layer}.{module}"
            a, b = lora[f"{peft}.lora_A.weight"], lora[f"{peft}.lora_B.weight"]
            found[0].register_forward_hook(lambda mod, args, out, a=a, b=b: out + scale * (args[0] @ a.T) @ b.T)
    projector = torch.load(adapter / "non_lora_trainables.bin", weights_only=True)
    linears = {name: m for name, m in modules.items() if name.endswith(("multi_modal_projector.linear_1",
                                                                           "multi_modal_projector.linear_2"))}
    with torch.no_grad():
        for name, linear in linears.items():
            index = 0 if name.endswith("linear_1") else 2
            linear.weight.copy_(projector[f"base_model.model.model.mm_projector.{index}.weight"])
            linear.bias.copy_(projector[f"base_model.model.model.mm_projector.{index}.bias"])
    from PIL import Image

    prompt = render_llava_v1([("user", "Caption: a dog on grass"), ("assistant", None)])
    batch = merged.processor(images=[Image.new("RGB", (28, 28), (200, 30, 90))], text=[prompt], return_tensors="pt")
    with torch.no_grad():
        ours = merged.model(**batch).logits
        expected = reference.model(**batch).logits
        unadapted = JudgeModel(str(base), device="cpu").model(**batch).logits
    scale_of_logits = ours.abs().max()
    assert (ours - expected).abs().max() <= 1e-4 * scale_of_logits  # float32 rounding (measured 1.7e-5 of it)
    assert (ours - unadapted).abs().max() >= 0.1 * scale_of_logits  # the adapter changes what the judge says


def _original_llava_names(vision_config):
    """The tensor names of LLaVA's own ``LlavaLlamaForCausalLM`` for the tiny shapes: Llama under ``model.`` and
    ``lm_head``, the projector ``model.mm_projector.{0,2}``, and the CLIP tower inside ``CLIPVisionTower`` at
    ``model.vision_tower.vision_tower.vision_model``."""
    from transformers import CLIPVisionModel

    names = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    for layer in range(2):
        names += [f"model.layers.{layer}.{m}.weight" for m in MODULES]
        names += [f"model.layers.{layer}.{n}.weight" for n in ("input_layernorm", "post_attention_layernorm")]
    names += [f"model.mm_projector.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")]
    # LLaVA (transformers 4.3x) names the tower's tensors under CLIPVisionModel's vision_model
    names += [f"model.vision_tower.vision_tower.vision_model.{k.removeprefix('vision_model.')}"
              for k in CLIPVisionModel(vision_config).state_dict()]
    return names


def test_every_original_llava_name_maps_onto_exactly_one_llava_hf_tensor(tmp_path):
    from transformers import LlavaConfig

    base, _ = _tiny(tmp_path)
    base_keys = set(json.loads((base / "model.safetensors.index.json").read_text())["weight_map"])
    original = _original_llava_names(LlavaConfig.from_pretrained(base).vision_config)
    mapped = [hf_key(name, base_keys) for name in original]
    assert len(set(mapped)) == len(original)  # one to one
    assert set(mapped) == base_keys  # every tensor of the base is covered
    assert hf_key("model.layers.1.mlp.down_proj.weight", base_keys) == \
        "language_model.model.layers.1.mlp.down_proj.weight"
    assert hf_key("model.mm_projector.2.bias", base_keys) == "multi_modal_projector.linear_2.bias"
    transformers5 = {"model.language_model.layers.0.self_attn.q_proj.weight", "lm_head.weight"}
    assert hf_key("model.layers.0.self_attn.q_proj.weight", transformers5) == \
        "model.language_model.layers.0.self_attn.q_proj.weight"
    assert hf_key("lm_head.weight", transformers5) == "lm_head.weight"


def _edit_adapter(adapter, *, config=None, rename=None):
    if config:
        path = adapter / "adapter_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **config}))
    if rename:
        from safetensors.torch import save_file

        tensors = load_file(str(adapter / "adapter_model.safetensors"))
        save_file({k.replace(*rename): v for k, v in tensors.items()}, str(adapter / "adapter_model.safetensors"))


@pytest.mark.parametrize("edit, message", [
    ({"config": {"use_dora": True}}, "use_dora=True is not supported"),
    ({"config": {"fan_in_fan_out": True}}, "fan_in_fan_out=True is not supported"),
    ({"rename": ("layers.1.mlp.up_proj", "layers.7.mlp.up_proj")}, "model.layers.7.mlp.up_proj.weight: no tensor"),
    ({"rename": ("layers.0.self_attn.q_proj", "layers.0.mlp.down_proj_x")}, "no tensor"),
])
def test_an_adapter_the_merge_cannot_apply_exactly_is_refused_naming_why(edit, message, tmp_path):
    base, adapter = _tiny(tmp_path)
    _edit_adapter(adapter, **edit)
    with pytest.raises(ConversionError, match=message):
        merge_adapter(base, adapter, tmp_path / "out")


def test_a_lora_whose_shape_is_not_the_base_weights_is_refused(tmp_path):
    from safetensors.torch import save_file

    base, adapter = _tiny(tmp_path)
    tensors = load_file(str(adapter / "adapter_model.safetensors"))
    key = "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight"
    tensors[key] = torch.zeros(64, tensors[key].shape[1])  # down_proj writes 32 features, not 64
    save_file(tensors, str(adapter / "adapter_model.safetensors"))
    with pytest.raises(ConversionError, match="down_proj: B @ A is"):
        merge_adapter(base, adapter, tmp_path / "out")


def test_capeval_convert_merges_an_adapter_folder_into_the_registered_base(tiny_hub, tmp_path):
    _, adapter = _tiny(tmp_path)
    out = convert("expert-llava-hf", adapter, tmp_path / "converted")
    assert (out / "model.safetensors.index.json").is_file() and (out / "README.md").is_file()
    base = _tensors(next((tiny_hub / "models--llava-hf--llava-1.5-13b-hf" / "snapshots").iterdir()))
    lora, scale = _lora(adapter)
    peft = "base_model.model.model.layers.1.self_attn.v_proj"
    expected = base["language_model.model.layers.1.self_attn.v_proj.weight"] + scale * (
        lora[f"{peft}.lora_B.weight"] @ lora[f"{peft}.lora_A.weight"])
    assert torch.allclose(_tensors(out)["language_model.model.layers.1.self_attn.v_proj.weight"], expected, atol=1e-5)


def test_the_same_merge_twice_describes_the_same_weights(tmp_path):
    """The merge record beside the weights holds file times; the weights' sha256 (what the hashcode covers) must not
    see it, so merging the same base and adapter again gives the same identity."""
    from capeval.core.provenance import describe_weights

    base, adapter = _tiny(tmp_path)
    first, second = merge_adapter(base, adapter, tmp_path / "a"), merge_adapter(base, adapter, tmp_path / "b")
    assert json.loads((first / "expert_merge.json").read_text()) != json.loads((second / "expert_merge.json")
                                                                               .read_text())
    assert describe_weights(str(first), first)["sha256"] == describe_weights(str(second), second)["sha256"]
