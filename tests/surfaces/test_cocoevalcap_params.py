"""``COCOEvalCap.params['image_id']`` selects the images scored as pycocoevalcap 1.2 selects them (#40 item 1):
results for other images left out, ids given twice scored once, ``imgToEval`` in the ids' order, ids with neither
references nor a result skipped; an annotated id without a result, or a result without references, refused where
pycocoevalcap fails. Each case runs pycocoevalcap itself (its PTB tokenizer and METEOR on Java) on the same files
through pycocotools, as its README does, and capeval's drop-in on the same files."""

import contextlib
import io
import json
import random

import pytest

from capeval import InputError
from capeval.cocoevalcap import COCOEvalCap

IMAGES = 30
UNKNOWN_ID = 77777  # in no file


@pytest.fixture(scope="module")
def coco_files(request, tmp_path_factory):
    """Annotations of IMAGES Flickr8k-Expert images (ids not in sorted order) plus one image listed without
    captions, and results for every annotated image and for the one without captions (pycocotools' loadRes
    accepts those)."""
    shared_data = request.getfixturevalue("shared_data")
    data = json.loads((shared_data / "benchmarks/flickr8k/flickr8k_expert_clipscore_format.json").read_text())
    annotations = {"images": [], "annotations": [], "type": "captions", "info": {}, "licenses": []}
    results = []
    for n, entry in enumerate(list(data.values())[:IMAGES]):
        image_id = 9000 - 37 * n if n % 2 else 11 + n
        annotations["images"].append({"id": image_id, "file_name": entry["image_path"]})
        for ref in entry["ground_truth"]:
            annotations["annotations"].append({"id": len(annotations["annotations"]) + 1, "image_id": image_id,
                                               "caption": ref})
        results.append({"image_id": image_id, "caption": entry["human_judgement"][n % 3]["caption"]})
    without_captions = 5
    annotations["images"].append({"id": without_captions, "file_name": "none.jpg"})
    results.append({"image_id": without_captions, "caption": "a dog runs through the grass"})
    folder = tmp_path_factory.mktemp("coco_params")
    (folder / "captions.json").write_text(json.dumps(annotations))
    (folder / "results.json").write_text(json.dumps(results))
    annotated = [image["id"] for image in annotations["images"][:IMAGES]]
    return folder / "captions.json", folder / "results.json", annotated, without_captions


class _NoSpice:
    """Stands in for pycocoevalcap's SPICE in ITS run only: its Stanford CoreNLP jars cannot be downloaded here."""

    def compute_score(self, gts, res):
        return float("nan"), [float("nan")] * len(gts)

    def method(self):
        return "SPICE"


def _theirs(annotation_file, results_file, image_ids):
    """pycocoevalcap's COCOEvalCap over pycocotools objects with ``params['image_id'] = image_ids`` (SPICE
    left out: its jars are not here); the evaluation, or the exception it raised."""
    from pycocoevalcap import eval as pycoco_eval
    from pycocotools.coco import COCO

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(annotation_file))
        result = coco.loadRes(str(results_file))
    spice, pycoco_eval.Spice = pycoco_eval.Spice, _NoSpice
    try:
        evaluation = pycoco_eval.COCOEvalCap(coco, result)
        evaluation.params["image_id"] = image_ids
        with contextlib.redirect_stdout(io.StringIO()):
            evaluation.evaluate()
    except AssertionError as exc:
        return exc
    finally:
        pycoco_eval.Spice = spice
    del evaluation.eval["SPICE"]
    for scores in evaluation.imgToEval.values():
        del scores["SPICE"]
    return evaluation


def _ours(annotations, results, image_ids):
    """capeval's drop-in on the same inputs (file paths as text, or pycocotools objects)."""
    annotations, results = (str(x) if hasattr(x, "with_name") else x for x in (annotations, results))
    evaluation = COCOEvalCap(annotations, results, quiet=True, metrics=["bleu", "meteor", "rouge_l", "cider"])
    evaluation.params["image_id"] = image_ids
    evaluation.evaluate()
    return evaluation


def test_fewer_ids_than_the_results_cover_score_those_images_as_pycocoevalcap(coco_files, capsys):
    annotation_file, results_file, annotated, without_captions = coco_files
    chosen = random.Random(3).sample(annotated, 12)  # not in file order; CIDEr's IDF is of these images only
    image_ids = chosen[:6] + [chosen[2], without_captions - 4, UNKNOWN_ID] + chosen[6:] + [chosen[0]]
    annotations = json.loads(annotation_file.read_text())
    annotations["images"].append({"id": without_captions - 4, "file_name": "none2.jpg"})  # listed, no caption
    annotation_file.with_name("captions2.json").write_text(json.dumps(annotations))
    annotation_file = annotation_file.with_name("captions2.json")

    expected = _theirs(annotation_file, results_file, image_ids)
    assert not isinstance(expected, Exception)
    from pycocotools.coco import COCO

    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO(str(annotation_file))
        result = coco.loadRes(str(results_file))
    for ours in (_ours(annotation_file, results_file, image_ids), _ours(coco, result, image_ids)):
        assert list(ours.eval) == ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"]
        assert ours.eval == expected.eval
        assert list(ours.imgToEval) == list(expected.imgToEval) == chosen  # the ids' order, each once
        assert ours.imgToEval == expected.imgToEval and ours.evalImgs == expected.evalImgs
    every = _ours(annotation_file, results_file, annotated)
    assert every.eval["CIDEr"] != ours.eval["CIDEr"]  # the selection, not the whole results, was scored
    assert capsys.readouterr().err.count(f"skipped as pycocoevalcap skips them: {UNKNOWN_ID}") == 2


@pytest.mark.parametrize("case, message", [
    ("annotated_without_result", r"params\['image_id'\]\[1\] \(image \d+\) has 0 captions in the results"),
    ("result_without_references", r"params\['image_id'\]\[1\] \(image 5\) has no reference caption in the "
                                  r"annotations \(\S*results\.json: record 30: "),
])
def test_ids_pycocoevalcap_fails_on_are_refused(coco_files, tmp_path, case, message):
    annotation_file, results_file, annotated, without_captions = coco_files
    if case == "annotated_without_result":
        results = [r for r in json.loads(results_file.read_text()) if r["image_id"] != annotated[4]]
        results_file = tmp_path / "results.json"
        results_file.write_text(json.dumps(results))
        image_ids = [annotated[0], annotated[4]]
    else:
        image_ids = [annotated[0], without_captions]
    assert isinstance(_theirs(annotation_file, results_file, image_ids), AssertionError)
    with pytest.raises(InputError, match=message):
        _ours(annotation_file, results_file, image_ids)


@pytest.mark.parametrize("image_ids, message", [
    ([], r"params\['image_id'\] is empty"),
    ([UNKNOWN_ID, "11"], r"selects no image with references and a result caption \(of its 2 ids\)"),
    ([[11]], r"params\['image_id'\]\[0\] \(image \[11\]\) is list, expected an image id"),
])
def test_a_selection_with_nothing_to_score_is_refused(coco_files, image_ids, message, capsys):
    """pycocoevalcap waits forever on these (METEOR reads a line that never comes) or fails with a TypeError."""
    annotation_file, results_file, _, _ = coco_files
    with pytest.raises(InputError, match=message):
        _ours(annotation_file, results_file, image_ids)
    if image_ids and isinstance(image_ids[-1], str):
        assert "'11' (the annotations' id 11 is a number)" in capsys.readouterr().err
