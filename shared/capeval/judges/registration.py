"""Judge family: the LLaVA-1.5-13B judge weights (transformers ``llava-hf`` layout), EXPERT's LoRA adapter and its
merge converter, and the FLEUR / RefFLEUR / EXPERT scorers."""

from __future__ import annotations

from capeval.core.convert import register_converter
from capeval.core.hub import WeightSpec, register
from capeval.core.scoring import register_scorer
from capeval.judges.backend import register_judge_backend

# the files of a judge besides its weight shards (those are read from model.safetensors.index.json)
JUDGE_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json", "preprocessor_config.json",
               "tokenizer.json", "tokenizer_config.json")

register(WeightSpec(
    name="llava-1.5-13b-hf", repo_id="llava-hf/llava-1.5-13b-hf",
    revision="5dda2880bda009266dda7c4baff660b95ca64540", files=JUDGE_FILES,
    format="transformers", license="llama2", source_url="https://github.com/haotian-liu/LLaVA",
    description="LLaVA-1.5-13B (liuhaotian/llava-v1.5-13b converted to transformers' LlavaForConditionalGeneration), "
                "FLEUR's judge",
))

# what runs a judge (the scorers' judge_backend option): transformers' generate with the digit tokens' probabilities
register_judge_backend("transformers", factory="capeval.judges.generation:JudgeModel")

# EXPERT (Kim et al., ACL Findings 2025): the authors' LoRA over liuhaotian/llava-v1.5-13b, merged into the llava-hf
# base above on first use (capeval.judges.expert_weights)
register(WeightSpec(
    name="expert-llava-13b-lora", repo_id="hjkim811/EXPERT-llava-13b-lora", revision="main",
    files=("adapter_config.json", "config.json", "non_lora_trainables.bin"), format="peft-lora",
    license="unknown (no licence stated with the weights; LLaVA-1.5-13B: llama2)",
    source_url="https://github.com/hjkim811/EXPERT",
    description="EXPERT's LoRA adapter (r, alpha per adapter_config.json) and projector (non_lora_trainables.bin), "
                "trained with LLaVA's code on Polaris-exp and Nebula-exp; revision not pinned (no commit confirmed)",
))
register_converter("expert-llava-hf", converter="capeval.judges.expert_weights:convert_expert_adapter",
                   help="EXPERT's LoRA adapter folder (peft adapter + non_lora_trainables.bin) merged into "
                        "llava-hf/llava-1.5-13b-hf -> a transformers LlavaForConditionalGeneration folder")

# the judge scorers: name, factory (in capeval.judges), references, help
for _name, _factory, _references, _help in (
        ("fleur", "scorer:FleurScorer", "unused",
         "FLEUR: LLaVA-1.5-13B rates the caption from 0.0 to 1.0, smoothed over its digit probabilities"),
        ("ref_fleur", "scorer:RefFleurScorer", "required", "RefFLEUR: FLEUR with the reference captions in the prompt"),
        ("expert", "expert:ExpertScorer", "unused",
         "EXPERT: LLaVA-1.5-13B with EXPERT's LoRA rates the caption from 0.0 to 1.0, smoothed over its digit "
         "probabilities; optional structured explanation")):
    register_scorer(_name, factory=f"capeval.judges.{_factory}", images="required", references=_references,
                    help=_help, card="capeval.judges:module_cards.toml")
