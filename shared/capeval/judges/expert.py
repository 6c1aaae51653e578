"""EXPERT (Kim et al., ACL Findings 2025) as the official ``hjkim811/EXPERT`` script (``expert.py`` at commit
74bbef41209fce20551f2d707bc7642400d7eddf) computes it: LLaVA-1.5-13B with the authors' LoRA merged in
(:mod:`capeval.judges.expert_weights`) is asked :data:`EXPERT_PROMPT` in LLaVA's ``llava_v0`` conversation (what the
released script renders when run as its README says: it infers the conversation from the model name
``EXPERT-llava-13b-lora``, which lacks "v1"; ``prompt_format="llava_v1"`` asks in ``llava_v1``) about the image
padded to a square; greedy answer (at most 512 new tokens); the number it wrote, smoothed over the digit tokens'
probabilities exactly as FLEUR's (:mod:`capeval.functional.fleur`: the official script has FLEUR's smoothing code).
Optionally the second turn: the smoothed score as the answer, then :data:`EXPERT_EXPLANATION_PROMPT`, and the answer
read into its three criteria (fluency, relevance, descriptiveness). Reference-free: EXPERT has no reference variant.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Mapping, Optional, Sequence, Union

from capeval.core.errors import InputError
from capeval.core.hub import unrecorded
from capeval.core.inputs import ValidInputs
from capeval.core.keys import ScoreKey
from capeval.core.option_types import AtLeast, BatchSize, Device, Dtype, OneOf, PathLike
from capeval.judges.backend import Generation, JudgeBackend, JudgeBackendName
from capeval.judges.cache import DEFAULT_INDEX_BYTES
from capeval.judges.expert_weights import ADAPTER_WEIGHT, BASE_WEIGHT, adapter_id, base_id, merged_judge
from capeval.judges.identity import unloaded_model_id
from capeval.judges.judge_scorer import JudgeScorer, Replay, judged_outputs
from capeval.judges.judge_weights import judge_model_id
from capeval.judges.prompts import GENERATION
from capeval.judges.score_text import official_score_text

# the conversation expert.py renders when run as its README says (inferred from the model name), and the other one
EXPERT_PROMPT_FORMATS = ("llava_v0", "llava_v1")

# expert.py, get_scoring_prompt / get_explanation_prompt (the braces of the output format are literal there too)
EXPERT_PROMPT = ("Evaluate the caption and assign a score on a scale of 0.0 to 1.0.\n\nCaption: {caption}\n\n"
                 "Score (0.0~1.0):")
EXPERT_EXPLANATION_PROMPT = (
    "Provide a brief explanation for the score based on three criteria: Fluency, Relevance, and Descriptiveness."
    "\n\nCaption: {caption}\n\nEvaluation Criteria:\n"
    "- Fluency: Whether the caption is fluent, natural, and grammatically correct.\n"
    "- Relevance: Whether the sentence correctly describes the visual content and be closely relevant to the image.\n"
    "- Descriptiveness: Whether the sentence is a precise, informative caption that describes important details of "
    "the image.\n\nOutput Format:\nFluency: {{Provide explanation here.}}\nRelevance: {{Provide explanation here.}}\n"
    "Descriptiveness: {{Provide explanation here.}}")
CRITERIA = ("fluency", "relevance", "descriptiveness")
_EXPLANATION = re.compile(r"Fluency:\s*(.*?)\nRelevance:\s*(.*?)\nDescriptiveness:\s*(.*)", re.DOTALL)


def parse_explanation(text: str) -> Optional[dict]:
    """The three criteria of an explanation (``expert.py``'s ``parse_explanation``), None when it has not the
    official output format."""
    match = _EXPLANATION.search(text)
    return None if match is None else {c: match.group(i + 1).strip() for i, c in enumerate(CRITERIA)}


def expert_outputs(generation: Generation, digit_tokens: Sequence[int]) -> dict:
    """The cache outputs of one answer: the number read from the whole answer (the official script reads the decoded
    text with special tokens skipped), FLEUR's smoothing of it and the digit probabilities used; ``score`` None when
    there is none (the official script stops with an error or skips the sample there)."""
    return judged_outputs(generation, generation.text, digit_tokens)


def expert_score_text(outputs: dict) -> str:
    """The smoothed score as ``expert.py``'s explanation turn writes it, ``str(score.cpu().item())``: the sum taken
    term by term in float32, as there (transformers 4.37.2, LLaVA's pin, gives float32 logits, so the softmax and
    the sum are float32 tensors; :mod:`capeval.judges.score_text`)."""
    return official_score_text(outputs, "float32")


class ExpertScorer(JudgeScorer):
    """EXPERT: the smoothed score per sample (``expert``), the number the judge wrote (``expert_raw``), the answers
    (``expert_texts``) and, with ``explanation=True``, the explanations (``expert_explanations``) and their three
    criteria (``expert_criteria``: None where the answer has not the official format)."""

    name, images, references = "expert", "required", "unused"
    key_metadata = {"expert": ScoreKey("EXPERT"), "expert_raw": ScoreKey("EXPERT (raw)")}
    mean_over_defined = ("expert", "expert_raw")  # over the answers that hold a readable score (NaN ones left out)

    scoring_prompt, explanation_prompt = EXPERT_PROMPT, EXPERT_EXPLANATION_PROMPT
    prompt_formats, prompt_formats_note = EXPERT_PROMPT_FORMATS, " (EXPERT's adapter is LLaVA's)"
    read_answer, score_text = staticmethod(expert_outputs), staticmethod(expert_score_text)
    records_shards = False  # its weights are recorded as the base and the adapter resolve (load_judge)

    def __init__(self, base_model: str = BASE_WEIGHT, adapter: str = ADAPTER_WEIGHT, *,
                 judge_model: Optional[str] = None, device: Device = "auto", dtype: Optional[Dtype] = None,
                 batch_size: BatchSize = 16, device_map: Optional[Union[str, Mapping]] = None,
                 cache_dir: Optional[PathLike] = None,
                 prompt_format: Annotated[str, OneOf(EXPERT_PROMPT_FORMATS)] = "llava_v0", pad_to_square: bool = True,
                 max_new_tokens: Annotated[int, AtLeast(1)] = GENERATION["max_new_tokens"], explanation: bool = False,
                 float32_vision: bool = True, judge_cache: Optional[PathLike] = None, replay: Optional[Replay] = None,
                 cache_bytes: Annotated[int, AtLeast(1)] = DEFAULT_INDEX_BYTES,
                 judge_backend: JudgeBackendName = "transformers"):
        self.base_model, self.adapter, self.judge_model, self.judge_folder = base_model, adapter, judge_model, None
        self.float32_vision = bool(float32_vision)
        super().__init__(judge_backend=judge_backend, device=device, dtype=dtype, batch_size=batch_size,
                         device_map=device_map, cache_dir=cache_dir, prompt_format=prompt_format,
                         pad_to_square=pad_to_square, max_new_tokens=max_new_tokens, explanation=explanation,
                         judge_cache=judge_cache, replay=replay, cache_bytes=cache_bytes)

    def check_weights(self) -> None:
        if self.judge_model is not None and not Path(self.judge_model).expanduser().is_dir():
            raise InputError(f"judge_model: {self.judge_model} is not a folder (a merged EXPERT judge: `capeval "
                             f"convert expert-llava-hf <adapter folder> --output <out>`)")

    def load_judge(self, *, cache_dir, **loading) -> JudgeBackend:
        """The merged folder given (``judge_model``), else ``base_model`` and ``adapter`` merged (once, cached); its
        model id: adapter+base of an unchanged merge, else the folder's content. The vision tower in float32 as
        LLaVA's loader leaves it, with ``float32_vision``."""
        if self.judge_model is not None:
            self.judge_folder = Path(self.judge_model).expanduser()
            return self.backend(str(self.judge_folder), cache_dir=None, float32_vision=self.float32_vision, **loading)
        # the provenance names the base and the adapter (recorded as they resolve), not capeval's merged copy
        self.judge_folder = merged_judge(self.base_model, self.adapter, cache_dir=cache_dir)
        with unrecorded():
            return self.backend(str(self.judge_folder), cache_dir=None, float32_vision=self.float32_vision,
                                **loading)

    def expected_model_id(self) -> str:
        """From the local files when present (the folder given, else the adapter's and the base's), else the
        registered ``repo@revision``; nothing is merged."""
        if self.judge_model is not None:
            return judge_model_id(Path(self.judge_model).expanduser())
        return "+".join(unloaded_model_id(ref, id_of) for ref, id_of in ((self.adapter, adapter_id),
                                                                         (self.base_model, base_id)))

    def generation_settings(self) -> dict:
        """FLEUR's settings and the vision tower's dtype (float32 as LLaVA's loader leaves it, or the judge's)."""
        return {**super().generation_settings(),
                "vision_dtype": "float32" if self.float32_vision else self.dtype}

    def _score(self, inputs: ValidInputs) -> dict:
        result = super()._score(inputs)
        if self.explanation:
            result["expert_criteria"] = [None if text is None else parse_explanation(text)
                                         for text in result["expert_explanations"]]
        return result
