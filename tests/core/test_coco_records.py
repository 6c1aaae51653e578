"""Evaluation-set readers (``capeval.core.coco_files``, ``inline_evaluation``, ``evaluation_sets``): COCO caption
annotations and Karpathy split files, COCO results files, inline record sources, and coverage (#28 items 1 and 6)."""

import json
import re

import pytest

from capeval import InputError
from capeval.core.coco_files import read_ground_truth, read_results
from capeval.core.evaluation_sets import coverage
from capeval.core.inline_evaluation import common_ground_truth, read_inline

COCO = {
    "images": [{"id": 30, "file_name": "COCO_val2014_000000000030.jpg"},
               {"id": 10, "file_name": "COCO_val2014_000000000010.jpg"},
               {"id": 20, "file_name": "COCO_val2014_000000000020.jpg"}],
    "annotations": [{"image_id": 10, "id": 1, "caption": "a dog on a sofa"},
                    {"image_id": 30, "id": 2, "caption": "two cats asleep"},
                    {"image_id": 10, "id": 3, "caption": "a brown dog lying on a couch"}],
}


def _sentences(*raws):
    return [{"raw": raw, "tokens": raw.split()} for raw in raws]


KARPATHY = {"dataset": "coco", "images": [
    {"filepath": "val2014", "filename": "COCO_val2014_000000000010.jpg", "cocoid": 10, "imgid": 0, "split": "test",
     "sentences": _sentences("a dog on a sofa", "a brown dog")},
    {"filepath": "train2014", "filename": "COCO_train2014_000000000040.jpg", "cocoid": 40, "imgid": 1,
     "split": "train", "sentences": _sentences("a red bus")},
    {"filepath": "val2014", "filename": "COCO_val2014_000000000030.jpg", "cocoid": 30, "imgid": 2, "split": "test",
     "sentences": _sentences("two cats asleep")},
    {"filepath": "val2014", "filename": "COCO_val2014_000000000050.jpg", "cocoid": 50, "imgid": 3,
     "split": "restval", "sentences": _sentences("a kite in the sky")},
]}

