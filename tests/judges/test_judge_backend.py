"""The judge backend interface: a second backend is a class with the protocol's members and one registration. A
deterministic stub backend, registered here as a family's registration.py would, runs FLEUR's real scorer end to end
(load_scorer, judge_backend="stub"): it is handed every prompt at once and cuts the batches itself, its digit
probabilities are smoothed as FLEUR smooths them, and its name and version key the judge cache and enter the
provenance, so its records are never read under another backend (or another version of it). The stub proves the
interface, not the numbers: the transformers backend's are proven by the other tests of this folder."""

import hashlib
import math
import warnings
from pathlib import Path

import pytest
import torch
from PIL import Image

from capeval import InputError, load_scorer
from capeval.judges import backend
from capeval.judges.backend import Generation, register_judge_backend
from capeval.judges.cache import JudgeCache, inputs_key
from capeval.judges.identity import unloaded_model_id
from capeval.judges.judge_scorer import UndefinedJudgeScoreWarning
from capeval.judges.judge_weights import judge_model_id
from capeval.judges.prompts import EXPLANATION_PROMPT, FLEUR_PROMPT, render_llava_v1

DIGIT_IDS = [40 + d for d in range(10)]
DOT, OTHER = 60, 70
# the number the stub writes for each caption ("n/a": no number, so no score)
ANSWERS = {"a red square": "0.85", "a blue square": "0.7", "a cat sits": "n/a", "kids play": "0.35",
           "a dog runs": "0.62"}
CAPTIONS = list(ANSWERS)
IMAGES = [Image.new("RGB", (40, 30), colour) for colour in ("red", "blue", "green", "white", "black")]


def distributions(prompt: str, length: int) -> torch.Tensor:
    """The stub's digit probabilities at each of ``length`` tokens: a softmax of normals seeded by the prompt."""
    seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:4], "little")
    return torch.softmax(torch.randn(length, 10, generator=torch.Generator().manual_seed(seed)) * 3, dim=-1)


class StubBackend:
    """A deterministic judge backend: for a first turn it writes the number :data:`ANSWERS` holds for the caption,
    for an explanation turn "because"; each character is one token."""

    batches_seen = []  # (answers() call, prompts in the batch, judge cache lines written when it was asked)
    calls = []  # the prompts of each answers() call
    watched = None  # a judge cache file

    def __init__(self, ref, *, device, dtype, device_map, cache_dir, batch_size, float32_vision):
        self.model_id = unloaded_model_id(ref, judge_model_id)
        self.directory, self.dtype, self.device = Path(__file__).parent, self.dtype_name(dtype, device, None), "cpu"
        self.model_type, self.digit_ids, self.batch_size = "llava", DIGIT_IDS, batch_size

    @classmethod
    def version(cls):
        return "1.0"

    @classmethod
    def dtype_name(cls, dtype, device, device_map):
        return dtype or "float32"

    def chat_prompt(self, messages):
        raise AssertionError("FLEUR asks a LLaVA judge in llava_v1")

    def _answer(self, prompt):
        caption = next((c for c in CAPTIONS if f"Caption: {c}\n" in prompt), None)
        text = "because" if prompt.endswith(f"{EXPLANATION_PROMPT} ASSISTANT:") else ANSWERS[caption]
        ids = [DIGIT_IDS[int(c)] if c.isdigit() else DOT if c == "." else OTHER for c in text]
        return Generation(ids, text, True, distributions(prompt, len(ids)))

    def answers(self, prompts, images, *, max_new_tokens, square, label=None):
        assert square and len(images) == len(prompts) and all(isinstance(i, Image.Image) for i in images)
        StubBackend.calls.append(list(prompts))
        call = len(StubBackend.calls) - 1
        for start in range(0, len(prompts), self.batch_size):
            written = len(self.watched.read_text().splitlines()) if self.watched and self.watched.exists() else 0
            StubBackend.batches_seen.append((call, len(prompts[start:start + self.batch_size]), written))
            yield [self._answer(p) for p in prompts[start:start + self.batch_size]]


@pytest.fixture
def stub(monkeypatch):
    """The stub registered as "stub" for this test only (the registry restored afterwards)."""
    backend.judge_backends()  # the registrations imported before the registry is swapped for a copy
    monkeypatch.setattr(backend, "_BACKENDS", dict(backend._BACKENDS))
    register_judge_backend("stub", factory=f"{__name__}:StubBackend")
    monkeypatch.setattr(StubBackend, "batches_seen", [])
    monkeypatch.setattr(StubBackend, "calls", [])
    return StubBackend


def _expected_score(caption):
    """FLEUR's smoothing of the stub's number, computed here: digit × 0.1 × p(first decimal) + digit × 0.01 ×
    p(second decimal), at the positions of those digits in the answer "0.xy"."""
    answer = ANSWERS[caption]
    if not answer[0].isdigit():
        return math.nan
    prompt = render_llava_v1([("user", FLEUR_PROMPT.format(caption=caption)), ("assistant", None)])
    p = distributions(prompt, len(answer)).tolist()
    score = sum(d * 0.1 * p[2][d] for d in range(10))
    return score + (sum(d * 0.01 * p[3][d] for d in range(10)) if len(answer) > 3 else 0.0)


