"""``capture``, ``spice_factual`` and ``soft_spice`` at every door, with multi-sentence captions and references:
``capeval score``, ``capeval evaluate`` (two systems, intervals, significance), ``COCOEvalCap``, the Trainer hook and
``evaluate.load`` of ``metrics/capture``, each value equal to the scorer's own ``score()`` on the same input; and a
run with ``clip_s`` on ~100-word captions says CLIP truncated them and CAPTURE's parser did not.

The tiny models in an offline hub: NLTK data, all-mpnet-base-v2, SPICE synonyms and the FACTUAL parser, whose
random weights write no fact at all; so its generation answers :func:`rule_graph` (a fixed reading of the words)
for every input, in every door and in the expected values alike: the scene graphs are not empty and the values are
not constant."""

import json
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from capeval import TruncationWarning
from capeval.backbones import scene_graph_parser
from capeval.cli import main
from capeval.core.live_models import LiveModels
from capeval.core.scoring import load_scorer
from capeval.text import mpnet

REPO = Path(__file__).resolve().parents[2]
METRICS = ("capture", "spice_factual", "soft_spice")
REFERENCES = {
    11: ["A red car is on the street. Two men walk a dog.", "A red automobile is on a road. A dog is near it."],
    7: ["A man sits on a wooden bench. A dog sits near the bench.", "A man is on a bench."],
    30: ["Two men stand near a red car. The car is on a road.", "Men and a car on a street."],
}
SYSTEMS = {
    "short": {11: "A car is on a road.", 7: "A man sits on a bench.", 30: "Two men near a car."},
    "detailed": {11: "A red car is on the street. A dog walks near the car. Two men walk the dog.",
                 7: "A man sits on a wooden bench. The bench is near a road.",
                 30: "Two men stand on a road. A red automobile is near the men."},
}
NOUNS = {"car", "automobile", "street", "road", "men", "man", "dog", "bench"}
ADJECTIVES = {"red", "wooden", "two"}
SKIPPED = {"a", "an", "the", "it", "and", "is", "are"}


def rule_graph(text: str) -> str:
    """A fixed reading of a text's words in FACTUAL's output format: an adjective before a noun is its attribute
    ("two" its count), the words between two nouns their relation, a noun in no fact an object."""
    words = re.findall(r"[a-z]+", text.lower())
    facts, nouns, between = [], [], []
    for i, word in enumerate(words):
        if word in NOUNS:
            if nouns and between:
                facts.append(f"( {nouns[-1]} , {' '.join(between)} , {word} )")
            nouns.append(word)
            between = []
        elif word in ADJECTIVES and i + 1 < len(words) and words[i + 1] in NOUNS:
            facts.append(f"( {words[i + 1]} , is , {'2' if word == 'two' else word} )")
        elif word not in SKIPPED:
            between.append(word)
    facts += [f"( {noun} )" for noun in dict.fromkeys(nouns) if not any(f" {noun} " in f for f in facts)]
    return " , ".join(facts)


@pytest.fixture
def detail_models(tiny_hub, monkeypatch):
    """The tiny hub, the parser's generation answering :func:`rule_graph`, and registries of shared parsers and
    encoders of this test's own (no strings cached by other tests' parsers)."""
    monkeypatch.setattr(scene_graph_parser.SceneGraphParser, "generate",
                        lambda self, texts, input_limits=None: [rule_graph(t) for t in texts])
    monkeypatch.setattr(scene_graph_parser, "_LIVE", LiveModels())
    monkeypatch.setattr(mpnet, "_LIVE", LiveModels())
    return tiny_hub


def expected(name, captions, references):
    """The scorer's own ``score()``: its per-sample values."""
    return load_scorer(name, device="cpu").score(list(captions), references=[list(r) for r in references])[
        f"{name}_per_sample"]


def system_lists(system):
    ids = list(REFERENCES)
    return [SYSTEMS[system][i] for i in ids], [REFERENCES[i] for i in ids]


def test_the_graphs_are_not_trivial(detail_models):
    captions, references = system_lists("detailed")
    for name in METRICS:
        values = expected(name, captions, references)
        assert 0 < min(values) < max(values) < 1, (name, values)


