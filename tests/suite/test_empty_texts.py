"""Empty and whitespace-only captions and references at the suite's doors (#40 item 1): `capeval evaluate`,
`evaluate_captions` and the `COCOEvalCap` drop-in score them as pycocoevalcap 1.2 scores them (its own
``COCOEvalCap``, run with its jars on the same files, is the oracle), count them in the report, name them in one
stderr line, and refuse them under ``empty_caption="error"`` / ``--empty-caption error`` naming the file, the record
and the option; a suite metric that does not score them refuses them naming itself."""

import contextlib
import io
import json
import random
import warnings

import pytest

from capeval import InputError
from capeval.cli import main
from capeval.cocoevalcap import COCOEvalCap
from capeval.core.coco_files import read_ground_truth, read_results
from capeval.report import markdown_table
from capeval.suite import resolve_plan, score_suite
from capeval.suite.run import evaluate_captions
from capeval.text.coco_jars import require_java

IMAGES = 40
WORDS = "a man dog cat two red small runs sits on in near the with grass street table park ball bike".split()
METHODS = ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"]
EMPTY_CAPTIONS = {5: "", 17: "  \t", IMAGES - 1: "\xa0"}  # model_a's empty captions (the last: the file's last line)


def _sentence(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) + "."


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """COCO annotations (an empty and a whitespace-only reference, one image whose references are all empty) and
    two results files, model_a with empty and whitespace-only captions."""
    rng = random.Random(5)
    folder = tmp_path_factory.mktemp("empty-texts")
    annotations = {"images": [{"id": 100 + i, "file_name": f"{i}.jpg"} for i in range(IMAGES)], "annotations": []}
    for i in range(IMAGES):
        references = [_sentence(rng) for _ in range(3)]
        if i == 2:
            references[1] = ""
        if i == 9:
            references = [" ", ""]
        if i == 17:
            references[2] = "\t"
        for text in references:
            annotations["annotations"].append({"id": len(annotations["annotations"]), "image_id": 100 + i,
                                               "caption": text})
    (folder / "captions.json").write_text(json.dumps(annotations))
    for name in ("model_a", "model_b"):
        results = [{"image_id": 100 + i, "caption": _sentence(rng)} for i in range(IMAGES)]
        if name == "model_a":
            for i, text in EMPTY_CAPTIONS.items():
                results[i]["caption"] = text
        (folder / f"{name}.json").write_text(json.dumps(results))
    return folder


@pytest.fixture(scope="module")
def theirs(files, pycocoevalcap_meteor):
    """pycocoevalcap's COCOEvalCap (its jars; no SPICE: its CoreNLP jars cannot be downloaded here) on each system."""
    from pycocoevalcap import eval as pycoco_eval
    from pycocotools.coco import COCO

    require_java("the pycocoevalcap oracle")

    class NoSpice:
        def compute_score(self, gts, res):
            return float("nan"), [float("nan")] * len(gts)

        def method(self):
            return "SPICE"

    out = {}
    meteor = pycocoevalcap_meteor  # one jar for both runs (each SCORE line is answered from itself alone)
    spice, pycoco_eval.Spice = pycoco_eval.Spice, NoSpice
    pycoco_eval.Meteor = lambda: meteor
    try:
        for name in ("model_a", "model_b"):
            with contextlib.redirect_stdout(io.StringIO()):
                coco = COCO(str(files / "captions.json"))
                result = coco.loadRes(str(files / f"{name}.json"))
                evaluation = pycoco_eval.COCOEvalCap(coco, result)
                evaluation.params["image_id"] = result.getImgIds()
                evaluation.evaluate()
            del evaluation.eval["SPICE"]
            for scores in evaluation.imgToEval.values():
                del scores["SPICE"]
            out[name] = evaluation
    finally:
        pycoco_eval.Spice, pycoco_eval.Meteor = spice, type(meteor)
    return out