def test_fleur_runs_end_to_end_through_a_registered_backend(stub, tmp_path, monkeypatch):
    cache = tmp_path / "stub.jsonl"
    monkeypatch.setattr(StubBackend, "watched", cache)
    scorer = load_scorer("fleur", judge_backend="stub", device="cpu", dtype="float32", batch_size=2,
                         judge_cache=cache, explanation=True)
    with pytest.warns(UndefinedJudgeScoreWarning, match="1 of 5 answers"):
        result = scorer.score(CAPTIONS, images=IMAGES)
    first_turns = [render_llava_v1([("user", FLEUR_PROMPT.format(caption=c)), ("assistant", None)])
                   for c in CAPTIONS]
    assert stub.calls[0] == first_turns  # every prompt handed over at once, in order
    # the backend cut them (2, 2, 1); each batch's records were written before the next batch was asked
    assert [seen for seen in stub.batches_seen if seen[0] == 0] == [(0, 2, 0), (0, 2, 2), (0, 1, 4)]
    # after each batch, the explanation turns of its scored answers (captions 0 and 1; 3; 4)
    assert [len(prompts) for prompts in stub.calls[1:]] == [2, 1, 1]
    assert all(p.endswith(f"USER: {EXPLANATION_PROMPT} ASSISTANT:") for prompts in stub.calls[1:] for p in prompts)
    expected = [_expected_score(c) for c in CAPTIONS]
    assert [math.isnan(s) for s in result["fleur_per_sample"]] == [math.isnan(e) for e in expected]
    assert [s for s in result["fleur_per_sample"] if s == s] == pytest.approx([e for e in expected if e == e],
                                                                              abs=1e-12)
    assert result["fleur_raw_per_sample"][:2] == [0.85, 0.7] and result["fleur_texts"] == list(
        ANSWERS.values())
    assert result["fleur_explanations"] == ["because" if e == e else None for e in expected]
    assert result["provenance"]["judge"]["backend"] == {"name": "stub", "version": "1.0"}
    assert result["provenance"]["options"]["judge_backend"] == "stub"
    records = list(JudgeCache(cache).records())
    assert len(records) == len(CAPTIONS)
    assert all(r["inputs"]["backend"] == {"name": "stub", "version": "1.0"} for r in records)
    assert all(r["key"] == inputs_key(r["inputs"]) for r in records)


def test_records_of_one_backend_are_not_read_under_another(stub, tmp_path, monkeypatch):
    cache = tmp_path / "stub.jsonl"
    options = {"device": "cpu", "dtype": "float32", "max_new_tokens": 8}
    warnings.simplefilter("ignore", UndefinedJudgeScoreWarning)  # "a cat sits" has no score (tested above)
    written = load_scorer("fleur", judge_backend="stub", judge_cache=cache, **options).score(CAPTIONS, images=IMAGES)
    replayed = load_scorer("fleur", judge_backend="stub", replay=cache, **options).score(CAPTIONS, images=IMAGES)
    assert replayed["fleur_texts"] == written["fleur_texts"] and len(stub.calls) == 1  # the replay asked nothing
    assert replayed["provenance"]["judge"]["backend"] == {"name": "stub", "version": "1.0"}
    with pytest.raises(InputError, match=r"sample 0: not in the replay cache"):  # the same call, another backend
        load_scorer("fleur", replay=cache, **options).score(CAPTIONS, images=IMAGES)
    monkeypatch.setattr(StubBackend, "version", classmethod(lambda cls: "1.1"))
    with pytest.raises(InputError, match=r"sample 0: not in the replay cache"):  # another version of it
        load_scorer("fleur", judge_backend="stub", replay=cache, **options).score(CAPTIONS, images=IMAGES)
    record = next(JudgeCache(cache).records())
    transformers = {**record["inputs"], "backend": backend.backend_identity("transformers")}
    assert inputs_key(transformers) != record["key"]


def test_a_backend_not_registered_is_refused_before_anything_loads():
    with pytest.raises(InputError, match=r"^fleur: judge_backend='vllm': no judge backend 'vllm' is registered "
                                         r"\(known: \[.*'transformers'.*\]\)$"):
        load_scorer("fleur", judge_backend="vllm")
    with pytest.raises(InputError, match=r"^expert: judge_backend must be 'transformers' or a backend added with "
                                         r"register_judge_backend, not 3$"):
        load_scorer("expert", judge_backend=3)


def test_a_benchmark_replay_refuses_records_of_two_backends(tmp_path):
    from capeval.benchmarks.replay import ReplayedJudge

    cache = JudgeCache(tmp_path / "mixed.jsonl")
    outputs = {"text": "0.5", "raw_score": 0.5, "score": 0.5, "digit_probabilities": None, "explanation": None}
    for line, version in enumerate(("5.25.0", "5.26.0")):
        cache.put({"judge": "fleur", "model": "m@0", "backend": {"name": "transformers", "version": version},
                   "prompt_sha256": "0", "image": {"sha256": None, "file": f"{line}.jpg"}, "caption": "a dog",
                   "references": None, "generation": {}}, outputs)
    with pytest.raises(InputError, match=r"the records of fleur come from more than one judge: backend "
                                         r"\{.*\"5\.25\.0\"\} \(line 1\) and backend \{.*\"5\.26\.0\"\} \(line 2\)"):
        ReplayedJudge("fleur", cache.path)


def test_the_transformers_backend_names_itself_in_the_records_and_the_provenance(tiny_hub, tmp_path):
    import transformers

    cache = tmp_path / "fleur.jsonl"
    result = load_scorer("fleur", device="cpu", max_new_tokens=4, judge_cache=cache).score(
        CAPTIONS[:1], images=IMAGES[:1])
    named = {"name": "transformers", "version": transformers.__version__}
    assert result["provenance"]["judge"]["backend"] == named
    assert result["provenance"]["options"]["judge_backend"] == "transformers"
    assert next(JudgeCache(cache).records())["inputs"]["backend"] == named
