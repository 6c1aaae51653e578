"""FLEUR and RefFLEUR (Lee et al., ACL 2024) as the official ``Yebin46/FLEUR`` scripts compute them: LLaVA-1.5-13B
asked the prompt of :mod:`capeval.judges.prompts` in the ``llava_v1`` conversation about the image padded to a
square, greedy answer (at most 512 new tokens), the number it wrote and that number smoothed over the digit
tokens' probabilities (:mod:`capeval.functional.fleur`); optionally the explanation (``fleur_exp.py``: "Why? Tell
me the reason." after the smoothed score, written as the official float16 loop writes it). Every judge call can be
recorded in a :class:`JudgeCache` and replayed from it with no model loaded (``replay=``); a replay answers a
sample only from a record bound to it (its key is that of the sample's inputs, the model id the judge's)."""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
from tqdm.auto import tqdm

from capeval.core.errors import InputError
from capeval.core.hub import cached_location, registered_weights
from capeval.core.inputs import ValidInputs
from capeval.core.scoring import Scorer
from capeval.functional.fleur import DIGITS, fleur_answer_number, fleur_digit_positions, fleur_smoothed_score
from capeval.judges.cache import DEFAULT_INDEX_BYTES, JudgeCache, image_identity, inputs_key
from capeval.judges.generation import (Generation, JudgeModel, judge_dtype, judge_model_id, pad_to_square,
                                      shard_sha256s)
from capeval.judges.identity import is_tiny_model_id
from capeval.judges.prompts import (ANSWER_END, CONVERSATIONS, EXPLANATION_PROMPT, GENERATION, PROMPTS, chat_messages,
                                    fleur_caption, prompt_sha256, render_llava)
from capeval.judges.score_text import official_score_text

PROMPT_FORMATS = ("auto", "llava_v1", "chat_template")


class UndefinedJudgeScoreWarning(UserWarning):
    """The judge's answer held no number FLEUR can read (none in [0, 1], or its digits not where the official
    code looks): that sample has no score (NaN), and the mean leaves it out."""


def fleur_outputs(generation: Generation, digit_tokens: Sequence[int]) -> dict:
    """The cache outputs of one answer: the text, the number read from it (the official code reads the answer
    less its last four characters, ``</s>``, which this text holds only when generation ended), the smoothed score
    and the digit probabilities it used; ``score`` None when FLEUR has none."""
    return judged_outputs(generation, generation.text if generation.ended else generation.text[:-4], digit_tokens)


def judged_outputs(generation: Generation, answer: str, digit_tokens: Sequence[int]) -> dict:
    """The cache outputs of one answer read from ``answer`` (the part of its text a judge's official code reads):
    the text, the number, FLEUR's smoothing of it over the digit tokens' probabilities and those probabilities;
    ``score`` None when the answer holds no readable number."""
    number = fleur_answer_number(answer)
    positions = fleur_digit_positions(number, generation.token_ids, digit_tokens) if number is not None else None
    outputs = {"text": generation.text, "raw_score": number, "score": None, "digit_probabilities": None,
               "explanation": None}
    if positions is None:
        return outputs
    first, second = (None if p is None else generation.digit_probabilities[p].tolist() for p in positions)
    outputs["score"] = fleur_smoothed_score(number, first, second)
    outputs["digit_probabilities"] = {
        "first": {str(d): first[d] for d in DIGITS},
        "second": None if second is None else {str(d): second[d] for d in DIGITS}}
    return outputs


def fleur_score_text(outputs: dict) -> str:
    """The smoothed score as ``fleur_exp.py``'s explanation turn writes it, ``str(score.item())`` of the float16
    tensor its loop accumulates (LLaVA's float16 logits, float16 softmax): the stored probabilities rounded to
    float16, summed term by term in float16 in the official order (:mod:`capeval.judges.score_text`)."""
    return official_score_text(outputs, "float16")


