"""Judge family: the LLaVA-1.5-13B judge weights (transformers ``llava-hf`` layout) and the FLEUR / RefFLEUR
scorers."""

from __future__ import annotations

from capeval.core.hub import WeightSpec, register
from capeval.core.scoring import RUNTIME_OPTIONS, register_scorer

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

JUDGE_OPTIONS = ("judge_model", *RUNTIME_OPTIONS, "device_map", "cache_dir", "prompt_format", "pad_to_square",
                 "max_new_tokens", "explanation", "judge_cache", "replay", "cache_bytes")

register_scorer("fleur", factory="capeval.judges.scorer:FleurScorer", images="required", references="unused",
                options=JUDGE_OPTIONS,
                help="FLEUR: LLaVA-1.5-13B rates the caption from 0.0 to 1.0, smoothed over its digit probabilities")
register_scorer("ref_fleur", factory="capeval.judges.scorer:RefFleurScorer", images="required",
                references="required", options=JUDGE_OPTIONS,
                help="RefFLEUR: FLEUR with the reference captions in the prompt")
