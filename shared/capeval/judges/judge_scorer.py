"""The one mechanism of every LLaVA judge (FLEUR, RefFLEUR, EXPERT).

:class:`JudgeScorer` checks the generation and cache options, loads the judge through its backend (the
``judge_backend`` option, :mod:`capeval.judges.backend`) or, replaying, names it without loading anything, hands the
backend every distinct call once (the backend cuts the batches of greedy generation; the image padded to a square as
LLaVA's ``expand2square`` when asked), in a LLaVA conversation or the judge's chat template, reads each answer into
the judge's score, asks the explanation turn after each scored answer of a batch when asked, records every call in a
:class:`JudgeCache` as its batch completes or replays it from one (a replay answers a sample only from a record bound
to it: its key is that of the sample's inputs, the model id the judge's, the backend's name and version the
backend's), and writes the provenance. A subclass states only what differs: its prompts (``scoring_prompt``,
``explanation_prompt``), the conversations it may be asked in (``prompt_formats``), how an answer is read
(``read_answer``) and how the smoothed score is written back into the explanation turn (``score_text``), and its
weights: a subclass sets its weights options on the instance, then calls ``JudgeScorer.__init__``, which asks it
:meth:`~JudgeScorer.check_weights`, :meth:`~JudgeScorer.load_judge` (with :attr:`~JudgeScorer.backend`, the
backend's class) or :meth:`~JudgeScorer.expected_model_id`."""

from __future__ import annotations

import math
import os
import warnings
from abc import abstractmethod
from typing import Annotated, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from capeval.core.errors import InputError
from capeval.core.inputs import ValidInputs
from capeval.core.option_types import PathLike, Satisfies
from capeval.core.scoring import Scorer
from capeval.functional.fleur import DIGITS, fleur_answer_number, fleur_digit_positions, fleur_smoothed_score
from capeval.judges.backend import Generation, JudgeBackend, backend_identity, judge_backend_class
from capeval.judges.cache import JudgeCache, image_identity, inputs_key
from capeval.judges.identity import is_tiny_model_id
from capeval.judges.judge_weights import shard_sha256s
from capeval.judges.prompts import (ANSWER_END, CONVERSATIONS, GENERATION, chat_messages, fleur_caption,
                                    judge_prompt_sha256, render_llava)


class UndefinedJudgeScoreWarning(UserWarning):
    """The judge's answer held no number FLEUR can read (none in [0, 1], or its digits not where the official
    code looks): that sample has no score (NaN), and the mean leaves it out."""


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


def replay_problem(path) -> Optional[str]:
    """Why ``path`` cannot be replayed (``None``: it can): it is no file."""
    return None if os.path.isfile(path) else f"judge cache {path} not found"


# the judges' replay option: a judge cache file to score from (judge_cache= wrote it)
Replay = Annotated[PathLike, Satisfies(replay_problem, "a judge cache file (written with judge_cache=)")]


def open_judge_cache(*, batch_size: int, max_new_tokens: int, judge_cache, replay, cache_bytes: int):
    """A judge's generation and cache options checked, and the cache's every record (before anything loads):
    ``(replay path or None, the JudgeCache to read with replay= or write with judge_cache=, else None)``."""
    for option, value in (("max_new_tokens", max_new_tokens), ("batch_size", batch_size),
                          ("cache_bytes", cache_bytes)):
        if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise InputError(f"{option} must be a positive integer, not {value!r}")
    if replay is not None and judge_cache is not None:
        raise InputError("replay= reads a judge cache and judge_cache= writes one: give one of them")
    if replay is not None and replay_problem(replay):
        raise InputError(f"replay: {replay_problem(replay)}")
    if replay is None and judge_cache is None:
        return None, None
    cache = JudgeCache(replay if replay is not None else judge_cache, max_bytes=cache_bytes)
    cache.check()
    return os.fspath(replay) if replay is not None else None, cache


