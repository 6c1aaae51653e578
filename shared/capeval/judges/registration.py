"""Judge family: the LLaVA-1.5-13B judge weights (transformers ``llava-hf`` layout), EXPERT's LoRA adapter and its
merge converter, and the FLEUR / RefFLEUR / EXPERT scorers."""

from __future__ import annotations

from capeval.core.convert import register_converter
from capeval.core.hub import WeightSpec, register
from capeval.core.scoring import register_scorer
from capeval.judges.expert_weights import convert_expert_adapter

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

JUDGE_OPTION_HELP = {
    "judge_model": "the judge's weights: a registry name, hub id or local directory",
    "dtype": "default: float16 on GPU or with a device_map (as official), float32 on CPU",
    "batch_size": "prompts per generation batch (left-padded: scores do not depend on it)",
    "device_map": "transformers' device_map for a judge split over several devices",
    "prompt_format": "'auto' (from the model type), 'llava_v1' or 'chat_template'",
    "pad_to_square": "pad images to a square before the judge's preprocessing, as the official code",
    "max_new_tokens": "tokens the judge may generate per answer",
    "explanation": "also ask the judge for its reasons (fleur_explanations)",
    "judge_cache": "file recording every judge answer (writes it; see replay)",
    "replay": "judge cache file to score from, with no model loaded",
}

register_scorer("fleur", factory="capeval.judges.scorer:FleurScorer", images="required", references="unused",
                option_help=JUDGE_OPTION_HELP,
                help="FLEUR: LLaVA-1.5-13B rates the caption from 0.0 to 1.0, smoothed over its digit probabilities",
                card="capeval.judges:module_cards.toml")
register_scorer("ref_fleur", factory="capeval.judges.scorer:RefFleurScorer", images="required",
                references="required", option_help=JUDGE_OPTION_HELP,
                help="RefFLEUR: FLEUR with the reference captions in the prompt")

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
register_converter("expert-llava-hf", help="EXPERT's LoRA adapter folder (peft adapter + non_lora_trainables.bin) "
                   "merged into llava-hf/llava-1.5-13b-hf -> a transformers LlavaForConditionalGeneration folder"
                   )(convert_expert_adapter)
register_scorer("expert", factory="capeval.judges.expert:ExpertScorer", images="required", references="unused",
                option_help={**{k: v for k, v in JUDGE_OPTION_HELP.items()
                                if k not in ("judge_model", "prompt_format")},
                             "base_model": "the llava-hf LLaVA-1.5-13B the adapter is merged into: a registry name "
                                           "or local directory",
                             "adapter": "EXPERT's LoRA adapter: a registry name or local directory",
                             "judge_model": "a folder of an already merged EXPERT judge (instead of merging "
                                            "base_model and adapter)",
                             "prompt_format": "LLaVA conversation: 'llava_v0' (what the released expert.py renders, "
                                              "###Human/###Assistant) or 'llava_v1' (USER/ASSISTANT)",
                             "explanation": "also ask for the structured explanation (expert_explanations, "
                                            "expert_criteria)",
                             "float32_vision": "run the CLIP vision tower in float32 as LLaVA's loader leaves it "
                                               "(official); False: in the judge's dtype"},
                help="EXPERT: LLaVA-1.5-13B with EXPERT's LoRA rates the caption from 0.0 to 1.0, smoothed over its "
                     "digit probabilities; optional structured explanation",
                card="capeval.judges:module_cards.toml")
