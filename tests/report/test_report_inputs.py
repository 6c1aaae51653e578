"""report.json and report.html name what produced them (#40 item 6): the annotations and each system's results file
or records source (the path as given and the sha256 of its bytes, computed here with hashlib) and the command line
(``capeval evaluate``: the argv as given, shell-quoted; ``evaluate_captions`` from Python: null). The schema requires
the field and refuses a malformed one."""

import contextlib
import hashlib
import html
import io
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from capeval import InputError
from capeval.cli import main
from capeval.report.schema import validate_report
from capeval.report.write import json_ready
from capeval.suite.run import evaluate_captions

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "coco_small"


def sha256(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def spaced_results(tmp_path_factory):
    """The example's results under a folder and file names with spaces (the command must quote them)."""
    folder = tmp_path_factory.mktemp("inputs") / "my results"
    folder.mkdir()
    paths = []
    for name in ("baseline", "model_a"):
        paths.append(folder / f"{name} v1.json")
        shutil.copy(EXAMPLE / f"{name}.json", paths[-1])
    return paths


def check_named(document, page, annotations, results, command):
    inputs = document["inputs"]
    assert inputs["annotations"] == {"path": str(annotations), "sha256": sha256(annotations)}
    assert inputs["results"] == [{"system": Path(p).stem, "path": str(p), "sha256": sha256(p)} for p in results]
    assert inputs["records"] == [] and inputs["command"] == command
    header = page[page.index("<header>"):page.index("</header>")]
    for path in (annotations, *results):
        assert html.escape(str(path)) in header and sha256(path) in header
    assert html.escape(command) in header


def test_the_cli_report_names_its_files_and_argv(spaced_results, tmp_path):
    out = tmp_path / "report"
    argv = ["evaluate", "--karpathy", str(EXAMPLE / "dataset_coco.json"), "--split", "test",
            "--results", *map(str, spaced_results), "--metrics", "bleu", "--resamples", "100", "--output", str(out)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(argv) == 0, err.getvalue()
    document = json.loads((out / "report.json").read_text(encoding="utf-8"))
    command = shlex.join(["capeval", *argv])
    assert "'" in command and shlex.split(command)[1:] == argv  # quoted where needed, read back as given
    check_named(document, (out / "report.html").read_text(encoding="utf-8"), EXAMPLE / "dataset_coco.json",
                spaced_results, command)


def test_a_process_names_sys_argv_as_given(spaced_results, tmp_path):
    out = tmp_path / "report"
    args = ["evaluate", "--annotations", str(EXAMPLE / "captions_val2014.json"), "--results", *map(str, spaced_results),
            "--metrics", "rouge_l", "--resamples", "100", "--output", str(out), "--json"]
    run = subprocess.run([sys.executable, "-m", "capeval.cli", *args], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    printed = json.loads(run.stdout)
    command = printed["inputs"]["command"]
    argv = shlex.split(command)
    assert argv[1:] == args and argv[0].endswith("__main__.py")  # sys.argv: the module's path, then the arguments
    check_named(printed, (out / "report.html").read_text(encoding="utf-8"), EXAMPLE / "captions_val2014.json",
                spaced_results, command)
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["inputs"] == printed["inputs"]


def test_python_records_sources_are_named_and_the_command_is_null(tmp_path):
    sources = []
    for name, caption in (("a", "a dog on the grass"), ("b", "a cat on a mat")):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"caption": f"{caption} {i}", "references": ["a dog runs", "a pet"]})
                                + "\n" for i in range(3)))
        sources.append(path)
    report = evaluate_captions(records=sources, metrics=["bleu"], resamples=100, show_progress=False,
                               output=tmp_path / "out")
    assert report["inputs"] == {"annotations": None, "results": [], "command": None, "records": [
        {"system": p.stem, "source": str(p), "sha256": sha256(p)} for p in sources]}
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "not recorded (evaluate_captions called from Python)" in page
    assert all(sha256(p) in page for p in sources)


def test_content_given_in_python_is_named_without_a_hash():
    annotations = json.loads((EXAMPLE / "captions_val2014.json").read_text())
    results = json.loads((EXAMPLE / "baseline.json").read_text())
    report = evaluate_captions([results], annotations=annotations, metrics=["bleu"], resamples=100,
                               show_progress=False)
    assert report["inputs"]["annotations"] == {"path": "the annotations", "sha256": None}
    assert report["inputs"]["results"] == [{"system": "results", "path": "the results", "sha256": None}]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("inputs"), r"'inputs' is a required property"),
    (lambda d: d["inputs"]["annotations"].update(sha256="abc"), r"\['inputs'\]\['annotations'\]\['sha256'\]: 'abc'"),
    (lambda d: d["inputs"]["results"][0].pop("path"), r"\['inputs'\]\['results'\]\[0\]: 'path' is a required"),
    (lambda d: d["inputs"].update(command=["capeval"]), r"\['inputs'\]\['command'\]: \['capeval'\] is not of type"),
])
def test_the_schema_refuses_a_malformed_inputs_field(change, message):
    report = evaluate_captions([EXAMPLE / "baseline.json"], annotations=EXAMPLE / "captions_val2014.json",
                               metrics=["bleu"], resamples=100, show_progress=False)
    document = json_ready(report)  # report.json's values (a copy)
    validate_report(document)
    change(document)
    with pytest.raises(InputError, match=message):
        validate_report(document)
