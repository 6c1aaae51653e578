"""``examples/coco_small``: its COCO and Karpathy files describe the same images, its results files cover the test
split, every image it names exists, and the folder stays small."""

import json
from pathlib import Path

from PIL import Image

from capeval.core.coco_files import read_ground_truth, read_results
from capeval.core.evaluation_sets import coverage

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coco_small"
SYSTEMS = ("baseline", "model_a", "model_b")


def test_coco_and_karpathy_files_describe_the_same_images():
    coco = read_ground_truth(EXAMPLE / "captions_val2014.json")
    splits = [read_ground_truth(EXAMPLE / "dataset_coco.json", split=s) for s in ("train", "restval", "val", "test")]
    assert [len(s.images) for s in splits] == [3, 1, 2, 6]
    assert sorted(i for s in splits for i in s.images) == sorted(coco.images) and len(coco.images) == 12
    for split in splits:
        for image_id, image in split.images.items():
            assert image.references == coco.images[image_id].references and len(image.references) == 5
            assert split.image_path(image_id, EXAMPLE / "images") == coco.image_path(image_id,
                                                                                     EXAMPLE / "images" / "val2014")


def test_every_image_exists_is_a_small_distinct_jpeg():
    coco = read_ground_truth(EXAMPLE / "captions_val2014.json")
    paths = [coco.image_path(i, EXAMPLE / "images" / "val2014") for i in coco.images]
    assert sorted(paths) == sorted((EXAMPLE / "images" / "val2014").iterdir())
    pictures = set()
    for path in paths:
        assert path.stat().st_size <= 8 * 1024
        with Image.open(path) as image:
            assert image.format == "JPEG"
            pictures.add(image.convert("RGB").tobytes())
    assert len(pictures) == len(paths)
    assert sum(p.stat().st_size for p in EXAMPLE.rglob("*") if p.is_file()) < 200 * 1024


def test_results_cover_the_test_split_and_differ():
    truth = read_ground_truth(EXAMPLE / "dataset_coco.json", split="test")
    systems = [read_results(EXAMPLE / f"{name}.json", truth) for name in SYSTEMS]
    assert [s.name for s in systems] == list(SYSTEMS)
    assert coverage(truth, systems, require_all=True)["text"] == "scored 6 of 6 images of split test"
    assert all(list(s.captions) == list(truth.images) for s in systems)
    assert len({tuple(s.captions.values()) for s in systems}) == 3
    coco = read_ground_truth(EXAMPLE / "captions_val2014.json")
    coco_systems = [read_results(EXAMPLE / f"{name}.json", coco) for name in SYSTEMS]
    assert coverage(coco, coco_systems)["text"] == "scored 6 of 12 annotated images"


def test_references_are_not_the_system_captions():
    truth = read_ground_truth(EXAMPLE / "dataset_coco.json", split="test")
    references = {r.lower().rstrip(".") for image in truth.images.values() for r in image.references}
    for name in SYSTEMS:
        captions = json.loads((EXAMPLE / f"{name}.json").read_text())
        assert not references & {c["caption"] for c in captions}


def test_pycocotools_reads_the_same_references_and_captions():
    """The example is a valid COCO file for pycocoevalcap (pycocotools' ``COCO`` / ``loadRes``), and it reads the same
    references and captions as capeval."""
    from pycocotools.coco import COCO

    coco = COCO(str(EXAMPLE / "captions_val2014.json"))
    truth = read_ground_truth(EXAMPLE / "captions_val2014.json")
    assert sorted(coco.getImgIds()) == sorted(truth.images)
    for image_id, image in truth.images.items():
        assert tuple(a["caption"] for a in coco.imgToAnns[image_id]) == image.references
        assert coco.imgs[image_id]["file_name"] == image.file
    for name in SYSTEMS:
        results = coco.loadRes(str(EXAMPLE / f"{name}.json"))
        system = read_results(EXAMPLE / f"{name}.json", truth)
        assert {i: results.imgToAnns[i][0]["caption"] for i in results.getImgIds()} == system.captions
