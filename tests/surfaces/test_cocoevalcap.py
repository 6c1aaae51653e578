"""capeval.cocoevalcap.COCOEvalCap is a drop-in for pycocoevalcap 1.2's (#28 item 2): the same constructor over
pycocotools objects, annotation/result dicts and JSON files; ``.eval``, ``.imgToEval`` and ``.evalImgs`` equal to
pycocoevalcap's run in the same test on real Flickr8k-Expert references and candidates."""

import contextlib
import io
import json
import warnings

import numpy as np
import pytest

from capeval import InputError, ModelNotAvailableError
from capeval.cocoevalcap import COCOEvalCap
from capeval.text.coco_jars import spice_available

IMAGES = 120


@pytest.fixture(scope="module")
def coco_files(request, tmp_path_factory):
    """A COCO caption annotations file (ids not in sorted order, one more image than the results cover) and a
    results list, written at test time from the Flickr8k-Expert file."""
    shared_data = request.getfixturevalue("shared_data")
    data = json.loads((shared_data / "benchmarks/flickr8k/flickr8k_expert_clipscore_format.json").read_text())
    annotations = {"images": [], "annotations": [], "type": "captions", "info": {}, "licenses": []}
    results = []
    for n, entry in enumerate(list(data.values())[:IMAGES + 1]):
        image_id = 9000 - 37 * n if n % 2 else 11 + n
        annotations["images"].append({"id": image_id, "file_name": entry["image_path"]})
        for ref in entry["ground_truth"]:
            annotations["annotations"].append({"id": len(annotations["annotations"]) + 1, "image_id": image_id,
                                               "caption": ref})
        if n < IMAGES:
            results.append({"image_id": image_id, "caption": entry["human_judgement"][3 * (n % 2)]["caption"]})
    folder = tmp_path_factory.mktemp("coco")
    (folder / "captions.json").write_text(json.dumps(annotations))
    (folder / "results.json").write_text(json.dumps(results))
    return folder / "captions.json", folder / "results.json", annotations, results


class _NoSpice:
    """Stands in for pycocoevalcap's SPICE in ITS run only: its Stanford CoreNLP jars cannot be downloaded here."""

    def compute_score(self, gts, res):
        return float("nan"), [float("nan")] * len(gts)

    def method(self):
        return "SPICE"


@pytest.fixture(scope="module")
def theirs(coco_files, pycocoevalcap_meteor):
    from pycocoevalcap import eval as pycoco_eval
    from pycocotools.coco import COCO

    annotation_file, results_file, _, _ = coco_files
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(annotation_file))
        coco_result = coco.loadRes(str(results_file))
    spice, meteor = pycoco_eval.Spice, pycoco_eval.Meteor
    if not spice_available():
        pycoco_eval.Spice = _NoSpice
    pycoco_eval.Meteor = lambda: pycocoevalcap_meteor  # the process's jar (each SCORE line is answered from itself)
    try:
        evaluation = pycoco_eval.COCOEvalCap(coco, coco_result)
        evaluation.params["image_id"] = coco_result.getImgIds()
        with contextlib.redirect_stdout(io.StringIO()):
            evaluation.evaluate()
    finally:
        pycoco_eval.Spice, pycoco_eval.Meteor = spice, meteor
    if not spice_available():
        del evaluation.eval["SPICE"]
        for scores in evaluation.imgToEval.values():
            del scores["SPICE"]
    return coco, coco_result, evaluation


def _ours(coco, result, image_ids=None, **kwargs):
    evaluation = COCOEvalCap(coco, result, **kwargs)
    if image_ids is not None:
        evaluation.params["image_id"] = image_ids
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluation.evaluate()
    return evaluation, printed.getvalue()


def test_dropin_equals_pycocoevalcap_over_pycocotools_objects(theirs):
    coco, coco_result, expected = theirs
    ours, printed = _ours(coco, coco_result, coco_result.getImgIds())
    assert ours.params["image_id"] == expected.params["image_id"]
    assert list(ours.eval) == list(expected.eval) == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L",
                                                       "CIDEr"]
    assert ours.eval == expected.eval
    assert list(ours.imgToEval) == list(expected.imgToEval)
    assert ours.imgToEval == expected.imgToEval
    assert ours.evalImgs == expected.evalImgs and len(ours.evalImgs) == IMAGES
    assert "tokenization..." in printed and "CIDEr: %0.3f" % expected.eval["CIDEr"] in printed