class JudgeScorer(Scorer):
    """A LLaVA judge's score per sample (``<name>``), the number it wrote (``<name>_raw``), its answers
    (``<name>_texts``) and, with ``explanation=True``, its reasons (``<name>_explanations``).

    A subclass sets ``scoring_prompt`` (the first user turn: ``{caption}``, and ``{references}`` joined by newlines
    where the judge reads them), ``explanation_prompt`` (the second user turn, after the smoothed score as the
    answer: ``{caption}`` where it names it), ``prompt_formats`` (``"auto"``: ``llava_v1`` for a LLaVA judge, else its
    chat template) and ``prompt_formats_note`` (said when refusing another), ``read_answer(generation, digit_ids)``
    (the cache outputs of one answer) and ``score_text(outputs)`` (the smoothed score as the explanation turn writes
    it); ``records_shards``: whether the provenance lists the sha256 of the loaded judge's weight shards."""

    scoring_prompt: str
    explanation_prompt: str
    prompt_formats: Tuple[str, ...]
    prompt_formats_note = ""
    read_answer: Callable[[Generation, Sequence[int]], dict]
    score_text: Callable[[dict], str]
    records_shards = True

    def __init__(self, *, judge_backend: str, device: str, dtype, batch_size: int, device_map, cache_dir,
                 prompt_format: str, pad_to_square: bool, max_new_tokens: int, explanation: bool,
                 judge_cache: Optional[os.PathLike], replay: Optional[os.PathLike], cache_bytes: int):
        if prompt_format not in self.prompt_formats:
            raise InputError(f"prompt_format must be one of {self.prompt_formats}{self.prompt_formats_note}, not "
                             f"{prompt_format!r}")
        self.replay_path, self.cache = open_judge_cache(batch_size=batch_size, max_new_tokens=max_new_tokens,
                                                        judge_cache=judge_cache, replay=replay,
                                                        cache_bytes=cache_bytes)
        self.check_weights()
        self.pad_to_square, self.explanation, self.max_new_tokens = pad_to_square, explanation, max_new_tokens
        self.backend, self.backend_identity = judge_backend_class(judge_backend), backend_identity(judge_backend)
        if replay is not None:
            self.judge = None
            self.model_id = self.expected_model_id()
            self.dtype = self.backend.dtype_name(dtype, device, device_map)
            self.cache_sha256 = self.cache.sha256()
        else:
            self.judge = self.load_judge(device=device, dtype=dtype, device_map=device_map, cache_dir=cache_dir,
                                         batch_size=batch_size)
            self.model_id, self.dtype, self.device = self.judge.model_id, self.judge.dtype, self.judge.device
        self.format = prompt_format if prompt_format != "auto" else (
            "llava_v1" if self.judge is None or self.judge.model_type == "llava" else "chat_template")
        self.prompt_sha256 = judge_prompt_sha256(self.scoring_prompt, self.explanation_prompt if explanation else None,
                                                 self.format)

    # the weights: what a subclass states
    def check_weights(self) -> None:
        """Refuses weights options that cannot load, before anything loads (after the cache options)."""

    @abstractmethod
    def load_judge(self, *, device: str, dtype, device_map, cache_dir, batch_size: int) -> JudgeBackend:
        """The judge, loaded by :attr:`backend`."""

    @abstractmethod
    def expected_model_id(self) -> str:
        """The model id a replayed record must carry, found without loading the judge."""

    # provenance
    def provenance_extras(self) -> dict:
        extras = {"judge": {"model": self.model_id, "backend": self.backend_identity,
                            "prompt_sha256": self.prompt_sha256, "prompt_format": self.format,
                            "generation": self.generation_settings()}}
        if self.judge is None:
            extras.update(self.replay_extras())
        elif self.records_shards:
            extras["judge"]["shards_sha256"] = shard_sha256s(self.judge.directory)
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

    # one judge call
    def _call_inputs(self, caption: str, identity: dict, references: Optional[List[str]]) -> dict:
        return {"judge": self.name, "model": self.model_id, "backend": self.backend_identity,
                "prompt_sha256": self.prompt_sha256, "image": identity, "caption": caption, "references": references,
                "generation": self.generation_settings()}

    def _first_turn(self, caption: str, references: Optional[List[str]]) -> str:
        return self.scoring_prompt.format(caption=caption, references="\n".join(references or []))

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
        ``n`` is asked: the same references, and the same prompt and backend where it states them."""
        inputs = record["inputs"]
        differing = [name for name in ("prompt_sha256", "backend", "references") if inputs.get(name) != call[name]
                     and not (name != "references" and inputs.get(name) is None)]
        if differing:
            raise InputError(f"sample {n}: the replay cache {self.replay_path} line {self.cache.line_of(record)} "
                             f"holds its image file and caption {call['caption']!r:.60} asked with other "
                             f"{' and '.join(differing)} than this {self.name} asks: it does not answer this sample")

    def _judged(self, calls: List[dict], images: Sequence) -> List[dict]:
        """The judge's outputs for every call (each distinct call once; cached ones from the cache): all the others
        handed to the backend at once, each batch it answers read, explained when asked and recorded as it
        completes."""
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
        firsts = [self._first_turn(calls[n]["caption"], calls[n]["references"]) for n in todo]
        answered = self.judge.answers([self._prompt([("user", f), ("assistant", None)]) for f in firsts],
                                      [images[n] for n in todo], max_new_tokens=self.max_new_tokens,
                                      square=self.pad_to_square, label=f"{self.name} judge")
        done = 0
        for answers in answered:
            batch = range(done, done + len(answers))
            done += len(answers)
            outputs = [self.read_answer(answer, self.judge.digit_ids) for answer in answers]
            if self.explanation:
                self._explain(outputs, [calls[todo[i]] for i in batch], [firsts[i] for i in batch],
                              [images[todo[i]] for i in batch])
            for i, result in zip(batch, outputs):
                results[keys[todo[i]]] = result
                if self.cache is not None:
                    self.cache.put(calls[todo[i]], result)
        return [results[key] for key in keys]

    def _explain(self, outputs: List[dict], calls: List[dict], firsts: List[str], images: Sequence) -> None:
        """The second turn after each scored answer: the smoothed score (:attr:`score_text`) as the answer, with
        ``</s>`` as the official scripts write it in a LLaVA conversation (the conversation adds its own separator
        too), then the explanation prompt."""
        scored = [n for n, o in enumerate(outputs) if o["score"] is not None]
        if not scored:
            return
        end = ANSWER_END if self.format in CONVERSATIONS else ""
        prompts = [self._prompt([("user", firsts[n]), ("assistant", self.score_text(outputs[n]) + end),
                                 ("user", self.explanation_prompt.format(caption=calls[n]["caption"])),
                                 ("assistant", None)]) for n in scored]
        reasons = [reason for answers in self.judge.answers(prompts, [images[n] for n in scored],
                                                            max_new_tokens=self.max_new_tokens,
                                                            square=self.pad_to_square)
                   for reason in answers]
        for n, reason in zip(scored, reasons):
            outputs[n]["explanation"] = reason.text
