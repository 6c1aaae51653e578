"""#34 items 5 and 7 at every door of `capeval evaluate` (the CLI with --annotations, --karpathy and --records, and
`evaluate_captions` with the same inputs): an image path that leaves --images (``..``, an absolute path, a link out
of the folder) and an empty caption or a line break the PTB tokenizer would split at are refused in one line naming
the file and the record (or annotation entry), exit 2, before any model loads (an empty weights cache: a model load
would fail with another error), with nothing written."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from capeval import InputError
from capeval.cli import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coco_small"
SYSTEMS = ("baseline", "model_a", "model_b")
DOORS = ("annotations", "karpathy", "records")


class Inputs:
    """A copy of examples/coco_small under ``root`` with one door's inputs: the annotations (COCO or Karpathy) and
    each system's COCO results file, or each system's records file (JSONL, references inline)."""

    def __init__(self, root: Path, door: str):
        self.root, self.door = root, door
        shutil.copytree(EXAMPLE, root / "example")
        self.example = root / "example"
        self.coco = json.loads((EXAMPLE / "captions_val2014.json").read_text())
        self.karpathy = json.loads((EXAMPLE / "dataset_coco.json").read_text())
        self.results = {s: json.loads((EXAMPLE / f"{s}.json").read_text()) for s in SYSTEMS}
        self.files = {entry["id"]: entry["file_name"] for entry in self.coco["images"]}
        self.references = {}
        for entry in self.coco["annotations"]:
            self.references.setdefault(entry["image_id"], []).append(entry["caption"])
        self.records = {s: [{"image": self.files[r["image_id"]], "caption": r["caption"],
                             "references": self.references[r["image_id"]]} for r in rows]
                        for s, rows in self.results.items()}

    @property
    def image_root(self) -> Path:
        """--images: the folder of COCO file_name and record paths; Karpathy's holds val2014/."""
        return self.example / "images" / ("" if self.door == "karpathy" else "val2014")

    def system_file(self, system: str) -> Path:
        return self.root / (f"{system}.jsonl" if self.door == "records" else f"{system}.json")

    def annotations_file(self) -> Path:
        return self.root / ("dataset_coco.json" if self.door == "karpathy" else "captions_val2014.json")

    def write(self) -> None:
        self.annotations_file().write_text(json.dumps(self.karpathy if self.door == "karpathy" else self.coco))
        for system in SYSTEMS:
            if self.door == "records":
                self.system_file(system).write_text("".join(json.dumps(r) + "\n" for r in self.records[system]))
            else:
                self.system_file(system).write_text(json.dumps(self.results[system]))

    def set_caption(self, system: str, record: int, caption: str) -> None:
        self.results[system][record]["caption"] = caption
        self.records[system][record]["caption"] = caption

    def set_file(self, record: int, file: str) -> str:
        """The image of ``model_a``'s record ``record`` named ``file`` in this door's inputs; where the error names
        it (the annotation entry, or the record of every system's records file: model_a's is read... first)."""
        image_id = self.results["model_a"][record]["image_id"]
        if self.door == "records":
            for system in SYSTEMS:  # records identify images by path: every system names the new one
                number = next(i for i, r in enumerate(self.results[system]) if r["image_id"] == image_id)
                self.records[system][number]["image"] = file
            number = next(i for i, r in enumerate(self.results["baseline"]) if r["image_id"] == image_id)
            return f"{self.system_file('baseline')}: record {number}"
        if self.door == "karpathy":
            index = next(i for i, e in enumerate(self.karpathy["images"]) if e["cocoid"] == image_id)
            entry = self.karpathy["images"][index]
            if "/" in file:
                entry["filepath"], entry["filename"] = file.rsplit("/", 1)
            else:
                entry["filepath"], entry["filename"] = "", file
            return f"{self.annotations_file()}: images[{index}]"
        index = next(i for i, e in enumerate(self.coco["images"]) if e["id"] == image_id)
        self.coco["images"][index]["file_name"] = file
        return f"{self.annotations_file()}: images[{index}]"

    def set_reference(self, record: int, text: str) -> str:
        """The first reference of ``model_a``'s record ``record``'s image set to ``text``; where the error names it."""
        image_id = self.results["model_a"][record]["image_id"]
        if self.door == "records":
            for system in SYSTEMS:
                number = next(i for i, r in enumerate(self.results[system]) if r["image_id"] == image_id)
                self.records[system][number]["references"][0] = text
            number = next(i for i, r in enumerate(self.results["baseline"]) if r["image_id"] == image_id)
            return f"{self.system_file('baseline')}: record {number}: reference 0"
        if self.door == "karpathy":
            index = next(i for i, e in enumerate(self.karpathy["images"]) if e["cocoid"] == image_id)
            self.karpathy["images"][index]["sentences"][0]["raw"] = text
            return f"{self.annotations_file()}: images[{index}].sentences[0].raw"
        index = next(i for i, e in enumerate(self.coco["annotations"]) if e["image_id"] == image_id)
        self.coco["annotations"][index]["caption"] = text
        return f"{self.annotations_file()}: annotations[{index}].caption"

    def argv(self, metrics=("rouge_l", "clip_s")) -> list:
        self.write()
        systems = [str(self.system_file(s)) for s in SYSTEMS]
        if self.door == "records":
            truth = ["--records", *systems]
        elif self.door == "karpathy":
            truth = ["--karpathy", str(self.annotations_file()), "--split", "test", "--results", *systems]
        else:
            truth = ["--annotations", str(self.annotations_file()), "--results", *systems]
        return ["evaluate", *truth, "--images", str(self.image_root), "--metrics", *metrics,
                "--output", str(self.root / "out")]

    def kwargs(self, metrics=("rouge_l", "clip_s")) -> dict:
        self.write()
        systems = [self.system_file(s) for s in SYSTEMS]
        if self.door == "records":
            truth = {"records": systems}
        else:
            truth = {"results": systems, "annotations": self.annotations_file(),
                     "split": "test" if self.door == "karpathy" else None}
        return {**truth, "images": self.image_root, "metrics": list(metrics), "output": self.root / "out"}