def test_dropin_over_dicts_and_files_equals_pycocoevalcap(theirs, coco_files):
    _, coco_result, expected = theirs
    annotation_file, results_file, annotations, results = coco_files
    image_ids = [r["image_id"] for r in results]
    from_files, printed = _ours(str(annotation_file), results_file, image_ids, quiet=True)
    assert printed == ""
    from_dicts, _ = _ours(annotations, results, image_ids, quiet=True)
    for ours in (from_files, from_dicts):
        assert ours.eval == expected.eval and ours.imgToEval == expected.imgToEval


def test_default_image_ids_are_every_annotated_image_and_a_missing_result_is_refused(coco_files):
    _, _, annotations, results = coco_files
    evaluation = COCOEvalCap(annotations, results, quiet=True)
    assert evaluation.params["image_id"] == [image["id"] for image in annotations["images"]]
    missing = annotations["images"][-1]["id"]
    with pytest.raises(InputError, match=rf"params\['image_id'\]\[{IMAGES}\] \(image {missing}\) has 0 captions "
                                         r"in the results; to score only the images of the results"):
        evaluation.evaluate()


@pytest.mark.parametrize("change, message", [
    (lambda r: r.append(dict(r[0])), r"the results: record 5: image_id \d+ again \(first at record 0\): one caption "
                                     "per image"),
    (lambda r: r[1].update(caption=None), r"the results: record 1: 'caption' is NoneType None, expected text"),
    (lambda r: r[1].update(caption="  "), r"the results: record 1: results: the caption of image \d+ is an "
                                          r"empty caption .*empty_caption='score'"),
    (lambda r: r[2].pop("caption"), r"the results: record 2 has no 'caption' field"),
])
def test_bad_results_are_refused_with_the_image_named(coco_files, change, message):
    _, _, annotations, results = coco_files
    results = [dict(r) for r in results[:5]]
    change(results)
    with pytest.raises(InputError, match=message):
        evaluation = COCOEvalCap(annotations, results, quiet=True, metrics=["bleu"], empty_caption="error")
        evaluation.params["image_id"] = [r["image_id"] for r in results[:5]]
        evaluation.evaluate()


def test_explicit_spice_without_its_jars_is_a_clear_error(coco_files):
    if spice_available():
        pytest.skip("SPICE's jars are installed here")
    _, _, annotations, results = coco_files
    evaluation = COCOEvalCap(annotations, results[:3], metrics=["bleu", "spice"], quiet=True)
    evaluation.params["image_id"] = [r["image_id"] for r in results[:3]]
    with pytest.raises(ModelNotAvailableError, match="Stanford CoreNLP"):
        evaluation.evaluate()


def test_other_capeval_metrics_by_name_come_from_the_suite_equal_to_the_metric_alone(tiny_hub, coco_files):
    from capeval.core.scoring import load_scorer

    _, _, annotations, results = coco_files
    results = results[:6]
    image_ids = [r["image_id"] for r in results]
    evaluation, _ = _ours(annotations, results, image_ids, metrics=["rouge_l", "mpnet_score"], quiet=True,
                          device="cpu")
    refs = {i: [a["caption"] for a in annotations["annotations"] if a["image_id"] == i] for i in image_ids}
    alone = load_scorer("mpnet_score", device="cpu").score([r["caption"] for r in results],
                                                           references=[refs[i] for i in image_ids])
    assert list(evaluation.eval) == ["ROUGE_L", "mpnet_score"]
    assert evaluation.eval["mpnet_score"] == alone["mpnet_score"]
    assert [evaluation.imgToEval[i]["mpnet_score"] for i in image_ids] == alone["mpnet_score_per_sample"]
    assert np.isfinite(evaluation.eval["ROUGE_L"])
