"""``capeval evaluate`` end to end on ``examples/coco_small`` (three systems on the Karpathy test split): every output
written, the table's and report's COCO values equal pycocoevalcap run here on each system alone, ``--json`` one JSON
document; every bad input one line, exit 2, before any model loads (the weights cache is empty: a model load would
fail with another error)."""

import contextlib
import functools
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from capeval.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "coco_small"
SYSTEMS = ("baseline", "model_a", "model_b")
COCO_KEYS = ("bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor", "rouge_l", "cider")


def karpathy_args(*systems, folder=EXAMPLE):
    return ["evaluate", "--karpathy", str(EXAMPLE / "dataset_coco.json"), "--split", "test",
            "--results", *[str(folder / f"{name}.json") for name in systems or SYSTEMS],
            "--images", str(EXAMPLE / "images")]


def pycocoevalcap_scores(system: str) -> dict:
    """BLEU-1..4, METEOR, ROUGE-L and CIDEr of pycocoevalcap 1.2 itself on one system's results (Karpathy test)."""
    return _pycocoevalcap_scores_of_every_system()[system]


@functools.lru_cache(maxsize=None)
def _pycocoevalcap_scores_of_every_system() -> dict:
    """:func:`pycocoevalcap_scores` of each of :data:`SYSTEMS`, each system scored alone; the Java programs start
    once: one PTB tokenizer run (each line is tokenized on its own, so the tokens are those of a run per system)
    and one METEOR process, which scores each ``compute_score`` call from that call's segments only."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.meteor.meteor import Meteor
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    images = json.loads((EXAMPLE / "dataset_coco.json").read_text())["images"]
    gts = {image["cocoid"]: [{"caption": s["raw"]} for s in image["sentences"]]
           for image in images if image["split"] == "test"}
    results = {system: json.loads((EXAMPLE / f"{system}.json").read_text()) for system in SYSTEMS}
    tokenized = PTBTokenizer().tokenize({**{("gts", image_id): captions for image_id, captions in gts.items()},
                                         **{(system, r["image_id"]): [{"caption": r["caption"]}]
                                            for system, rows in results.items() for r in rows}})
    gts = {image_id: tokenized[("gts", image_id)] for image_id in gts}
    meteor = Meteor()
    scores = {}
    try:
        for system, rows in results.items():
            res = {r["image_id"]: tokenized[(system, r["image_id"])] for r in rows}
            bleu, _ = Bleu(4).compute_score(gts, res)
            meteor_score, _ = meteor.compute_score(gts, res)
            scores[system] = {**{f"bleu_{n + 1}": value for n, value in enumerate(bleu)}, "meteor": meteor_score,
                              "rouge_l": Rouge().compute_score(gts, res)[0], "cider": Cider().compute_score(gts, res)[0]}
    finally:
        meteor.meteor_p.kill()  # its Java process (pycocoevalcap kills it only when the object is collected)
        meteor.meteor_p.wait()
    return scores


@pytest.fixture(scope="module")
def three_systems(tmp_path_factory):
    """One run: --metrics coco against a baseline (2,000 resamples; on 6 images the exact randomization test cannot
    reach alpha after Holm over 21 tests), every output written; its stdout, stderr and folder."""
    out = tmp_path_factory.mktemp("evaluate") / "report"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(karpathy_args() + ["--metrics", "coco", "--baseline", "baseline", "--resamples", "2000",
                                       "--output", str(out)])
    return code, stdout.getvalue(), stderr.getvalue(), out


def table_rows(table: str) -> dict:
    """System name -> its table cells, from the Markdown table."""
    lines = [line for line in table.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].split(" ")[0].replace("\\_", "_")] = dict(zip(header[1:], cells[1:]))
    return rows


def test_three_systems_write_every_output_and_equal_pycocoevalcap(three_systems):
    code, stdout, stderr, out = three_systems
    assert code == 0, stderr
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json", "scores.csv", "summary.csv",
                                                     "table.tex"]
    report = json.loads((out / "report.json").read_text())
    assert report["coverage"]["text"] == "scored 6 of 6 images of split test"
    assert "scored 6 of 6 images of split test" in stdout and "scored 6 of 6" in (out / "report.html").read_text()
    assert list(report["systems"]) == list(SYSTEMS) and report["baseline"] == "baseline"
    assert [key for key in report["keys"] if key in COCO_KEYS] == list(COCO_KEYS)
    rows = table_rows(stdout)
    for system in SYSTEMS:
        expected = pycocoevalcap_scores(system)
        scores = report["systems"][system]["scores"]
        for key in COCO_KEYS:
            assert scores[key]["value"] == expected[key], (system, key)  # bitwise
            lo, hi = scores[key]["ci"]
            assert lo <= expected[key] <= hi
        table_cells = list(rows[system].values())
        for key, cell in zip(COCO_KEYS, table_cells):
            assert re.sub(r"[*†‡]", "", cell).startswith(f"{100 * expected[key]:.1f} ["), (system, key, cell)
    # per-image rows: every image, every system's caption and scores
    assert [image["image_id"] for image in report["images"]] == [3675, 4019, 4486, 5230, 5871, 6402]
    assert set(report["images"][0]["captions"]) == set(SYSTEMS)


def test_marks_follow_the_paired_tests_against_the_baseline(three_systems):
    _, stdout, _, out = three_systems
    report = json.loads((out / "report.json").read_text())
    rows = table_rows(stdout)
    marked = 0
    for system in ("model_a", "model_b"):
        for key in COCO_KEYS:
            (test,) = [c for c in report["comparisons"] if c["metric"] == key
                       and {c["system_a"], c["system_b"]} == {system, "baseline"}]
            value = {name: report["systems"][name]["scores"][key]["value"] for name in (system, "baseline")}
            better = value[system] > value["baseline"]
            mark = "†" if better else "‡"
            assert (mark in rows[system][_title(stdout, key)]) == test["significant"], (system, key)
            marked += test["significant"]
    # 6 images: each exact randomization p-value is at least 2/2^6, and Holm over 21 tests puts that above alpha,
    # so nothing is marked however large the differences (the old strict count marked 13 of them)
    significance = report["significance"]
    assert significance["randomization"] == "exact" and significance["smallest_p"]["paired-ar"] == 2 / 64
    assert significance["family_size"] == 21 and significance["smallest_adjusted_p"] > significance["alpha"]
    assert marked == 0 and "no difference can be marked significant" in stdout
    assert not any(mark in cell for cell in rows["baseline"].values() for mark in "†‡")


def _title(table: str, key: str) -> str:
    header = [cell.strip() for cell in table.splitlines()[[line.startswith("|") for line in table.splitlines()]
                                                          .index(True)].strip("|").split("|")]
    return header[1 + COCO_KEYS.index(key)]


def test_json_is_one_document_with_the_report(tmp_path, capsys):
    code = main(karpathy_args("model_a", "model_b") + ["--metrics", "bleu", "rouge_l", "--resamples", "50",
                                                       "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)  # the whole of stdout is one document
    assert report["coverage"]["scored"] == 6 and list(report["systems"]) == ["model_a", "model_b"]
    assert report["keys"] == ["bleu_1", "bleu_2", "bleu_3", "bleu_4", "rouge_l"]
    assert report["significance"]["resamples"] == 50 and report["significance"]["seed"] == 12345
    expected = pycocoevalcap_scores("model_b")
    assert report["systems"]["model_b"]["scores"]["rouge_l"]["value"] == expected["rouge_l"]
    assert "scored 6 of 6 images of split test" in captured.err


def test_records_sources_with_inline_references(tiny_hub, tmp_path, capsys):
    """--records: one record source per system, references inline, image paths under --images; named by --names;
    CLIP-S as load_scorer scores the same records alone."""
    from capeval.core.scoring import load_scorer

    truth = {image["cocoid"]: image for image in json.loads((EXAMPLE / "dataset_coco.json").read_text())["images"]}
    rows = {}
    for system in ("model_a", "model_b"):
        rows[system] = [{"image": truth[r["image_id"]]["filepath"] + "/" + truth[r["image_id"]]["filename"],
                         "caption": r["caption"], "references": [s["raw"] for s in truth[r["image_id"]]["sentences"]]}
                        for r in json.loads((EXAMPLE / f"{system}.json").read_text())]
        (tmp_path / f"{system}.jsonl").write_text("\n".join(json.dumps(row) for row in rows[system]))
    code = main(["evaluate", "--records", str(tmp_path / "model_a.jsonl"), str(tmp_path / "model_b.jsonl"),
                 "--names", "A", "B", "--images", str(EXAMPLE / "images"), "--metrics", "rouge_l", "clip_s",
                 "--device", "cpu", "--resamples", "40", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = json.loads(captured.out)
    assert list(report["systems"]) == ["A", "B"]
    assert report["coverage"]["text"] == "scored 6 of 6 annotated images"
    assert report["systems"]["B"]["scores"]["rouge_l"]["value"] == pycocoevalcap_scores("model_b")["rouge_l"]
    alone = load_scorer("clip_s", device="cpu").score([row["caption"] for row in rows["model_b"]],
                                                      images=[str(EXAMPLE / "images" / row["image"])
                                                              for row in rows["model_b"]],
                                                      references=[row["references"] for row in rows["model_b"]])
    for key in ("clip_s", "refclip_s"):
        assert report["systems"]["B"]["scores"][key]["value"] == alone[key]
        assert [image["scores"]["B"][key] for image in report["images"]] == alone[f"{key}_per_sample"]


# --- refusals: one line, exit 2, before any model loads ------------------------------------------------------------

def _results(tmp_path, edit, name="model_a"):
    """A copy of the example's results of the three systems in ``tmp_path``, ``name``'s records edited by ``edit``."""
    for system in SYSTEMS:
        shutil.copy(EXAMPLE / f"{system}.json", tmp_path / f"{system}.json")
    records = json.loads((EXAMPLE / f"{name}.json").read_text())
    (tmp_path / f"{name}.json").write_text(json.dumps(edit(records)))
    return karpathy_args(folder=tmp_path)


def _swap(args, option, *values):
    """``args`` with ``option``'s values replaced by ``values`` (added when absent)."""
    if option not in args:
        return args + [option, *values]
    start = args.index(option) + 1
    end = next((i for i in range(start, len(args)) if args[i].startswith("--")), len(args))
    return args[:start] + list(values) + args[end:]