def cli_run(inputs: Inputs, capsys, **argv_options):
    """The CLI's exit status and stdout/stderr."""
    capsys.readouterr()
    try:
        code = main(inputs.argv(**argv_options))
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr()


def reaches_a_model_load(inputs: Inputs, capsys, **argv_options) -> None:
    """The control of the refusals: valid inputs get as far as loading CLIP, which the empty cache refuses."""
    code, captured = cli_run(inputs, capsys, **argv_options)
    assert code == 2 and captured.err.startswith("capeval evaluate: error: could not load"), captured.err
    assert "line break" not in captured.err and "outside" not in captured.err


def refused_by_the_cli(inputs: Inputs, capsys, **argv_options) -> str:
    code, captured = cli_run(inputs, capsys, **argv_options)
    lines = captured.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("capeval evaluate: error: "), captured.err
    assert captured.out == "" and not (inputs.root / "out").exists()  # nothing written
    return lines[0]


@pytest.fixture
def no_model_loads(monkeypatch):
    import capeval.core.scoring

    def refuse(*args, **options):
        raise AssertionError("a model loaded before the inputs were checked")

    monkeypatch.setattr(capeval.core.scoring, "load_scorer", refuse)
    monkeypatch.setattr(capeval.core.scoring.ScorerSpec, "load", refuse)  # how a suite loads its plan's scorers


def refused_by_the_function(inputs: Inputs, **kwargs) -> str:
    from capeval.suite.run import evaluate_captions

    with pytest.raises(InputError) as info:
        evaluate_captions(**inputs.kwargs(**kwargs), resamples=50)
    assert "\n" not in str(info.value) and not (inputs.root / "out").exists()
    return str(info.value)


# --- captions and references: file and record named ----------------------------------------------------------

TEXT_CASES = {
    "empty caption": (2, "   ", "is an empty caption"),
    "U+2028 in a caption": (1, "a yellow\u2028circle", r"holds the line break '\\u2028'"),
    "CR in a caption": (4, "a square\ron white", r"holds the line break '\\r'"),
    "vertical tab in a caption": (5, "a shape\x0bhere", r"holds the line break '\\x0b'"),
    "NEL in a caption": (0, "a sun\x85above", r"holds the line break '\\x85'"),
}


@pytest.mark.parametrize("case", sorted(TEXT_CASES))
@pytest.mark.parametrize("door", DOORS)
def test_caption_refusals_name_the_file_and_record_at_every_door(door, case, tmp_path, capsys, empty_weights_cache,
                                                                 no_model_loads):
    record, caption, problem = TEXT_CASES[case]
    inputs = Inputs(tmp_path, door)
    inputs.set_caption("model_a", record, caption)
    image_id = inputs.results["model_a"][record]["image_id"]
    expected = (re.escape(f"{inputs.system_file('model_a')}: record {record}: model_a: the caption of image ")
                + (repr(image_id) if door != "records" else re.escape(repr(inputs.files[image_id])))
                + " " + problem)
    for message in (refused_by_the_cli(inputs, capsys), refused_by_the_function(inputs)):
        assert re.search(expected, message), (expected, message)


@pytest.mark.parametrize("door", DOORS)
def test_a_line_break_in_a_reference_names_the_annotation_entry(door, tmp_path, capsys, empty_weights_cache,
                                                                no_model_loads):
    inputs = Inputs(tmp_path, door)
    where = inputs.set_reference(3, "a black\u2029square")
    expected = re.escape(where) + r" holds the line break '\\u2029': the PTB tokenizer of the COCO metrics"
    for message in (refused_by_the_cli(inputs, capsys), refused_by_the_function(inputs)):
        assert re.search(expected, message), (expected, message)