@pytest.mark.parametrize("backend", ["python", "java"])
def test_the_dropin_scores_empty_texts_as_pycocoevalcap(files, theirs, backend, capsys):
    for name in ("model_a", "model_b"):
        ours = COCOEvalCap(str(files / "captions.json"), str(files / f"{name}.json"), coco_backend=backend, quiet=True,
                           metrics=["bleu", "meteor", "rouge_l", "cider"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours.evaluate()
        assert list(ours.eval) == METHODS
        assert ours.eval == theirs[name].eval
        assert ours.imgToEval == theirs[name].imgToEval
    err = capsys.readouterr().err
    assert err.count("capeval: model_a has 3 empty captions of 40, the references hold 4 empty references") == 1
    assert err.count("the references hold 4 empty references (scored as pycocoevalcap") == 2  # one line per run


def test_the_dropin_refuses_empty_texts_under_error_naming_the_record(files):
    evaluation = COCOEvalCap(str(files / "captions.json"), str(files / "model_a.json"), quiet=True,
                             metrics=["bleu"], empty_caption="error")
    with pytest.raises(InputError, match=r"model_a\.json: record 5: model_a: the caption of image 105 is an empty "
                                         r"caption \(7 empty texts in all\); empty_caption='score'"):
        evaluation.evaluate()
    with pytest.raises(InputError, match="empty_caption must be 'score' or 'error' in a suite, not 'skip'"):
        COCOEvalCap(str(files / "captions.json"), str(files / "model_a.json"), empty_caption="skip")


def _values(report, system):
    return {key: score["value"] for key, score in report["systems"][system]["scores"].items()}


def test_evaluate_captions_scores_counts_and_reports_empty_texts(files, theirs, tmp_path, capsys):
    report = evaluate_captions([files / "model_a.json", files / "model_b.json"], annotations=files / "captions.json",
                               metrics=["bleu", "meteor", "rouge_l", "cider"], resamples=200, output=tmp_path / "out")
    keys = {"Bleu_1": "bleu_1", "Bleu_2": "bleu_2", "Bleu_3": "bleu_3", "Bleu_4": "bleu_4", "METEOR": "meteor",
            "ROUGE_L": "rouge_l", "CIDEr": "cider"}
    for name in ("model_a", "model_b"):
        assert _values(report, name) == {keys[method]: value for method, value in theirs[name].eval.items()}
    rows = {row["image_id"]: row for row in report["images"]}
    assert rows[105]["scores"]["model_a"]["cider"] == theirs["model_a"].imgToEval[105]["CIDEr"] == 0.0
    assert report["schema"] == "capeval-report/3"
    assert report["systems"]["model_a"]["empty_captions"] == {"count": 3, "image_ids": [105, 117, 139]}
    assert report["systems"]["model_b"]["empty_captions"] == {"count": 0, "image_ids": []}
    assert report["coverage"]["empty_references"] == 4
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "empty" in line] == [
        "capeval: model_a has 3 empty captions of 40, the references hold 4 empty references (scored as "
        "pycocoevalcap scores them; --empty-caption error, or empty_caption='error', refuses them)"]
    note = "empty captions: model\\_a 3; empty references: 4 (scored as pycocoevalcap scores them)"
    assert markdown_table(report).rstrip().endswith(note)
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["systems"]["model_a"]["empty_captions"]["count"] == 3
    assert "empty captions: model_a 3; empty references: 4" in (tmp_path / "out" / "report.html").read_text()


def test_evaluate_captions_refuses_empty_texts_under_error(files):
    with pytest.raises(InputError, match=r"model_a\.json: record 5: model_a: the caption of image 105 is an empty "
                                         r"caption .*empty_caption='score' \(--empty-caption score\)"):
        evaluate_captions([files / "model_a.json"], annotations=files / "captions.json", metrics=["bleu"],
                          empty_caption="error")
    with pytest.raises(InputError, match=r"captions\.json: annotations\[7\]\.caption is an empty reference"):
        evaluate_captions([files / "model_b.json"], annotations=files / "captions.json", metrics=["bleu"],
                          empty_caption="error")


def test_a_suite_metric_that_does_not_score_empty_texts_refuses_them_naming_itself(files):
    truth = read_ground_truth(files / "captions.json")
    system = read_results(files / "model_a.json", truth)
    with pytest.raises(InputError, match=r"model_a\.json: record 5: model_a: the caption of image 105 is an empty "
                                         r"caption: clip_s does not score empty texts; leave it out of the metrics"):
        # refused before any image is read or model loaded
        score_suite(truth, [system], resolve_plan(["bleu", "clip_s"]))


def test_capeval_evaluate_scores_empty_texts_and_refuses_them_under_error(files, theirs, tmp_path, capsys):
    argv = ["evaluate", "--annotations", str(files / "captions.json"), "--results", str(files / "model_a.json"),
            str(files / "model_b.json"), "--metrics", "bleu", "meteor", "rouge_l", "cider", "--resamples", "200"]
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["systems"]["model_a"]["scores"]["cider"]["value"] == theirs["model_a"].eval["CIDEr"]
    assert sum("empty caption" in line for line in captured.err.splitlines()) == 1
    assert main([*argv, "--empty-caption", "error"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("capeval evaluate: error: ") and "record 5" in error[0] \
        and "--empty-caption score" in error[0], error
