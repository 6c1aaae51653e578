"""Judge family: the LLaVA-1.5-13B judge weights (transformers ``llava-hf`` layout) and the FLEUR / RefFLEUR
scorers."""

from __future__ import annotations

from capeval.core.hub import WeightSpec, register
from capeval.core.scoring import register_scorer

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
                help="FLEUR: LLaVA-1.5-13B rates the caption from 0.0 to 1.0, smoothed over its digit probabilities")
register_scorer("ref_fleur", factory="capeval.judges.scorer:RefFleurScorer", images="required",
                references="required", option_help=JUDGE_OPTION_HELP,
                help="RefFLEUR: FLEUR with the reference captions in the prompt")
