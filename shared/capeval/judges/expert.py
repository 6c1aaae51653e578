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

import hashlib
import json
import os
import re
from pathlib import Path
from typing import List, Optional, Sequence

from capeval.core.errors import InputError
from capeval.core.hub import cached_location, registered_weights, unrecorded
from capeval.core.inputs import ValidInputs
from capeval.judges.cache import DEFAULT_INDEX_BYTES
from capeval.judges.expert_weights import ADAPTER_WEIGHT, BASE_WEIGHT, adapter_id, base_id, merged_judge
from capeval.judges.generation import Generation, JudgeModel, judge_dtype, judge_model_id, pad_to_square
from capeval.judges.prompts import ANSWER_END, CONVERSATIONS, GENERATION
from capeval.judges.scorer import FleurScorer, judged_outputs, open_judge_cache
from capeval.judges.score_text import official_score_text

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
# the conversation expert.py renders when run as its README says (inferred from the model name), and the other one
EXPERT_FORMATS = ("llava_v0", "llava_v1")
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


def expert_prompt_sha256(explanation: bool, prompt_format: str = "llava_v0") -> str:
    """sha256 of everything that makes EXPERT's prompt: its template, the conversation and the explanation turn
    when asked."""
    material = {"template": EXPERT_PROMPT, "format": prompt_format, "conversation": CONVERSATIONS[prompt_format],
                "explanation": EXPERT_EXPLANATION_PROMPT if explanation else None}
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def keep_vision_tower_in_float32(model) -> bool:
    """LLaVA's loader leaves the CLIP vision tower in float32 (``device_map="auto"`` skips its float16 cast): the tower
    runs in float32 on the pixels rounded to the judge's dtype and its features are cast to that dtype before the
    projector. Does the same to a llava-hf judge running in 16 bits; False (nothing changed) for a float32 judge."""
    import torch

    inner = getattr(model, "model", model)
    projector = inner.multi_modal_projector
    dtype = next(projector.parameters()).dtype
    if dtype == torch.float32:
        return False
    inner.vision_tower.float()
    projector.register_forward_pre_hook(
        lambda module, args: tuple(a.to(dtype) if torch.is_tensor(a) else a for a in args))
    return True


def _expected_model_id(base_model: str, adapter: str, judge_model: Optional[str]) -> str:
    """The model id a replayed record must carry, without loading or merging: from the local files when present,
    else the registered ``repo@revision``."""
    if judge_model is not None:
        return judge_model_id(Path(judge_model).expanduser())
    ids = []
    for ref, local_id in ((adapter, adapter_id), (base_model, base_id)):
        local = Path(ref).expanduser()
        spec = registered_weights().get(ref)
        if local.is_dir():
            ids.append(local_id(local))
        elif spec is not None:
            found = cached_location(spec)
            ids.append(local_id(found) if found is not None else f"{spec.repo_id}@{spec.revision}")
        else:
            ids.append(ref)
    return "+".join(ids)


