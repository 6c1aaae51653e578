"""Judge family: the LLaVA-1.5-13B judge weights (transformers ``llava-hf`` layout), EXPERT's LoRA adapter and its
merge converter, and the FLEUR / RefFLEUR / EXPERT scorers."""

from __future__ import annotations

from capeval.core.convert import register_converter
from capeval.core.hub import WeightSpec, register
from capeval.core.module_card import ModuleCard
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

FLEUR_CARD = ModuleCard(
    description="""\
FLEUR is a reference-free image-captioning metric: LLaVA-1.5-13B is asked to rate the caption of the image from
0.0 to 1.0 (FLEUR's prompt, greedy answer), and the number it writes is smoothed over the probabilities of the
digit tokens at the number's positions (sum of digit x 0.1 x p(first decimal) + digit x 0.01 x p(second decimal)).
With `explanation=True` the judge also says why (FLEUR's second turn, "Why? Tell me the reason.").
""",
    citation="""\
@inproceedings{lee2024fleur,
  title={{FLEUR}: An Explainable Reference-Free Evaluation Metric for Image Captioning Using a Large Multimodal
         Model},
  author={Lee, Yebin and Park, Imseong and Kang, Myungjoo},
  booktitle={Proceedings of the 62nd Annual Meeting of the Association for Computational Linguistics (Volume 1: Long
             Papers)},
  pages={3732--3746},
  address={Bangkok, Thailand},
  year={2024}
}
""",
    returns="""\
fleur (`float`): mean of the defined scores; fleur_per_sample (`list` of `float`, NaN where the answer holds
    no readable number in [0, 1]); fleur_raw, fleur_raw_per_sample: the numbers the judge wrote;
fleur_texts: the judge's answers; fleur_explanations with `explanation=True`; undefined_scores (`int`).
""",
    examples="""\
>>> import evaluate
>>> from PIL import Image
>>> fleur = evaluate.load("capeval/fleur", max_new_tokens=16)  # 16 to be quick; official 512
>>> image = Image.new("RGB", (64, 48), "red")
>>> result = fleur.compute(predictions=["a red square"], images=[image])
>>> len(result["fleur_per_sample"]), len(result["fleur_texts"])  # the score lies in [0, 1]
(1, 1)
""",
    codebase_urls=("https://github.com/Yebin46/FLEUR",),
    reference_urls=("https://aclanthology.org/2024.acl-long.205", "https://arxiv.org/abs/2406.06004",),
)
register_scorer("fleur", factory="capeval.judges.scorer:FleurScorer", images="required", references="unused",
                option_help=JUDGE_OPTION_HELP,
                help="FLEUR: LLaVA-1.5-13B rates the caption from 0.0 to 1.0, smoothed over its digit probabilities",
                card=FLEUR_CARD)
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
EXPERT_CARD = ModuleCard(
    description="""\
EXPERT is a reference-free image-captioning metric: LLaVA-1.5-13B fine-tuned with the authors' LoRA adapter is asked
to score the caption of the image from 0.0 to 1.0 (EXPERT's prompt, greedy answer), and the number it writes is
smoothed over the probabilities of the digit tokens at the number's positions (FLEUR's smoothing). With
`explanation=True` the judge also explains the score along three criteria: fluency, relevance, descriptiveness.
""",
    citation="""\
@inproceedings{kim2025expert,
  title={{EXPERT}: An Explainable Image Captioning Evaluation Metric with Structured Explanations},
  author={Kim, Hyunjong and Kim, Sangyeop and Jeong, Jongheon and Cho, Yeongjae and Cho, Sungzoon},
  booktitle={Findings of the Association for Computational Linguistics: ACL 2025},
  year={2025}
}
""",
    returns="""\
expert (`float`): mean of the defined scores; expert_per_sample (`list` of `float`, NaN where the answer holds
    no readable number in [0, 1]); expert_raw, expert_raw_per_sample: the numbers the judge wrote;
expert_texts: the judge's answers; with `explanation=True` expert_explanations (the texts) and expert_criteria
    ({"fluency", "relevance", "descriptiveness"}, None where the text has not the official format);
undefined_scores (`int`).
""",
    examples="""\
>>> import evaluate
>>> from PIL import Image
>>> expert = evaluate.load("capeval/expert", max_new_tokens=16)  # 16 to be quick; official 512
>>> image = Image.new("RGB", (64, 48), "red")
>>> result = expert.compute(predictions=["a red square"], images=[image])
>>> len(result["expert_per_sample"]), len(result["expert_texts"])  # the score lies in [0, 1]
(1, 1)
""",
    codebase_urls=("https://github.com/hjkim811/EXPERT",),
    reference_urls=("https://arxiv.org/abs/2506.24016",),
)
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
                card=EXPERT_CARD)