def open_judge_cache(*, batch_size: int, max_new_tokens: int, judge_cache, replay, cache_bytes: int):
    """A judge's generation and cache options checked, and the cache's every record (before anything loads):
    ``(replay path or None, the JudgeCache to read with replay= or write with judge_cache=, else None)``."""
    for option, value in (("max_new_tokens", max_new_tokens), ("batch_size", batch_size),
                          ("cache_bytes", cache_bytes)):
        if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise InputError(f"{option} must be a positive integer, not {value!r}")
    if replay is not None and judge_cache is not None:
        raise InputError("replay= reads a judge cache and judge_cache= writes one: give one of them")
    if replay is not None and not os.path.isfile(replay):
        raise InputError(f"replay: judge cache {replay} not found")
    if replay is None and judge_cache is None:
        return None, None
    cache = JudgeCache(replay if replay is not None else judge_cache, max_bytes=cache_bytes)
    cache.check()
    return os.fspath(replay) if replay is not None else None, cache


def _registered_judge_id(judge_model: str, cache_dir) -> str:
    """The model id of ``judge_model`` without loading it: from its local files when present, else its pinned
    registry entry (or the hub id as given)."""
    local = Path(judge_model).expanduser()
    if local.is_dir():
        return judge_model_id(local)
    spec = registered_weights().get(judge_model)
    if spec is None:
        return judge_model
    local = cached_location(spec)
    return judge_model_id(local) if local is not None else f"{spec.repo_id}@{spec.revision}"


