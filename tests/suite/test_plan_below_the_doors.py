"""A plan trusted below the doors: each door (``capeval evaluate``, ``evaluate_captions``, ``COCOEvalCap``) reads the
scorer registry once per run and expands the metric names once, on the production path (the real registry accessors
wrapped by counters that call through); the functions below the doors take a resolved ``Plan``, never names."""

import inspect
import json
import sys

import numpy as np
import pytest
from PIL import Image

from capeval import InputError
from capeval.core import scoring
from capeval.core.evaluation_sets import EvalImage, GroundTruth, SystemCaptions
from capeval.suite import plan as plan_module

METRICS = ["bleu", "rouge_l", "clip_s"]  # two of a group (whole input) and a per-sample image scorer (chunked)


@pytest.fixture
def evaluation_files(tmp_path):
    """COCO annotations of four images (files under ``tmp_path / "images"``) and two systems' results files."""
    root = tmp_path / "images"
    root.mkdir()
    rng = np.random.default_rng(3)
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(root / f"{i}.jpg")
    annotations = {"images": [{"id": i, "file_name": f"{i}.jpg"} for i in range(4)],
                   "annotations": [{"id": 10 * i + k, "image_id": i, "caption": f"a dog {k} near tree {i}"}
                                   for i in range(4) for k in range(3)]}
    (tmp_path / "annotations.json").write_text(json.dumps(annotations))
    for name, words in (("a", "a dog near a tree"), ("b", "a cat on a mat")):
        (tmp_path / f"{name}.json").write_text(json.dumps([{"image_id": i, "caption": f"{words} {i}"}
                                                           for i in range(4)]))
    return tmp_path


@pytest.fixture
def reads(monkeypatch):
    """Counts of the registry accessors (``scorers``, ``groups``) and of the name expansion, over every binding of
    them in the loaded ``capeval`` modules; each counter calls the original."""
    counts = {"scorers": 0, "groups": 0, "select_metrics": 0}
    originals = {"scorers": scoring.scorers, "groups": scoring.groups, "select_metrics": plan_module.select_metrics}

    def counting(name):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return originals[name](*args, **kwargs)
        return wrapper

    wrappers = {name: counting(name) for name in originals}
    for module in [m for name, m in sys.modules.items() if name.startswith("capeval") and m is not None]:
        for name, original in originals.items():
            for attribute, value in list(vars(module).items()):
                if value is original:
                    monkeypatch.setattr(module, attribute, wrappers[name])
    return counts


def _reset(counts):
    for name in counts:
        counts[name] = 0


def test_each_door_reads_the_registry_once_and_expands_the_names_once(tiny_hub, evaluation_files, reads, capsys):
    """``chunk_images=1``-sized work is what used to read the registry again per chunk: four images, a chunked
    scorer, two systems."""
    from capeval.cli import main
    from capeval.cocoevalcap import COCOEvalCap
    from capeval.suite.run import evaluate_captions

    scoring.scorers(), scoring.groups()  # registrations discovered before counting
    root, annotations = evaluation_files / "images", str(evaluation_files / "annotations.json")
    results = [str(evaluation_files / "a.json"), str(evaluation_files / "b.json")]
    _reset(reads)
    report = evaluate_captions(results, annotations=annotations, images=str(root), metrics=METRICS,
                               options={"clip_s": {"batch_size": 1}}, device="cpu", resamples=50,
                               show_progress=False)
    assert reads == {"scorers": 1, "groups": 1, "select_metrics": 1}
    assert {"bleu_4", "rouge_l", "clip_s"} <= set(report["keys"])

    _reset(reads)
    code = main(["evaluate", "--annotations", annotations, "--results", *results, "--images", str(root),
                 "--metrics", *METRICS, "--device", "cpu", "--resamples", "50", "--json"])
    assert code == 0, capsys.readouterr().err
    assert reads == {"scorers": 1, "groups": 1, "select_metrics": 1}

    _reset(reads)
    coco = COCOEvalCap(annotations, results[0], metrics=METRICS, images=str(root), quiet=True, device="cpu")
    coco.evaluate()
    assert reads == {"scorers": 1, "groups": 1, "select_metrics": 1}
    assert len(coco.eval) == len(report["keys"])  # one entry per score key, as the suite scored them
    assert report["systems"]["a"]["scores"]["clip_s"]["value"] in coco.eval.values()