FLICKR = {"dataset": "flickr30k", "images": [
    {"filename": "1000092795.jpg", "imgid": 0, "split": "test", "sentences": _sentences("two men in a garden")},
    {"filename": "snow_dog.jpg", "imgid": 1, "split": "test", "sentences": _sentences("a dog in the snow")},
]}


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _refusal(call, *patterns):
    """``call`` raises a one-line InputError matching every pattern; return its message."""
    with pytest.raises(InputError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    for pattern in patterns:
        assert re.search(pattern, message), (pattern, message)
    return message


# --- ground truth -----------------------------------------------------------------------------------------------

def test_coco_annotations_keep_file_order_and_annotation_order_and_leave_out_unannotated_images(tmp_path):
    truth = read_ground_truth(_write(tmp_path, "captions.json", COCO))
    assert list(truth.images) == [30, 10]  # images[] order; 20 has no caption
    assert truth.images[10].references == ("a dog on a sofa", "a brown dog lying on a couch")
    assert truth.images[30].file == "COCO_val2014_000000000030.jpg"
    assert truth.split is None and truth.unannotated == (20,)
    assert truth.image_path(30, tmp_path / "val2014") == tmp_path / "val2014" / "COCO_val2014_000000000030.jpg"


def test_karpathy_split_selects_images_and_ids_are_cocoids(tmp_path):
    path = _write(tmp_path, "dataset_coco.json", KARPATHY)
    test = read_ground_truth(path, split="test")
    assert test.split == "test" and list(test.images) == [10, 30]
    assert test.images[10].references == ("a dog on a sofa", "a brown dog")
    assert test.images[10].file == "val2014/COCO_val2014_000000000010.jpg"
    assert list(read_ground_truth(path, split="restval").images) == [50]
    assert list(read_ground_truth(path, split="train").images) == [40]


def test_karpathy_file_without_split_is_refused_listing_the_splits(tmp_path):
    path = _write(tmp_path, "dataset_coco.json", KARPATHY)
    _refusal(lambda: read_ground_truth(path), "dataset_coco.json", "--split",
             r"test \(2 images\), train \(1 image\), restval \(1 image\)")
    _refusal(lambda: read_ground_truth(path, split="val"), "no split 'val'", r"test \(2 images\)")


def test_flickr_ids_are_filename_stems_int_when_numeric(tmp_path):
    truth = read_ground_truth(_write(tmp_path, "dataset_flickr30k.json", FLICKR), split="test")
    assert list(truth.images) == [1000092795, "snow_dog"]
    assert truth.images[1000092795].file == "1000092795.jpg"  # no filepath in Flickr30k


def test_split_on_a_coco_annotations_file_is_refused(tmp_path):
    path = _write(tmp_path, "captions.json", COCO)
    _refusal(lambda: read_ground_truth(path, split="test"), "COCO annotations file", "Karpathy")


@pytest.mark.parametrize("edit, patterns", [
    (lambda d: d["images"].append({"id": 10, "file_name": "x.jpg"}), [r"images\[3\]", "image id 10 again"]),
    (lambda d: d["annotations"][1].update(caption=["two", "cats"]), [r"annotations\[1\]\.caption", "list",
                                                                      "expected a string"]),
    (lambda d: d["annotations"][0].update(image_id=99), [r"annotations\[0\]\.image_id 99 is not an id of images"]),
    (lambda d: d["annotations"][0].update(image_id=10.0), [r"annotations\[0\]\.image_id is float",
                                                            "integer or text id"]),
    (lambda d: d["annotations"][1].pop("caption"), [r"annotations\[1\] has no 'caption' field", "instances"]),
    (lambda d: d["images"][0].pop("id"), [r"images\[0\] has no 'id' field"]),
    (lambda d: d.update(annotations={}), ["'annotations' is dict, expected a list"]),
])
def test_malformed_coco_annotations_are_refused_naming_the_entry(tmp_path, edit, patterns):
    data = json.loads(json.dumps(COCO))
    edit(data)
    path = _write(tmp_path, "captions.json", data)
    _refusal(lambda: read_ground_truth(path), "captions.json", *patterns)


def test_malformed_karpathy_entries_are_refused_naming_the_entry(tmp_path):
    data = json.loads(json.dumps(KARPATHY))
    data["images"][2]["sentences"][0]["raw"] = 7
    path = _write(tmp_path, "dataset_coco.json", data)
    _refusal(lambda: read_ground_truth(path, split="test"), r"images\[2\]\.sentences\[0\]\.raw is an int", "expected a string")
    data["images"][2]["cocoid"] = 10
    path = _write(tmp_path, "dataset_coco.json", data)
    _refusal(lambda: read_ground_truth(path, split="test"), r"images\[2\]: image id 10 again")


def test_files_that_are_neither_format_or_not_json_are_refused(tmp_path):
    _refusal(lambda: read_ground_truth(_write(tmp_path, "a.json", "{not json")), "a.json: not JSON")
    _refusal(lambda: read_ground_truth(_write(tmp_path, "b.json", [1, 2])), "b.json is neither COCO")
    _refusal(lambda: read_ground_truth(_write(tmp_path, "c.json", {"images": [{"id": 1}]})), "c.json is neither")
    _refusal(lambda: read_ground_truth(tmp_path / "missing.json"), "file not found", "missing.json")


# --- results ----------------------------------------------------------------------------------------------------

@pytest.fixture
def truth(tmp_path):
    return read_ground_truth(_write(tmp_path, "captions.json", COCO))


def test_results_are_read_in_file_order_named_by_stem(tmp_path, truth):
    path = _write(tmp_path, "model_a.json", [{"image_id": 10, "caption": "a dog", "score": 0.3},
                                             {"image_id": 30, "caption": ""}])
    system = read_results(path, truth)
    assert system.name == "model_a" and system.source == str(path)
    assert system.captions == {10: "a dog", 30: ""} and list(system.captions) == [10, 30]
    assert read_results(path, truth, name="A").name == "A"


@pytest.mark.parametrize("results, patterns", [
    ([{"image_id": 10, "caption": "a"}, {"image_id": 30, "caption": "b"}, {"image_id": 10, "caption": "c"}],
     [r"record 2: image_id 10 again \(first at record 0\)"]),
    ([{"image_id": 10, "caption": "a"}, {"image_id": 77, "caption": "b"}, {"image_id": 78, "caption": "c"}],
     [r"record 1: image_id 77 is not an annotated image of .*captions\.json", "2 result", "77, 78"]),
    ([{"image_id": "10", "caption": "a"}],
     [r"record 0: image_id '10' is not an annotated image", "the annotations' id 10 is a number"]),
    ([{"image_id": 20, "caption": "a"}], [r"record 0: image_id 20 is not", "without any reference caption"]),
    ([{"image_id": 10, "caption": "a"}, {"image_id": 30, "caption": ["b"]}],
     [r"record 1: 'caption' is list", "expected text"]),
    ([{"image_id": 10, "caption": None}], [r"record 0: 'caption' is NoneType"]),
    ([{"image_id": 10}], [r"record 0 has no 'caption' field"]),
    ([{"caption": "a"}], [r"record 0 has no 'image_id' field"]),
    ([{"image_id": 10.0, "caption": "a"}], [r"record 0: 'image_id' is float"]),
    ([{"image_id": 10, "caption": "a"}, "b"], [r"record 1 is str, expected an object"]),
    ({"image_id": 10, "caption": "a"}, ["the top level is dict, expected a list"]),
    ([], ["no results"]),
    ("[{\"image_id\": 10,", ["not JSON"]),
])
def test_bad_results_are_refused_naming_file_record_and_problem(tmp_path, truth, results, patterns):
    path = _write(tmp_path, "bad.json", results)
    _refusal(lambda: read_results(path, truth), r"bad\.json", *patterns)


def test_many_unknown_ids_name_the_first_five(tmp_path, truth):
    path = _write(tmp_path, "r.json", [{"image_id": i, "caption": "x"} for i in range(100, 108)])
    message = _refusal(lambda: read_results(path, truth), "8 result", "100, 101, 102, 103, 104, …")
    assert "105" not in message


def test_text_ids_match_text_ids_and_a_number_is_refused_with_a_hint(tmp_path):
    truth = read_ground_truth(_write(tmp_path, "dataset_flickr30k.json", FLICKR), split="test")
    good = _write(tmp_path, "r.json", [{"image_id": 1000092795, "caption": "x"}, {"image_id": "snow_dog",
                                                                                  "caption": "y"}])
    assert read_results(good, truth).captions == {1000092795: "x", "snow_dog": "y"}
    bad = _write(tmp_path, "s.json", [{"image_id": "1000092795", "caption": "x"}])
    _refusal(lambda: read_results(bad, truth), "'1000092795'", "the annotations' id 1000092795 is a number")


# --- coverage ---------------------------------------------------------------------------------------------------

def _results(tmp_path, name, ids):
    return _write(tmp_path, f"{name}.json", [{"image_id": i, "caption": f"{name} {i}"} for i in ids])


def test_coverage_states_scored_of_total(tmp_path, truth):
    systems = [read_results(_results(tmp_path, n, [10]), truth) for n in ("a", "b")]
    assert coverage(truth, systems) == {"scored": 1, "total": 2, "split": None,
                                        "text": "scored 1 of 2 annotated images"}
    karpathy = read_ground_truth(_write(tmp_path, "dataset_coco.json", KARPATHY), split="test")
    system = read_results(_results(tmp_path, "c", [30, 10]), karpathy)
    assert coverage(karpathy, [system], require_all=True) == {"scored": 2, "total": 2, "split": "test",
                                                              "text": "scored 2 of 2 images of split test"}


def test_require_all_refuses_a_subset_naming_how_many_are_missing(tmp_path, truth):
    system = read_results(_results(tmp_path, "a", [10]), truth)
    _refusal(lambda: coverage(truth, [system], require_all=True), "scored 1 of 2 annotated images",
             r"1 image\(s\) have no result \(30\)", "--require-all")


def test_systems_over_different_images_are_refused_naming_system_and_ids(tmp_path, truth):
    a = read_results(_results(tmp_path, "a", [10, 30]), truth)
    b = read_results(_results(tmp_path, "b", [10]), truth)
    _refusal(lambda: coverage(truth, [a, b]), r"^b \(.*b\.json\) lacks 1 image\(s\) that a captions \(30\)",
             "same images")
    _refusal(lambda: coverage(truth, [b, a]), r"^a \(.*a\.json\) captions 1 image\(s\) that b does not \(30\)")
    _refusal(lambda: coverage(truth, [a, read_results(_results(tmp_path, "a2", [10, 30]), truth, name="a")]),
             "two systems are named 'a'")


# --- inline records ---------------------------------------------------------------------------------------------

INLINE = [{"image": "img/1.jpg", "references": ["a dog", "a brown dog"]},
          {"image": "img/2.jpg", "references": ["two cats"]},
          {"image": "img/3.jpg", "references": ["a bus"]}]


def _jsonl(tmp_path, name, records):
    return _write(tmp_path, name, "".join(json.dumps(r) + "\n" for r in records))


def test_inline_systems_over_the_same_images_pair_up(tmp_path):
    a = _jsonl(tmp_path, "sys_a.jsonl", [{**r, "caption": f"A{i}"} for i, r in enumerate(INLINE)])
    b_records = [{**r, "prediction": f"B{i}"} for i, r in enumerate(INLINE)][::-1]  # another order, another field
    b = tmp_path / "sys_b.csv"
    b.write_text("image,prediction,references\n" + "".join(
        f'{r["image"]},{r["prediction"]},"{json.dumps(r["references"]).replace(chr(34), chr(34) * 2)}"\n'
        for r in b_records))
    truth_a, system_a = read_inline(a, images=tmp_path)
    truth_b, system_b = read_inline(b, fields={"caption": "prediction"})
    assert system_a.name == "sys_a" and system_b.name == "sys_b"
    assert system_a.captions == {"img/1.jpg": "A0", "img/2.jpg": "A1", "img/3.jpg": "A2"}
    assert list(system_b.captions) == ["img/3.jpg", "img/2.jpg", "img/1.jpg"]
    assert truth_a.images["img/1.jpg"].references == ("a dog", "a brown dog")
    truth = common_ground_truth([truth_a, truth_b])
    assert list(truth.images) == ["img/1.jpg", "img/2.jpg", "img/3.jpg"]
    assert truth.image_path("img/2.jpg", tmp_path) == tmp_path / "img" / "2.jpg"
    assert coverage(truth, [system_a, system_b])["text"] == "scored 3 of 3 annotated images"


def test_inline_image_ids_are_paths_relative_to_the_image_root(tmp_path):
    absolute = _jsonl(tmp_path, "abs.jsonl", [{**r, "image": str(tmp_path / r["image"]), "caption": "x"}
                                              for r in INLINE])
    dotted = _jsonl(tmp_path, "dot.jsonl", [{**r, "image": "./" + r["image"], "caption": "y"} for r in INLINE])
    (truth_a, a), (truth_b, b) = read_inline(absolute, images=tmp_path), read_inline(dotted, images=tmp_path)
    assert list(a.captions) == list(b.captions) == ["img/1.jpg", "img/2.jpg", "img/3.jpg"]
    truth = common_ground_truth([truth_a, truth_b])
    assert truth.image_path("img/1.jpg", tmp_path) == tmp_path / "img" / "1.jpg"
    assert coverage(truth, [a, b])["scored"] == 3
    deeper_root = read_inline(absolute, images=tmp_path / "img")[1]
    assert list(deeper_root.captions) == ["1.jpg", "2.jpg", "3.jpg"]
    assert list(read_inline(absolute)[1].captions) == [str(tmp_path / r["image"]) for r in INLINE]


def test_empty_references_are_read_as_given(tmp_path):
    """pycocoevalcap scores an empty or whitespace-only reference, so the readers keep it; the suite counts it and
    scores or refuses it (tests/suite/test_empty_texts.py)."""
    data = json.loads(json.dumps(COCO))
    data["annotations"][2].update(caption="  ")
    truth = read_ground_truth(_write(tmp_path, "captions.json", data))
    assert "  " in truth.images[data["annotations"][2]["image_id"]].references


def test_inline_sources_with_other_references_for_an_image_are_refused(tmp_path):
    a = _jsonl(tmp_path, "a.jsonl", [{**r, "caption": "x"} for r in INLINE])
    other = [dict(r) for r in INLINE]
    other[1] = {**other[1], "references": ["two dogs"]}
    b = _jsonl(tmp_path, "b.jsonl", [{**r, "caption": "y"} for r in other])
    _refusal(lambda: common_ground_truth([read_inline(a)[0], read_inline(b)[0]]),
             r"b\.jsonl: image 'img/2\.jpg' has other references", r"a\.jsonl")


def test_inline_refusals_name_the_record(tmp_path):
    twice = _jsonl(tmp_path, "twice.jsonl", [{**INLINE[0], "caption": "x"}, {**INLINE[1], "caption": "y"},
                                             {**INLINE[0], "caption": "z"}])
    _refusal(lambda: read_inline(twice), r"twice\.jsonl: record 2: image 'img/1\.jpg' again \(first at record 0\)")
    number = _jsonl(tmp_path, "number.jsonl", [{**INLINE[0], "caption": 5}])
    _refusal(lambda: read_inline(number), r"record 0: the caption is int")
    no_refs = _jsonl(tmp_path, "norefs.jsonl", [{"image": "i.jpg", "caption": "x"}])
    _refusal(lambda: read_inline(no_refs), "record 0: no 'references' field")
    empty_ref = _jsonl(tmp_path, "emptyref.jsonl", [{"image": "i.jpg", "caption": "x", "references": ["a", ""]}])
    assert read_inline(empty_ref)[0].images["i.jpg"].references == ("a", "")  # kept: tests/suite/test_empty_texts.py
    empty_image = tmp_path / "emptyimage.csv"
    empty_image.write_text("image,caption,references\nimg/1.jpg,x,a dog\n,y,a cat\n")
    _refusal(lambda: read_inline(empty_image), r"emptyimage\.csv: record 1: the image path is empty")


def test_inline_records_without_images_are_identified_by_record_number(tmp_path):
    path = _jsonl(tmp_path, "text.jsonl", [{"caption": "x", "references": "a cat"},
                                           {"caption": "y", "references": ["a dog", "dogs"]}])
    truth, system = read_inline(path)
    assert system.captions == {0: "x", 1: "y"}
    assert truth.images[0].references == ("a cat",) and truth.images[0].file is None
    assert truth.image_path(0, tmp_path) is None


def test_inline_embedded_images_are_kept_and_identified(tmp_path):
    import datasets

    records = {"caption": ["x", "y"], "references": [["a"], ["b"]],
               "image": [{"bytes": b"\x89PNG one", "path": None}, {"bytes": b"\x89PNG two", "path": "two.png"}]}
    dataset = datasets.Dataset.from_dict(records, features=datasets.Features(
        caption=datasets.Value("string"), references=datasets.Sequence(datasets.Value("string")),
        image=datasets.Image(decode=False)))
    truth, system = read_inline(dataset, name="ds")
    first, second = list(truth.images)
    assert re.fullmatch(r"sha256:[0-9a-f]{16}", first) and second == "two.png"
    assert truth.images[first].data["bytes"] == b"\x89PNG one" and truth.images[first].file is None
    assert system.name == "ds" and system.captions == {first: "x", second: "y"}


# --- where each text and image came from; image files inside the root (#34 items 5 and 7) -----------------------

def test_readers_record_where_each_image_reference_and_caption_was_read(tmp_path):
    coco = read_ground_truth(_write(tmp_path, "captions.json", COCO))
    source = str(tmp_path / "captions.json")
    assert coco.images[10].where == f"{source}: images[1]"
    assert coco.images[10].reference_where == (f"{source}: annotations[0].caption", f"{source}: annotations[2].caption")
    assert coco.images[30].reference_entry(0, coco.source) == f"{source}: annotations[1].caption"
    karpathy = read_ground_truth(_write(tmp_path, "dataset_coco.json", KARPATHY), split="test")
    source = str(tmp_path / "dataset_coco.json")
    assert karpathy.images[30].where == f"{source}: images[2]"
    assert karpathy.images[10].reference_where == (f"{source}: images[0].sentences[0].raw",
                                                   f"{source}: images[0].sentences[1].raw")
    path = _write(tmp_path, "res.json", [{"image_id": 30, "caption": "x"}, {"image_id": 10, "caption": " "}])
    system = read_results(path, coco)
    assert system.records == {30: 0, 10: 1}
    assert system.caption_where(10) == f"{path}: record 1: res: the caption of image 10"
    inline = _jsonl(tmp_path, "sys.jsonl", [{**r, "caption": f"c{i}"} for i, r in enumerate(INLINE)])
    truth, system = read_inline(inline)
    assert system.caption_where("img/3.jpg") == f"{inline}: record 2: sys: the caption of image 'img/3.jpg'"
    assert truth.images["img/2.jpg"].where == f"{inline}: record 1"
    assert truth.images["img/1.jpg"].reference_where[1] == f"{inline}: record 0: reference 1"


def test_hand_made_captions_and_images_are_named_without_a_record(tmp_path):
    from capeval.core.evaluation_sets import EvalImage, SystemCaptions

    assert SystemCaptions("b", {2: " "}, "b.json").caption_where(2) == "b: the caption of image 2"
    image = EvalImage(7, "7.jpg", ("a cat",))
    assert image.entry("gt.json") == "gt.json: image 7" and image.reference_entry(0, "gt.json") == (
        "gt.json: image 7: reference 0")


def test_image_files_must_resolve_inside_the_root(tmp_path):
    from capeval.core.evaluation_sets import resolve_under

    root = tmp_path / "images"
    (root / "sub").mkdir(parents=True)
    (root / "a.jpg").write_bytes(b"x")
    (tmp_path / "secret.jpg").write_bytes(b"s")
    (root / "in.jpg").symlink_to(root / "a.jpg")
    (root / "out.jpg").symlink_to(tmp_path / "secret.jpg")
    (tmp_path / "linked_root").symlink_to(root)
    secret = (tmp_path / "secret.jpg").resolve()
    inside = {"a.jpg": root / "a.jpg", "sub/../a.jpg": root / "a.jpg", "./in.jpg": root / "a.jpg",
              str(root / "a.jpg"): root / "a.jpg", "missing.jpg": root / "missing.jpg"}
    for file, expected in inside.items():
        assert resolve_under(root, file) == (expected.resolve(), True), file
    assert resolve_under(tmp_path / "linked_root", "in.jpg") == ((root / "a.jpg").resolve(), True)
    for file in ("../secret.jpg", "sub/../../secret.jpg", str(tmp_path / "secret.jpg"), "out.jpg"):
        assert resolve_under(root, file) == (secret, False), file
    data = json.loads(json.dumps(COCO))
    data["images"][1]["file_name"] = "../secret.jpg"
    truth = read_ground_truth(_write(tmp_path, "captions.json", data))
    truth.check_inside([30], root)  # the other image is inside
    _refusal(lambda: truth.check_inside([30, 10], root),
             re.escape(f"captions.json: images[1]: the image file '../secret.jpg' resolves to {secret}, outside the "
                       f"image root {root.resolve()} (--images)"))