def _bad_annotations(tmp_path):
    data = json.loads((EXAMPLE / "captions_val2014.json").read_text())
    data["annotations"][3] = {"image_id": data["annotations"][3]["image_id"], "caption": ["not", "text"]}
    (tmp_path / "bad.json").write_text(json.dumps(data))
    return ["evaluate", "--annotations", str(tmp_path / "bad.json"), "--results", str(EXAMPLE / "model_a.json"),
            "--images", str(EXAMPLE / "images" / "val2014")]


CASES = {
    "duplicate image id": (lambda t: _results(t, lambda r: r + [r[0]]),
                           r"model_a\.json: record 6: image_id 3675 again \(first at record 0\)"),
    "id not in the split": (lambda t: _results(t, lambda r: r + [{"image_id": 1201, "caption": "a red circle"}]),
                            r"model_a\.json: record 6: image_id 1201 is not an annotated image of .*\(split test\)"),
    "id as text": (lambda t: _results(t, lambda r: [{**r[0], "image_id": "3675"}] + r[1:]),
                   r"record 0: image_id '3675' is not an annotated image .*the annotations' id 3675 is a number"),
    "non-string caption": (lambda t: _results(t, lambda r: r[:2] + [{**r[2], "caption": 7}] + r[3:]),
                           r"model_a\.json: record 2: 'caption' is int 7, expected text"),
    "malformed annotations": (_bad_annotations, r"bad\.json: annotations\[3\]\.caption is a list"),
    "unknown metric": (lambda t: _swap(karpathy_args(), "--metrics", "coco", "clip_z"), r"unknown metric 'clip_z'"),
    "systems on different images": (lambda t: _results(t, lambda r: r[:-1], name="model_b"),
                                    r"model_b \(.*model_b\.json\) lacks 1 image\(s\) that baseline captions \(6402\)"),
    "require-all shortfall": (lambda t: ["evaluate", "--annotations", str(EXAMPLE / "captions_val2014.json"),
                                         "--results", str(EXAMPLE / "model_a.json"), "--images",
                                         str(EXAMPLE / "images" / "val2014"), "--require-all"],
                              r"scored 6 of 12 annotated images: 6 image\(s\) have no result \(1201, .*--require-all"),
    "baseline not a system": (lambda t: karpathy_args() + ["--baseline", "model_c"],
                              r"--baseline 'model_c' is not one of the systems \['baseline', 'model_a', 'model_b'\]"),
    "names for other systems": (lambda t: karpathy_args() + ["--names", "a", "b"], r"2 names for 3 systems"),
    "two systems named alike": (lambda t: karpathy_args() + ["--names", "a", "b", "a"],
                                r"two systems are named 'a'"),
    "missing image files": (lambda t: _swap(karpathy_args(), "--images", str(t)),
                            r"6 image file\(s\) not found \(image root .*\): image 3675: .*COCO_val2014_000000003675"),
    "no image root": (lambda t: [a for a in karpathy_args() if a not in ("--images", str(EXAMPLE / "images"))],
                      r"clip_s score\(s\) images: give the image root \(--images DIR\), the folder the image "
                      r"files of .*dataset_coco\.json are relative to"),
    "karpathy without split": (lambda t: [a for a in karpathy_args() if a not in ("--split", "test")],
                               r"dataset_coco\.json is a Karpathy split file: choose a split with --split \(it holds "
                               r"train \(3 images\), .*test \(6 images\)"),
    "split of a COCO file": (lambda t: ["evaluate", "--annotations", str(EXAMPLE / "captions_val2014.json"),
                                        "--split", "test", "--results", str(EXAMPLE / "model_a.json")],
                             r"is a COCO annotations file \(one split already\)"),
    "results with records": (lambda t: ["evaluate", "--records", str(EXAMPLE / "model_a.json"), "--results",
                                        str(EXAMPLE / "model_b.json")], r"records carry their captions"),
    "empty caption": (lambda t: _results(t, lambda r: r[:1] + [{**r[1], "caption": "  "}] + r[2:]),
                      r"model_a: the caption of image 4019"),
    "no resamples": (lambda t: karpathy_args() + ["--resamples", "0"],
                     r"argument --resamples: must be a positive integer, not 0"),  # refused while parsing
    "option for no metric": (lambda t: karpathy_args() + ["--metrics", "coco", "--precision", "official"],
                             r"--precision applies to none of the metrics"),
}


def _error_line(argv, capsys) -> str:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("capeval evaluate: error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2_before_any_model_loads(case, tmp_path, capsys, empty_weights_cache):
    build, message = CASES[case]
    argv = build(tmp_path)
    if "--metrics" not in argv:
        argv = argv + ["--metrics", "coco", "clip_s"]
    line = _error_line(argv, capsys)
    assert re.search(message, line), line


def test_the_empty_cache_would_catch_a_model_load(tmp_path, capsys, empty_weights_cache):
    """The control of the refusals above: valid inputs get as far as loading CLIP, which fails there."""
    line = _error_line(karpathy_args() + ["--metrics", "coco", "clip_s"], capsys)
    assert "could not load" in line and "timm/vit_base_patch32_clip_224.openai" in line, line


def test_output_must_be_a_folder(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    line = _error_line(karpathy_args() + ["--output", str(tmp_path / "file")], capsys)
    assert "argument --output: " in line and "is a file" in line