def _text_set():
    truth = GroundTruth({1: EvalImage(1, None, ("a dog",)), 2: EvalImage(2, None, ("a cat",))}, "annotations.json")
    return truth, [SystemCaptions("a", {1: "a dog", 2: "a cat"}, "a.json")]


def test_below_the_doors_names_are_refused_by_type_and_by_signature():
    from capeval.suite.engine import score_evaluation, score_suite
    from capeval.suite.plan import Plan, resolve_plan
    from capeval.suite.run import evaluate_captions, prepare_evaluation, run_evaluation

    truth, systems = _text_set()
    with pytest.raises(TypeError, match="score_suite follows a resolved Plan .* not list"):
        score_suite(truth, systems, ["bleu"])
    with pytest.raises(TypeError, match="prepare_evaluation follows a resolved Plan .* not tuple"):
        prepare_evaluation(("coco",), ["a.json"], annotations="annotations.json")
    for below in (score_suite, score_evaluation, prepare_evaluation):
        parameters = inspect.signature(below).parameters
        assert not {"options", "device", "dtype", "batch_size", "cache_dir", "metrics"} & set(parameters), below
        assert Plan in {parameter.annotation for parameter in parameters.values()} or any(
            parameter.annotation == "Plan" for parameter in parameters.values()), below
    assert list(inspect.signature(run_evaluation).parameters)[0] == "prepared"
    # the doors take names: a plan given where names go is refused as not a list of names
    plan = resolve_plan(["bleu"])
    with pytest.raises(InputError, match="metrics must be a non-empty list of metric names"):
        evaluate_captions(["a.json"], annotations="annotations.json", metrics=plan)
    assert score_suite(truth, systems, plan, show_progress=False).keys == ["bleu_1", "bleu_2", "bleu_3", "bleu_4"]


def test_the_plan_holds_the_registry_it_was_resolved_from(reads):
    """The plan's layout and checks are answered from the registry entries the door read, not read again."""
    from capeval.suite.plan import resolve_plan

    scoring.scorers(), scoring.groups()
    _reset(reads)
    plan = resolve_plan(["coco", "clip_s"], {"CLIPScore": {"batch_size": 2}}, device="cpu")
    assert reads == {"scorers": 1, "groups": 1, "select_metrics": 1}
    plan.text_checks(), plan.check_references(True), plan.image_scorers, plan.scorer_class("clip_s")
    assert reads["scorers"] == 1
    assert plan.options == {"clip_s": {"batch_size": 2}} and plan.image_scorers == ("clip_s",)
    assert set(plan.specs) == set(scoring.scorers())


def test_an_evaluate_module_reads_the_registry_once_per_instance(tiny_hub, reads):
    """``evaluate.load`` of a module: its entry read once when the instance is made (options checked, its info, the
    load), nothing read again by ``compute``."""
    from pathlib import Path

    import evaluate

    scoring.scorers(), scoring.groups()
    module_path = str(Path(__file__).resolve().parents[2] / "metrics" / "clip_s")
    evaluate.load(module_path, device="cpu")  # the module's class made (its card read) before counting
    _reset(reads)
    metric = evaluate.load(module_path, device="cpu")
    image = Image.fromarray(np.zeros((24, 32, 3), dtype=np.uint8))
    result = metric.compute(predictions=["a dog", "a cat"], images=[image, image])
    assert reads["scorers"] == 1, reads
    assert len(result["clip_s_per_sample"]) == 2
