"""The suite's metric names, its COCO group against each pycocoevalcap metric alone, and its refusals (before any
model loads)."""

import numpy as np
import pytest
from PIL import Image

from capeval import InputError
from capeval.core.evaluation_sets import EvalImage, GroundTruth, SystemCaptions

REFERENCES = {
    1: ("a man rides a brown horse on the beach", "a person riding a horse by the sea", "horse and rider at the shore"),
    2: ("two dogs play with a red ball", "dogs chasing a ball in a park", "a pair of dogs and a ball"),
    3: ("a plate of pasta with tomato sauce", "spaghetti on a white plate", "a dish of noodles and sauce"),
    4: ("a red bus parked on a city street", "a double decker bus in town", "a bus waits at the curb"),
}
CAPTIONS = {
    "base": {1: "a man riding a horse on a beach", 2: "two dogs playing with a ball", 3: "a plate of food",
             4: "a red bus on a street"},
    "new": {1: "a person on a horse near the sea", 2: "dogs chasing a red ball in a park",
            3: "spaghetti with tomato sauce on a plate", 4: "a red bus on a street"},
}


@pytest.fixture
def text_set():
    truth = GroundTruth({i: EvalImage(i, f"{i}.jpg", refs) for i, refs in REFERENCES.items()}, "annotations.json")
    return truth, [SystemCaptions(name, captions, f"{name}.json") for name, captions in CAPTIONS.items()]


def test_coco_group_equals_each_pycocoevalcap_metric_alone(text_set):
    from capeval.core.scoring import load_scorer
    from capeval.suite import resolve_plan, score_suite
    from capeval.text.coco import coco_group_names

    truth, systems = text_set
    scores = score_suite(truth, systems, resolve_plan(["coco"]))
    group = coco_group_names()
    assert {scores.metrics[key]["scorer"] for key in scores.keys} == set(group)
    assert scores.keys[:4] == ["bleu_1", "bleu_2", "bleu_3", "bleu_4"] and "cider" in scores.keys
    references = [list(REFERENCES[i]) for i in scores.image_ids]
    for name in group:
        for system in systems:
            alone = load_scorer(name).score([system.captions[i] for i in scores.image_ids], references=references)
            for key in [k for k in scores.keys if scores.metrics[k]["scorer"] == name]:
                assert scores.per_image[system.name][key] == alone[f"{key}_per_sample"]
                assert scores.corpus[system.name][key] == alone[key]
                assert scores.statistics[system.name][key].value() == pytest.approx(alone[key], rel=1e-12)
                assert scores.metrics[key]["hashcode"] == alone["hashcode"]
                assert scores.metrics[key]["corpus_level"] == (name in ("bleu", "meteor", "cider"))


def test_select_metrics_expands_groups_aliases_and_duplicates():
    from capeval.suite import select_metrics
    from capeval.text.coco import coco_group_names

    assert select_metrics(["coco"]).names == coco_group_names()
    assert select_metrics(["CLIPScore", "coco", "bleu_4", "clip_s", "PAC-S", "cider"]).names == (
        "clip_s", *coco_group_names(), "pac_s")


def test_an_unknown_metric_lists_the_known_ones_before_any_model_loads(monkeypatch):
    from capeval.backbones.clip import ClipBackbone
    from capeval.suite import select_metrics

    loads = []
    init = ClipBackbone.__init__
    monkeypatch.setattr(ClipBackbone, "__init__", lambda self, *a, **k: loads.append(a) or init(self, *a, **k))
    with pytest.raises(InputError, match=r"unknown metric 'clip_z'; known: coco \(the group\), .*clip_s.*polos"):
        select_metrics(["clip_s", "clip_z"])
    with pytest.raises(InputError, match="non-empty list"):
        select_metrics("coco")
    assert loads == []


def _image_set(tmp_path):
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "1.jpg")
    truth = GroundTruth({1: EvalImage(1, "1.jpg", ("a cat",)), 2: EvalImage(2, "2.jpg", ("a dog",))}, "a.json")
    return truth, [SystemCaptions("a", {1: "a cat", 2: "a dog"}, "a.json")]


@pytest.mark.parametrize("change, message", [
    ({"options": {"pac_s": {}}}, r"options given for 'pac_s', which is not among the suite's metrics"),
    ({"options": {"clip_s": {"no_such": 1}}}, r"clip_s: unknown option\(s\) \['no_such'\]"),
    ({"metrics": ["polos"], "options": {"polos": {"statistics": "batch"}}},
     r"polos is corpus-level under \{'statistics': 'batch'\} .* reads images"),
    ({"metrics": ["ensembeval"], "options": {"ensembeval": {"precision": "official"}}},
     r"ensembeval takes only 'weights'.*\['precision'\]"),
    ({"systems": [SystemCaptions("b", {1: "a cat"}, "b.json")]},
     r"b \(b\.json\) lacks 1 image\(s\) that a captions \(2\): systems are compared on the same images"),
    ({"systems": [SystemCaptions("b", {1: "a cat", 2: " "}, "b.json")]},
     r"b: the caption of image 2 is an empty caption"),
    ({"chunk_images": 0}, "chunk_images must be a positive int"),
    ({}, r"1 image file\(s\) not found \(image root .*\): image 2: .*2\.jpg"),
])
def test_bad_input_is_one_clear_error_before_a_model_loads(tmp_path, monkeypatch, change, message):
    from capeval.backbones.clip import ClipBackbone
    from capeval.suite import resolve_plan, score_suite

    truth, systems = _image_set(tmp_path)
    loads = []
    init = ClipBackbone.__init__
    monkeypatch.setattr(ClipBackbone, "__init__", lambda self, *a, **k: loads.append(a) or init(self, *a, **k))
    arguments = {"metrics": ["clip_s"], "options": None, "chunk_images": 256, **change}
    extra = arguments.pop("systems", [])
    with pytest.raises(InputError, match=message):
        score_suite(truth, systems + extra, resolve_plan(arguments["metrics"], arguments["options"]),
                    images_root=tmp_path, chunk_images=arguments["chunk_images"])
    assert loads == []