@pytest.mark.parametrize("door", DOORS)
def test_line_breaks_are_no_error_without_a_coco_metric(door, tmp_path, capsys, empty_weights_cache):
    """Only the COCO metrics' tokenizer splits at U+2028: a CLIP-S-only run passes the checks and gets as far as
    loading CLIP (which the empty cache refuses)."""
    inputs = Inputs(tmp_path, door)
    inputs.set_caption("model_a", 1, "a yellow\u2028circle")
    reaches_a_model_load(inputs, capsys, metrics=("clip_s",))


# --- image paths stay inside --images -------------------------------------------------------------------------

def _outside_file(inputs: Inputs) -> Path:
    outside = inputs.root / "secret.jpg"
    shutil.copy(inputs.example / "images" / "val2014" / inputs.files[inputs.results["model_a"][0]["image_id"]],
                outside)
    return outside


def _relative_escape(inputs, outside):
    return os.path.relpath(outside, inputs.image_root)


def _absolute_elsewhere(inputs, outside):
    return str(outside)


def _link_out_of_the_folder(inputs, outside):
    link = inputs.example / "images" / "val2014" / "link.jpg"
    link.symlink_to(outside)
    return os.path.relpath(link, inputs.image_root)


ESCAPES = {"../ path": _relative_escape, "absolute path elsewhere": _absolute_elsewhere,
           "symlink out of the folder": _link_out_of_the_folder}


@pytest.mark.parametrize("escape", sorted(ESCAPES))
@pytest.mark.parametrize("door", DOORS)
def test_an_image_path_leaving_the_image_root_is_refused_naming_the_entry(door, escape, tmp_path, capsys,
                                                                         empty_weights_cache, no_model_loads):
    inputs = Inputs(tmp_path, door)
    outside = _outside_file(inputs)
    file = ESCAPES[escape](inputs, outside)
    where = inputs.set_file(2, file)
    expected = (re.escape(f"{where}: the image file ") + ".*" + re.escape(f" resolves to {outside.resolve()}, outside "
                f"the image root {inputs.image_root.resolve()} (--images)"))
    for message in (refused_by_the_cli(inputs, capsys), refused_by_the_function(inputs)):
        assert re.search(expected, message), (expected, message)


@pytest.mark.parametrize("door", DOORS)
def test_paths_are_checked_when_no_metric_reads_the_images(door, tmp_path, capsys, empty_weights_cache):
    """A text-only run still refuses an escaping path under --images (report.html would otherwise make a thumbnail
    of it)."""
    inputs = Inputs(tmp_path, door)
    where = inputs.set_file(2, _relative_escape(inputs, _outside_file(inputs)))
    line = refused_by_the_cli(inputs, capsys, metrics=("rouge_l",))
    assert f"{where}: the image file" in line and "outside the image root" in line


@pytest.mark.parametrize("door", DOORS)
def test_paths_that_stay_inside_pass(door, tmp_path, capsys, empty_weights_cache):
    """The control: a link to a file inside the folder and a path through a subfolder and back are accepted; the
    run gets as far as loading CLIP (which the empty cache refuses)."""
    inputs = Inputs(tmp_path, door)
    val2014 = inputs.example / "images" / "val2014"
    first = inputs.files[inputs.results["model_a"][2]["image_id"]]
    (val2014 / "sub").mkdir()
    (val2014 / "inside.jpg").symlink_to(val2014 / first)
    prefix = "val2014/" if door == "karpathy" else ""
    inputs.set_file(2, f"{prefix}sub/../inside.jpg")
    reaches_a_model_load(inputs, capsys)


def test_the_suite_engine_refuses_an_escaping_image_file_too(tmp_path, no_model_loads):
    """`score_suite` called directly (the Trainer hook, a user's own ground truth) reads image files through the same
    check: the entry is named and no model loads."""
    from capeval.core.coco_files import read_ground_truth, read_results
    from capeval.suite import resolve_plan, score_suite

    inputs = Inputs(tmp_path, "annotations")
    outside = _outside_file(inputs)
    where = inputs.set_file(2, _relative_escape(inputs, outside))
    inputs.write()
    truth = read_ground_truth(inputs.annotations_file())
    systems = [read_results(inputs.system_file(s), truth) for s in SYSTEMS]
    with pytest.raises(InputError, match=re.escape(f"{where}: the image file ")) as info:
        score_suite(truth, systems, resolve_plan(["clip_s"]), images_root=inputs.image_root)
    assert f"resolves to {outside.resolve()}" in str(info.value)
