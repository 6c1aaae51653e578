"""A new metric needs no edit outside its family folder (#36): a per-sample scorer and a corpus-level one, declared
and registered here as a family's ``scorer.py`` and ``registration.py`` would, reach ``capeval evaluate``,
``evaluate_captions``, the report (with their titles, scales and directions), ``COCOEvalCap`` and the Trainer hook,
with values equal to an independent computation."""

import json
from types import SimpleNamespace
from typing import Dict, List

import numpy as np
import pytest

from capeval.cocoevalcap import COCOEvalCap
from capeval.core import scoring
from capeval.core.corpus_statistics import CorpusStatistics, KeyScores
from capeval.core.keys import ScoreKey
from capeval.core.scoring import Scorer, summarize

REFERENCES = {11: ["a red square on a table", "a square"], 7: ["two dogs run", "dogs running in a park"],
              30: ["a cat sleeps", "a small cat asleep on a sofa"]}
SYSTEMS = {"short": {11: "a square", 7: "dogs", 30: "a cat"},
           "long": {11: "a big red square on a wooden table", 7: "two brown dogs run in the park", 30: "a cat"}}


class WordCount(Scorer):
    """Per sample: the caption's words (fewer is better here, to exercise the direction)."""

    name, images, references = "word_count", "unused", "unused"
    key_metadata = {"word_count": ScoreKey("Words", higher_is_better=False)}

    def __init__(self, *, device=None, dtype=None, batch_size=None):
        pass

    def _score(self, inputs):
        return summarize({"word_count": [len(caption.split()) for caption in inputs.predictions]})


def _ratio(sums: np.ndarray) -> np.ndarray:
    return sums[:, 0] / sums[:, 1]


class LengthRatio(Scorer):
    """Corpus-level: the captions' words over the references' mean words, pooled over the corpus (not a mean)."""

    name, images, references, corpus_level = "length_ratio", "unused", "required", True
    states_corpus_statistics = True  # its score_systems below: a suite scores it over the whole input
    key_metadata = {"length_ratio": ScoreKey("Length ratio", scale=100.0, coco_method="LengthRatio")}

    def __init__(self, *, device=None, dtype=None, batch_size=None):
        pass

    def _score(self, inputs):
        (scores,) = self.score_systems([inputs.predictions], None, inputs.references)
        return {"length_ratio": scores["length_ratio"].corpus,
                "length_ratio_per_sample": scores["length_ratio"].per_sample}

    def score_systems(self, systems, images=None, references=None, *, peers=()) -> List[Dict[str, KeyScores]]:
        reference_words = [np.mean([len(r.split()) for r in refs]) for refs in references]
        out = []
        for captions in systems:
            units = np.array([[len(c.split()), words] for c, words in zip(captions, reference_words)], float)
            statistics = CorpusStatistics(units, _ratio)
            out.append({"length_ratio": KeyScores(statistics.value(), list(units[:, 0] / units[:, 1]), statistics)})
        return out


@pytest.fixture
def new_family(monkeypatch):
    """The two scorers registered (as a family's registration.py registers), for this test only."""
    scoring.scorers()  # every shipped family registered first
    for cls in (WordCount, LengthRatio):
        spec = scoring.ScorerSpec(cls.name, cls, cls.images, cls.references, help=cls.__doc__)
        monkeypatch.setitem(scoring._SCORERS, cls.name, spec)


def expected_values(captions: Dict[int, str], references: Dict[int, List[str]] = REFERENCES):
    """Independently: the mean word count, and Σ words / Σ mean reference words."""
    ids = list(references)
    words = [len(captions[i].split()) for i in ids]
    reference_words = [sum(len(r.split()) for r in references[i]) / len(references[i]) for i in ids]
    return {"word_count": sum(words) / len(words), "length_ratio": sum(words) / sum(reference_words)}