@pytest.mark.parametrize("name", METRICS)
def test_capeval_score_rows_equal_the_scorer(detail_models, tmp_path, capsys, name):
    captions, references = system_lists("detailed")
    records = [{"caption": c, "references": r} for c, r in zip(captions, references)]
    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    assert main(["score", name, "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl"),
                 "--device", "cpu"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    summary = json.loads(capsys.readouterr().out)
    want = expected(name, captions, references)
    assert [row["scores"][name] for row in rows] == pytest.approx(want, abs=1e-12)
    assert summary[name] == pytest.approx(np.mean(want), abs=1e-12)


@pytest.fixture
def coco_files(tmp_path):
    annotations = {"images": [{"id": i, "file_name": f"{i}.png"} for i in REFERENCES],
                   "annotations": [{"id": n, "image_id": i, "caption": r} for n, (i, r) in
                                   enumerate((i, r) for i, refs in REFERENCES.items() for r in refs)]}
    (tmp_path / "captions.json").write_text(json.dumps(annotations))
    for system, captions in SYSTEMS.items():
        (tmp_path / f"{system}.json").write_text(json.dumps([{"image_id": i, "caption": c}
                                                             for i, c in captions.items()]))
    return tmp_path


def test_capeval_evaluate_two_systems_with_intervals_and_significance(detail_models, coco_files, capsys):
    out = coco_files / "report"
    assert main(["evaluate", "--annotations", str(coco_files / "captions.json"), "--results",
                 str(coco_files / "short.json"), str(coco_files / "detailed.json"), "--metrics", *METRICS,
                 "--resamples", "200", "--device", "cpu", "--output", str(out)]) == 0
    table = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["keys"] == list(METRICS)
    assert {key: report["metrics"][key]["title"] for key in METRICS} == {
        "capture": "CAPTURE", "spice_factual": "SPICE (FACTUAL parser)", "soft_spice": "Soft-SPICE (FACTUAL parser)"}
    assert "SPICE (FACTUAL parser)" in table
    for system in SYSTEMS:
        captions, references = system_lists(system)
        for name in METRICS:
            score = report["systems"][system]["scores"][name]
            assert score["value"] == pytest.approx(np.mean(expected(name, captions, references)), abs=1e-12)
            low, high = score["ci"]
            assert low <= score["value"] <= high
    compared = {c["metric"]: c for c in report["comparisons"]}
    for name in METRICS:  # delta = value(system_b) - value(system_a)
        pair = compared[name]
        want = np.mean(expected(name, *system_lists(pair["system_b"]))) - \
            np.mean(expected(name, *system_lists(pair["system_a"])))
        assert pair["delta"] == pytest.approx(want, abs=1e-12) and abs(want) > 0.01
        assert 0 <= compared[name]["p_randomization"] <= 1


def test_cocoevalcap_keys_are_the_scorer_keys_and_never_the_jar_s_spice(detail_models, coco_files):
    from capeval.cocoevalcap import COCOEvalCap
    from capeval.core.keys import coco_method
    from capeval.core.scoring import get_scorer_spec

    evaluation = COCOEvalCap(str(coco_files / "captions.json"), str(coco_files / "detailed.json"),
                             metrics=list(METRICS), quiet=True, device="cpu")
    evaluation.evaluate()
    assert list(evaluation.eval) == list(METRICS)
    jar_key = coco_method(get_scorer_spec("spice").scorer_class(), "spice")  # the jar's SPICE, not run here
    assert jar_key == "SPICE" and jar_key not in evaluation.eval
    captions, references = system_lists("detailed")
    for name in METRICS:
        want = expected(name, captions, references)
        assert evaluation.eval[name] == pytest.approx(np.mean(want), abs=1e-12)
        assert [evaluation.imgToEval[i][name] for i in REFERENCES] == pytest.approx(want, abs=1e-12)


def word_tokenizer(texts):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["[PAD]", "[BOS]", "[EOS]", "[UNK]", *sorted({w for t in texts for w in re.findall(r"\w+|\.", t)})]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="[PAD]", bos_token="[BOS]",
                                   eos_token="[EOS]", unk_token="[UNK]")