class FleurScorer(Scorer):
    """FLEUR: the smoothed score per sample (``fleur``), the number the judge wrote (``fleur_raw``), the answers
    (``fleur_texts``) and, with ``explanation=True``, the judge's reasons (``fleur_explanations``)."""

    name, images, references = "fleur", "required", "unused"

    def __init__(self, judge_model: str = "llava-1.5-13b-hf", *, device: str = "auto", dtype=None, batch_size: int = 16,
                 device_map=None, cache_dir=None, prompt_format: str = "auto", pad_to_square: bool = True,
                 max_new_tokens: int = GENERATION["max_new_tokens"], explanation: bool = False,
                 judge_cache: Optional[os.PathLike] = None, replay: Optional[os.PathLike] = None,
                 cache_bytes: int = DEFAULT_INDEX_BYTES):
        if prompt_format not in PROMPT_FORMATS:
            raise InputError(f"prompt_format must be one of {PROMPT_FORMATS}, not {prompt_format!r}")
        self.batch_size, self.pad_to_square, self.explanation = batch_size, pad_to_square, explanation
        self.max_new_tokens = max_new_tokens
        self.replay_path, self.cache = open_judge_cache(batch_size=batch_size, max_new_tokens=max_new_tokens,
                                                        judge_cache=judge_cache, replay=replay,
                                                        cache_bytes=cache_bytes)
        if replay is not None:
            self.judge = None
            self.model_id = _registered_judge_id(judge_model, cache_dir)
            self.dtype = str(judge_dtype(dtype, device, device_map)).replace("torch.", "")
            self.format = "llava_v1" if prompt_format == "auto" else prompt_format
            self.cache_sha256 = self.cache.sha256()
        else:
            self.judge = JudgeModel(judge_model, device=device, dtype=dtype, device_map=device_map,
                                    cache_dir=cache_dir)
            self.model_id, self.dtype = self.judge.model_id, str(self.judge.dtype).replace("torch.", "")
            self.device = self.judge.device
            self.format = prompt_format if prompt_format != "auto" else (
                "llava_v1" if self.judge.config.model_type == "llava" else "chat_template")
        self.prompt_sha256 = prompt_sha256(self.name, explanation=explanation, prompt_format=self.format)

    def provenance_extras(self) -> dict:
        extras = {"judge": {"model": self.model_id, "prompt_sha256": self.prompt_sha256,
                            "prompt_format": self.format, "generation": self.generation_settings()}}
        if self.judge is not None:
            extras["judge"]["shards_sha256"] = shard_sha256s(self.judge.directory)
        else:
            extras.update(self.replay_extras())
        return extras

    def replay_extras(self) -> dict:
        """What a replay adds to the provenance: the cache, and the tiny-weights flag when the records it replays
        were written with capeval's tiny random test weights (their model id says so), as a live run's."""
        extras = {"replayed": {"replayed": True, "cache": self.replay_path, "cache_sha256": self.cache_sha256}}
        if is_tiny_model_id(self.model_id):
            extras["tiny_random_weights"] = True
        return extras

    def generation_settings(self) -> dict:
        return {**GENERATION, "max_new_tokens": self.max_new_tokens, "pad_to_square": self.pad_to_square,
                "dtype": self.dtype}

    def score_keys(self, inputs: ValidInputs):
        return (self.name, f"{self.name}_raw")

    @property
    def mean_over_defined(self):
        """Both keys average over the answers that hold a readable score (NaN answers left out of the mean)."""
        return (self.name, f"{self.name}_raw")

    # one judge call
    def _call_inputs(self, caption: str, identity: dict, references: Optional[List[str]]) -> dict:
        return {"judge": self.name, "model": self.model_id, "prompt_sha256": self.prompt_sha256, "image": identity,
                "caption": caption, "references": references, "generation": self.generation_settings()}

    def _first_turn(self, caption: str, references: Optional[List[str]]) -> str:
        return PROMPTS[self.name].format(caption=caption, references="\n".join(references or []))

    def _prompt(self, turns) -> str:
        if self.format in CONVERSATIONS:
            return render_llava(turns, CONVERSATIONS[self.format])
        return self.judge.chat_prompt(chat_messages(turns))

    def _score(self, inputs: ValidInputs) -> dict:
        captions = [fleur_caption(c) for c in inputs.predictions]
        references = inputs.references if self.references != "unused" else None
        identities = [image_identity(image, getattr(image, "filename", None)) for image in inputs.images]
        calls = [self._call_inputs(c, i, None if references is None else list(references[n]))
                 for n, (c, i) in enumerate(zip(captions, identities))]
        self.replayed_models = set()
        outputs = self._replayed(calls) if self.judge is None else self._judged(calls, inputs.images)
        scores = [math.nan if o["score"] is None else float(o["score"]) for o in outputs]
        raw = [math.nan if o["raw_score"] is None else float(o["raw_score"]) for o in outputs]
        undefined = sum(s != s for s in scores)
        if undefined:
            warnings.warn(f"{self.name}: {undefined} of {len(scores)} answers hold no readable score in [0, 1] "
                          f"(NaN; left out of the mean)", UndefinedJudgeScoreWarning, stacklevel=3)
        defined = [s for s in scores if s == s]
        result: Dict[str, object] = {
            self.name: float(np.mean(defined)) if defined else math.nan, f"{self.name}_per_sample": scores,
            f"{self.name}_raw": float(np.mean([r for r in raw if r == r])) if any(r == r for r in raw) else math.nan,
            f"{self.name}_raw_per_sample": raw, f"{self.name}_texts": [o["text"] for o in outputs],
            "undefined_scores": undefined}
        if self.explanation:
            result[f"{self.name}_explanations"] = [o.get("explanation") for o in outputs]
        if self.judge is None:
            result["replay"] = {"cache": self.replay_path, "models": sorted(map(str, self.replayed_models))}
        return result

    def _replayed(self, calls: List[dict]) -> List[dict]:
        """Every call's outputs from the replay cache: by its inputs' key, else (records whose image content is
        unknown, e.g. imported published outputs) by judge, image file and caption."""
        found = []
        for n, (call, (exact, joined)) in enumerate(zip(calls, self.cache.lookup(calls))):
            outputs = None
            if exact is not None:
                outputs = exact["outputs"]
                self.replayed_models.add(self.model_id)
            elif joined is not None and (joined["inputs"].get("image") or {}).get("sha256") is None:
                self._check_joined(n, call, joined)
                outputs = joined["outputs"]
                self.replayed_models.add(joined["inputs"].get("model"))
            if outputs is None:
                raise InputError(f"sample {n}: not in the replay cache {self.replay_path} ({self.name}, image "
                                 f"{call['image']['file'] or call['image']['sha256'][:16]}, caption "
                                 f"{call['caption']!r:.60}, model {self.model_id}, dtype {self.dtype})")
            if self.explanation and outputs.get("score") is not None and outputs.get("explanation") is None:
                raise InputError(f"sample {n}: the replay cache {self.replay_path} holds no explanation for it")
            found.append(outputs)
        return found

    def _check_joined(self, n: int, call: dict, record: dict) -> None:
        """A record joined by image file and caption (its image content unknown) must have been asked what sample
        ``n`` is asked: the same references, and the same prompt where it states one."""
        inputs = record["inputs"]
        differing = [name for name in ("prompt_sha256", "references") if inputs.get(name) != call[name]
                     and not (name == "prompt_sha256" and inputs.get(name) is None)]
        if differing:
            raise InputError(f"sample {n}: the replay cache {self.replay_path} line {self.cache.line_of(record)} "
                             f"holds its image file and caption {call['caption']!r:.60} asked with other "
                             f"{' and '.join(differing)} than this {self.name} asks: it does not answer this sample")

    def _judged(self, calls: List[dict], images: Sequence) -> List[dict]:
        """The judge's outputs for every call (each distinct call once; cached ones from the cache)."""
        results: Dict[str, dict] = {}
        keys = [inputs_key(call) for call in calls]
        cached = self.cache.lookup(calls) if self.cache is not None else [(None, None)] * len(calls)
        todo, pending = [], set()
        for n, key in enumerate(keys):
            if key in results or key in pending:
                continue
            if cached[n][0] is not None:
                results[key] = cached[n][0]["outputs"]
            else:
                todo.append(n)
                pending.add(key)
        batches = [todo[i:i + self.batch_size] for i in range(0, len(todo), self.batch_size)]
        for batch in tqdm(batches, desc=f"{self.name} judge", unit="batch", disable=len(batches) < 2):
            for n, outputs in zip(batch, self._judge_batch([calls[n] for n in batch], [images[n] for n in batch])):
                results[keys[n]] = outputs
                if self.cache is not None:
                    self.cache.put(calls[n], outputs)
        return [results[key] for key in keys]

    def _judge_batch(self, calls: List[dict], images: Sequence) -> List[dict]:
        pictures = [pad_to_square(image, self.judge.image_mean) if self.pad_to_square else image.convert("RGB")
                    for image in images]
        firsts = [self._first_turn(call["caption"], call["references"]) for call in calls]
        answers = self.judge.generate([self._prompt([("user", f), ("assistant", None)]) for f in firsts], pictures,
                                      max_new_tokens=self.max_new_tokens)
        outputs = [fleur_outputs(answer, self.judge.digit_ids) for answer in answers]
        if self.explanation:
            self._explain(outputs, firsts, pictures)
        return outputs

    def _explain(self, outputs: List[dict], firsts: List[str], pictures: Sequence) -> None:
        """fleur_exp.py's second turn: the smoothed score as the answer, then "Why? Tell me the reason."."""
        scored = [n for n, o in enumerate(outputs) if o["score"] is not None]
        if not scored:
            return
        end = ANSWER_END if self.format in CONVERSATIONS else ""
        prompts = [self._prompt([("user", firsts[n]),
                                 ("assistant", fleur_score_text(outputs[n]) + end),
                                 ("user", EXPLANATION_PROMPT), ("assistant", None)]) for n in scored]
        reasons = self.judge.generate(prompts, [pictures[n] for n in scored], max_new_tokens=self.max_new_tokens)
        for n, reason in zip(scored, reasons):
            outputs[n]["explanation"] = reason.text


class RefFleurScorer(FleurScorer):
    """RefFLEUR: FLEUR with the references (joined by newlines) in the prompt."""

    name, images, references = "ref_fleur", "required", "required"
