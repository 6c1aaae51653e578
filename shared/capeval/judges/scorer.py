"""FLEUR and RefFLEUR (Lee et al., ACL 2024) as the official ``Yebin46/FLEUR`` scripts compute them: LLaVA-1.5-13B
asked the prompt of :mod:`capeval.judges.prompts` in the ``llava_v1`` conversation about the image padded to a
square, greedy answer (at most 512 new tokens), the number it wrote and that number smoothed over the digit
tokens' probabilities (:mod:`capeval.functional.fleur`); optionally the explanation (``fleur_exp.py``: "Why? Tell
me the reason." after the smoothed score, written as the official float16 loop writes it). Batching, the judge
cache and its replay (``replay=``, no model loaded), the conversation and the provenance are the judges' one
mechanism, :class:`~capeval.judges.judge_scorer.JudgeScorer`, and what runs the judge is its backend
(``judge_backend``, :mod:`capeval.judges.backend`): this module states FLEUR's prompts, how its answers are read, and
its weights."""

from __future__ import annotations

from typing import Annotated, Mapping, Optional, Sequence, Union

from capeval.core.keys import ScoreKey
from capeval.core.option_types import AtLeast, BatchSize, Device, Dtype, OneOf, PathLike
from capeval.judges.backend import Generation, JudgeBackend, JudgeBackendName
from capeval.judges.cache import DEFAULT_INDEX_BYTES
from capeval.judges.identity import unloaded_model_id
from capeval.judges.judge_scorer import JudgeScorer, Replay, judged_outputs
from capeval.judges.judge_weights import judge_model_id
from capeval.judges.prompts import EXPLANATION_PROMPT, FLEUR_PROMPT, GENERATION, REF_FLEUR_PROMPT
from capeval.judges.score_text import official_score_text

FLEUR_PROMPT_FORMATS = ("auto", "llava_v1", "chat_template")  # "auto": llava_v1 for a LLaVA judge, else its template


def fleur_outputs(generation: Generation, digit_tokens: Sequence[int]) -> dict:
    """The cache outputs of one answer: the text, the number read from it (the official code reads the answer
    less its last four characters, ``</s>``, which this text holds only when generation ended), the smoothed score
    and the digit probabilities it used; ``score`` None when FLEUR has none."""
    return judged_outputs(generation, generation.text if generation.ended else generation.text[:-4], digit_tokens)


def fleur_score_text(outputs: dict) -> str:
    """The smoothed score as ``fleur_exp.py``'s explanation turn writes it, ``str(score.item())`` of the float16
    tensor its loop accumulates (LLaVA's float16 logits, float16 softmax): the stored probabilities rounded to
    float16, summed term by term in float16 in the official order (:mod:`capeval.judges.score_text`)."""
    return official_score_text(outputs, "float16")


class FleurScorer(JudgeScorer):
    """FLEUR: the smoothed score per sample (``fleur``), the number the judge wrote (``fleur_raw``), the answers
    (``fleur_texts``) and, with ``explanation=True``, the judge's reasons (``fleur_explanations``)."""

    name, images, references = "fleur", "required", "unused"
    key_metadata = {"fleur": ScoreKey("FLEUR"), "fleur_raw": ScoreKey("FLEUR (raw)")}
    mean_over_defined = ("fleur", "fleur_raw")  # over the answers that hold a readable score (NaN ones left out)
    scoring_prompt, explanation_prompt = FLEUR_PROMPT, EXPLANATION_PROMPT
    prompt_formats = FLEUR_PROMPT_FORMATS
    read_answer, score_text = staticmethod(fleur_outputs), staticmethod(fleur_score_text)

    def __init__(self, judge_model: str = "llava-1.5-13b-hf", *, device: Device = "auto", dtype: Optional[Dtype] = None,
                 batch_size: BatchSize = 16, device_map: Optional[Union[str, Mapping]] = None,
                 cache_dir: Optional[PathLike] = None,
                 prompt_format: Annotated[str, OneOf(FLEUR_PROMPT_FORMATS)] = "auto", pad_to_square: bool = True,
                 max_new_tokens: Annotated[int, AtLeast(1)] = GENERATION["max_new_tokens"], explanation: bool = False,
                 judge_cache: Optional[PathLike] = None, replay: Optional[Replay] = None,
                 cache_bytes: Annotated[int, AtLeast(1)] = DEFAULT_INDEX_BYTES,
                 judge_backend: JudgeBackendName = "transformers"):
        self.judge_model = judge_model
        super().__init__(judge_backend=judge_backend, device=device, dtype=dtype, batch_size=batch_size,
                         device_map=device_map, cache_dir=cache_dir, prompt_format=prompt_format,
                         pad_to_square=pad_to_square, max_new_tokens=max_new_tokens, explanation=explanation,
                         judge_cache=judge_cache, replay=replay, cache_bytes=cache_bytes)

    def load_judge(self, **loading) -> JudgeBackend:
        return self.backend(self.judge_model, float32_vision=False, **loading)

    def expected_model_id(self) -> str:
        return unloaded_model_id(self.judge_model, judge_model_id)


class RefFleurScorer(FleurScorer):
    """RefFLEUR: FLEUR with the references (joined by newlines) in the prompt."""

    name, images, references = "ref_fleur", "required", "required"
    key_metadata = {"ref_fleur": ScoreKey("RefFLEUR"), "ref_fleur_raw": ScoreKey("RefFLEUR (raw)")}
    mean_over_defined = ("ref_fleur", "ref_fleur_raw")
    scoring_prompt = REF_FLEUR_PROMPT