class ExpertScorer(FleurScorer):
    """EXPERT: the smoothed score per sample (``expert``), the number the judge wrote (``expert_raw``), the answers
    (``expert_texts``) and, with ``explanation=True``, the explanations (``expert_explanations``) and their three
    criteria (``expert_criteria``: None where the answer has not the official format)."""

    name, images, references = "expert", "required", "unused"

    def __init__(self, base_model: str = BASE_WEIGHT, adapter: str = ADAPTER_WEIGHT, *,
                 judge_model: Optional[str] = None, device: str = "auto", dtype=None, batch_size: int = 16,
                 device_map=None, cache_dir=None, prompt_format: str = "llava_v0", pad_to_square: bool = True,
                 max_new_tokens: int = GENERATION["max_new_tokens"], explanation: bool = False,
                 float32_vision: bool = True, judge_cache: Optional[os.PathLike] = None,
                 replay: Optional[os.PathLike] = None, cache_bytes: int = DEFAULT_INDEX_BYTES):
        if prompt_format not in EXPERT_FORMATS:
            raise InputError(f"prompt_format must be one of {EXPERT_FORMATS} (EXPERT's adapter is LLaVA's), not "
                             f"{prompt_format!r}")
        self.replay_path, self.cache = open_judge_cache(batch_size=batch_size, max_new_tokens=max_new_tokens,
                                                        judge_cache=judge_cache, replay=replay,
                                                        cache_bytes=cache_bytes)
        if judge_model is not None and not Path(judge_model).expanduser().is_dir():
            raise InputError(f"judge_model: {judge_model} is not a folder (a merged EXPERT judge: `capeval convert "
                             f"expert-llava-hf <adapter folder> --output <out>`)")
        self.batch_size, self.pad_to_square, self.explanation = batch_size, pad_to_square, explanation
        self.max_new_tokens, self.format = max_new_tokens, prompt_format
        self.float32_vision = bool(float32_vision)
        self.prompt_sha256 = expert_prompt_sha256(explanation, prompt_format)
        if replay is not None:
            self.judge, self.judge_folder = None, None
            self.model_id = _expected_model_id(base_model, adapter, judge_model)
            self.dtype = str(judge_dtype(dtype, device, device_map)).replace("torch.", "")
            self.cache_sha256 = self.cache.sha256()
            return
        if judge_model is not None:
            folder = Path(judge_model).expanduser()
            self.judge = JudgeModel(str(folder), device=device, dtype=dtype, device_map=device_map)
        else:  # the provenance names the base and the adapter (recorded as they resolve), not capeval's merged copy
            folder = merged_judge(base_model, adapter, cache_dir=cache_dir)
            with unrecorded():
                self.judge = JudgeModel(str(folder), device=device, dtype=dtype, device_map=device_map)
        self.judge_folder = folder
        self.model_id = self.judge.model_id  # adapter+base of an unchanged merge, else the folder's content
        self.dtype, self.device = str(self.judge.dtype).replace("torch.", ""), self.judge.device
        if self.float32_vision:
            keep_vision_tower_in_float32(self.judge.model)

    def generation_settings(self) -> dict:
        """FLEUR's settings and the vision tower's dtype (float32 as LLaVA's loader leaves it, or the judge's)."""
        return {**super().generation_settings(),
                "vision_dtype": "float32" if self.float32_vision else self.dtype}

    def provenance_extras(self) -> dict:
        extras = {"judge": {"model": self.model_id, "prompt_sha256": self.prompt_sha256, "prompt_format": self.format,
                            "generation": self.generation_settings()}}
        if self.judge is None:
            extras.update(self.replay_extras())
        return extras

    def _first_turn(self, caption: str, references: Optional[List[str]]) -> str:
        return EXPERT_PROMPT.format(caption=caption)

    def _score(self, inputs: ValidInputs) -> dict:
        result = super()._score(inputs)
        if self.explanation:
            result["expert_criteria"] = [None if text is None else parse_explanation(text)
                                         for text in result["expert_explanations"]]
        return result

    def _judge_batch(self, calls: List[dict], images: Sequence) -> List[dict]:
        pictures = [pad_to_square(image, self.judge.image_mean) if self.pad_to_square else image.convert("RGB")
                    for image in images]
        firsts = [self._first_turn(call["caption"], None) for call in calls]
        answers = self.judge.generate([self._prompt([("user", f), ("assistant", None)]) for f in firsts], pictures,
                                      max_new_tokens=self.max_new_tokens)
        outputs = [expert_outputs(answer, self.judge.digit_ids) for answer in answers]
        if self.explanation:
            self._explain_criteria(outputs, firsts, [call["caption"] for call in calls], pictures)
        return outputs

    def _explain_criteria(self, outputs: List[dict], firsts: List[str], captions: List[str],
                          pictures: Sequence) -> None:
        """expert.py's second turn: the smoothed score (:func:`expert_score_text`) + ``</s>`` as the answer (the
        conversation adds its own separator too: ``###`` in ``llava_v0``, ``</s>`` in ``llava_v1``), then the
        explanation prompt."""
        scored = [n for n, o in enumerate(outputs) if o["score"] is not None]
        if not scored:
            return
        prompts = [self._prompt([("user", firsts[n]), ("assistant", expert_score_text(outputs[n]) + ANSWER_END),
                                 ("user", EXPERT_EXPLANATION_PROMPT.format(caption=captions[n])),
                                 ("assistant", None)]) for n in scored]
        reasons = self.judge.generate(prompts, [pictures[n] for n in scored], max_new_tokens=self.max_new_tokens)
        for n, reason in zip(scored, reasons):
            outputs[n]["explanation"] = reason.text
