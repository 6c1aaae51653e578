"""Reference captions given as results, and results given as the annotations, are named as such in one line (#40
item 6), at ``capeval evaluate`` (exit 2, before any model loads) and at ``COCOEvalCap`` (an InputError), on the
files of ``examples/coco_small`` and on pycocotools objects."""

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from capeval import InputError
from capeval.cli import main
from capeval.cocoevalcap import COCOEvalCap

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coco_small"
COCO = EXAMPLE / "captions_val2014.json"
KARPATHY = EXAMPLE / "dataset_coco.json"
RESULTS = EXAMPLE / "baseline.json"
SWAP = (r"give the reference captions as the annotations \(--annotations; COCOEvalCap's first argument\) and one "
        r"system's captions as the results \(--results; COCOEvalCap's second\)$")
ANNOTATIONS_AS_RESULTS = rf"{COCO} is COCO caption annotations \(reference captions\), not results: {SWAP}"
KARPATHY_AS_RESULTS = rf"{KARPATHY} is a Karpathy split file \(reference captions\), not results: {SWAP}"
RESULTS_AS_ANNOTATIONS = (rf'{RESULTS} is a results list \[{{"image_id", "caption"}}\] \(one system\'s captions\), '
                          rf"not reference annotations: {SWAP}")


def _cli(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["evaluate", *argv, "--metrics", "bleu", "--resamples", "40"])
    return code, err.getvalue()


@pytest.mark.parametrize("argv, message", [
    (["--annotations", str(COCO), "--results", str(COCO)], ANNOTATIONS_AS_RESULTS),
    (["--karpathy", str(KARPATHY), "--split", "test", "--results", str(KARPATHY)], KARPATHY_AS_RESULTS),
    (["--annotations", str(COCO), "--results", str(RESULTS), str(KARPATHY)], KARPATHY_AS_RESULTS),
    (["--annotations", str(RESULTS), "--results", str(RESULTS)], RESULTS_AS_ANNOTATIONS),
    (["--annotations", str(RESULTS), "--results", str(COCO)], RESULTS_AS_ANNOTATIONS),
])
def test_the_command_line_names_a_swapped_file_in_one_line(argv, message):
    code, err = _cli(argv)
    assert code == 2
    assert err.count("\n") == 1, err
    assert re.fullmatch(rf"capeval evaluate: error: {message}\n", err), err
    assert "again" not in err


@pytest.mark.parametrize("coco, result, message", [
    (COCO, COCO, ANNOTATIONS_AS_RESULTS),
    (COCO, KARPATHY, KARPATHY_AS_RESULTS),
    (RESULTS, COCO, RESULTS_AS_ANNOTATIONS),
])
def test_cocoevalcap_names_a_swapped_file(coco, result, message):
    with pytest.raises(InputError, match=message):
        COCOEvalCap(str(coco), str(result), quiet=True)
    with pytest.raises(InputError, match=message.replace(str(coco if message == RESULTS_AS_ANNOTATIONS else result),
                                                         "the (annotations|results)")):
        COCOEvalCap(json.loads(coco.read_text()), json.loads(result.read_text()), quiet=True)


def test_cocoevalcap_names_swapped_pycocotools_objects():
    """``COCOEvalCap(coco, coco)`` and ``COCOEvalCap(cocoRes, coco)``: a COCO object holding several captions of an
    image is given as results; loadRes objects look like annotations, so the message says what to swap if so."""
    from pycocotools.coco import COCO as CocoObject

    with contextlib.redirect_stdout(io.StringIO()):
        coco = CocoObject(str(COCO))
        result = coco.loadRes(str(RESULTS))
    expected = (r"the pycocotools COCO object: record 1: image_id \d+ again \(first at record 0\): several captions "
                r"of one image, as reference annotations hold them; results hold one caption per image\. If this is "
                rf"the annotations' COCO object: {SWAP}")
    for first in (coco, result):
        with pytest.raises(InputError, match=expected):
            COCOEvalCap(first, coco, quiet=True)
    evaluation = COCOEvalCap(coco, result, quiet=True)  # the right order still reads
    assert evaluation.params["image_id"]