@pytest.fixture
def coco_files(tmp_path):
    annotations = {"images": [{"id": i, "file_name": f"{i}.jpg"} for i in REFERENCES],
                   "annotations": [{"id": n, "image_id": i, "caption": r}
                                   for n, (i, r) in enumerate((i, r) for i, refs in REFERENCES.items() for r in refs)]}
    (tmp_path / "captions.json").write_text(json.dumps(annotations))
    for name, captions in SYSTEMS.items():
        (tmp_path / f"{name}.json").write_text(json.dumps([{"image_id": i, "caption": c} for i, c in captions.items()]))
    return tmp_path


def test_capeval_evaluate_and_the_report_show_each_title_scale_and_direction(new_family, coco_files, capsys):
    from capeval.cli import main

    out = coco_files / "report"
    code = main(["evaluate", "--annotations", str(coco_files / "captions.json"), "--results",
                 str(coco_files / "short.json"), str(coco_files / "long.json"), "--metrics", "length_ratio",
                 "word_count", "--resamples", "100", "--output", str(out)])
    assert code == 0
    table = capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["keys"] == ["length_ratio", "word_count"]
    assert {key: (m["title"], m["scale"], m["higher_is_better"], m["corpus_level"])
            for key, m in report["metrics"].items()} == {"length_ratio": ("Length ratio", 100.0, True, True),
                                                          "word_count": ("Words", 1.0, False, False)}
    for system, captions in SYSTEMS.items():
        expected = expected_values(captions)
        for key, value in expected.items():
            assert report["systems"][system]["scores"][key]["value"] == pytest.approx(value, rel=1e-12)
        assert f"{expected['length_ratio'] * 100:.1f}" in table and f"{expected['word_count']:.4f}" in table
    assert "Length ratio" in table and "Words" in table


def test_cocoevalcap_names_each_key_as_its_scorer_declares(new_family, coco_files):
    evaluation = COCOEvalCap(str(coco_files / "captions.json"), str(coco_files / "long.json"),
                             metrics=["bleu", "length_ratio", "word_count"], quiet=True)
    evaluation.evaluate()
    expected = expected_values(SYSTEMS["long"])
    assert list(evaluation.eval) == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "LengthRatio", "word_count"]
    assert evaluation.eval["LengthRatio"] == pytest.approx(expected["length_ratio"], rel=1e-12)
    assert evaluation.eval["word_count"] == pytest.approx(expected["word_count"], rel=1e-12)
    assert [evaluation.imgToEval[i]["word_count"] for i in REFERENCES] == \
        [len(SYSTEMS["long"][i].split()) for i in REFERENCES]


def test_the_trainer_hook_logs_both(new_family):
    pytest.importorskip("transformers")
    from test_transformers_integration import _ids, make_tokenizer

    import datasets

    from capeval.integrations.transformers import make_compute_metrics

    tokenizer = make_tokenizer()  # its vocabulary: the Trainer tests' colours and shapes
    captions = ["a red square", "a picture of a green circle", "a blue stripe with a square"]
    references = {0: ["a red square", "a square"], 1: ["a green circle"], 2: ["a picture of a blue stripe", "a stripe"]}
    labels = [row + [tokenizer.eos_token_id] for row in tokenizer(captions)["input_ids"]]
    dataset = datasets.Dataset.from_dict({"caption": captions, "references": list(references.values()),
                                          "labels": labels})
    eval_pred = SimpleNamespace(predictions=_ids(tokenizer, captions, 12, tokenizer.pad_token_id),
                                label_ids=_ids(tokenizer, captions, 12, -100), inputs=None)
    logged = make_compute_metrics(["length_ratio", "word_count"], tokenizer, dataset, image_column=None,
                                  references_column="references")(eval_pred)
    decoded = tokenizer.batch_decode(eval_pred.predictions, skip_special_tokens=True)
    assert decoded == captions
    expected = expected_values(dict(enumerate(decoded)), references)
    assert logged["length_ratio"] == pytest.approx(expected["length_ratio"], rel=1e-12)
    assert logged["word_count"] == pytest.approx(expected["word_count"], rel=1e-12)