def test_the_trainer_hook_logs_the_scorer_values(detail_models):
    pytest.importorskip("transformers")
    import datasets

    from capeval.integrations.transformers import make_compute_metrics

    captions, references = system_lists("detailed")
    tokenizer = word_tokenizer([*captions, *(r for refs in references for r in refs)])
    rows = [tokenizer(c)["input_ids"] + [tokenizer.eos_token_id] for c in captions]
    width = max(map(len, rows))
    predictions = np.array([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    labels = np.array([r + [-100] * (width - len(r)) for r in rows])
    dataset = datasets.Dataset.from_dict({"references": references, "labels": [list(r) for r in rows]})
    eval_pred = SimpleNamespace(predictions=predictions, label_ids=labels, inputs=None)
    decoded = tokenizer.batch_decode(predictions, skip_special_tokens=True)
    assert all(text.count(" .") >= 2 for text in decoded)  # multi-sentence, as the hook decodes them
    logged = make_compute_metrics(list(METRICS), tokenizer, dataset, image_column=None,
                                  references_column="references", metric_options={
                                      name: {"device": "cpu"} for name in METRICS})(eval_pred)
    for name in METRICS:
        assert logged[name] == pytest.approx(np.mean(expected(name, decoded, references)), abs=1e-12)


def test_evaluate_load_of_the_capture_module(detail_models):
    evaluate = pytest.importorskip("evaluate")
    captions, references = system_lists("detailed")
    module = evaluate.load(str(REPO / "metrics" / "capture"), device="cpu")
    result = module.compute(predictions=captions, references=references)
    want = expected("capture", captions, references)
    assert result["capture_per_sample"] == pytest.approx(want, abs=1e-12)
    assert result["capture"] == pytest.approx(np.mean(want), abs=1e-12)
    assert [sorted(detail) for detail in result["capture_details"]] == [["attributes", "objects", "relations"]] * 3


SENTENCES = ["A red car is on the street.", "Two men walk a dog.", "The dog is near the car.",
             "A man sits on a bench.", "The bench is wooden.", "A road is near the bench."]


def test_clip_s_says_it_truncated_long_captions_and_capture_says_nothing(detail_models, tmp_path):
    """~100-word captions of short sentences: CLIP's 77 tokens cut every caption, the parser's 64 no sentence."""
    from capeval.suite.run import evaluate_captions

    captions = {i: " ".join(SENTENCES[(i + k) % len(SENTENCES)] for k in range(17)) for i in REFERENCES}
    assert all(95 <= len(c.split()) <= 110 for c in captions.values())
    for i in REFERENCES:
        Image.fromarray(np.full((16, 16, 3), 40 * (i % 5), np.uint8)).save(tmp_path / f"{i}.png")
    annotations = {"images": [{"id": i, "file_name": f"{i}.png"} for i in REFERENCES],
                   "annotations": [{"id": n, "image_id": i, "caption": r} for n, (i, r) in
                                   enumerate((i, r) for i, refs in REFERENCES.items() for r in refs)]}
    (tmp_path / "captions.json").write_text(json.dumps(annotations))
    (tmp_path / "long.json").write_text(json.dumps([{"image_id": i, "caption": c} for i, c in captions.items()]))
    parser = load_scorer("capture", device="cpu").parser
    assert max(parser.input_length(s) for s in SENTENCES) <= 64  # no sentence over the parser's limit
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate_captions([str(tmp_path / "long.json")], annotations=str(tmp_path / "captions.json"),
                          images=str(tmp_path), metrics=["clip_s", "capture"], resamples=100, device="cpu")
    notices = [str(w.message) for w in caught if issubclass(w.category, TruncationWarning)]
    assert any(re.search(r"3 of \d+ texts exceed 77 CLIP tokens", notice) for notice in notices), notices
    assert not any("FACTUAL" in notice for notice in notices), notices
    capture = load_scorer("capture", device="cpu").score(list(captions.values()), references=list(REFERENCES.values()))
    assert capture["truncated_texts"] == 0
