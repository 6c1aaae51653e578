"""`capeval evaluate --metrics coco` (issue #40 items 5 and 6): the run loads no model stack, and SPICE, when it
cannot run here, is left out with one plain line on stderr, or, when asked for by name, is the error alone."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capeval.text.coco_jars import spice_available

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "coco_small"
STACK = ("torch", "transformers", "open_clip", "torchvision")


def evaluate_args(tmp_path, *metrics):
    return ["evaluate", "--karpathy", str(EXAMPLE / "dataset_coco.json"), "--split", "test", "--results",
            *(str(EXAMPLE / f"{name}.json") for name in ("baseline", "model_a", "model_b")), "--baseline", "baseline",
            "--resamples", "1000", "--metrics", *metrics, "--output", str(tmp_path / "report")]


def run_cli(args, cwd):
    return subprocess.run([sys.executable, "-m", "capeval.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)


def spice_lib() -> Path:
    import pycocoevalcap  # a namespace package: no __file__

    return Path(list(pycocoevalcap.__path__)[0]) / "spice" / "lib"


def test_capeval_evaluate_metrics_coco_imports_no_model_stack(tmp_path):
    """The command run whole by the CLI's own entry point (argument parsing, the suite, the comparison, every report
    file), then the interpreter's modules listed."""
    probe = ("import json, sys\nfrom capeval.cli import main\nstatus = main(sys.argv[1:])\n"
             f"print(json.dumps([status, sorted(m for m in sys.modules if m.split('.')[0] in {STACK!r})]))\n")
    run = subprocess.run([sys.executable, "-c", probe, *evaluate_args(tmp_path, "coco")], capture_output=True,
                         text=True, cwd=tmp_path, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    status, stack = json.loads(run.stdout.strip().splitlines()[-1])
    assert status == 0 and stack == []
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert {"bleu_4", "meteor", "rouge_l", "cider"} <= set(report["keys"])


def test_registering_every_family_imports_no_model_code():
    """The registries are data: converters, like scorers and trainers, are "module:attr" strings imported on use."""
    probe = ("import json, sys\nfrom capeval.core.convert import converters\n"
             "specs = converters()\n"
             f"print(json.dumps([sorted(m for m in sys.modules if m.split('.')[0] in {STACK!r}), "
             "{name: spec.converter for name, spec in specs.items()}]))\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    stack, converters = json.loads(run.stdout)
    assert stack == []
    assert {"long-clip", "pac-s", "polos", "sam", "mcip", "expert-llava-hf"} <= set(converters)
    assert all(isinstance(target, str) and target.count(":") == 1 for target in converters.values())


@pytest.fixture
def no_spice():
    if spice_available():
        pytest.skip("SPICE can run here")


def test_metrics_coco_without_spice_says_so_in_one_plain_line(tmp_path, no_spice):
    run = run_cli(evaluate_args(tmp_path, "coco"), tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    notices = [line for line in run.stderr.splitlines() if "SPICE" in line]
    assert len(notices) == 1, run.stderr  # one line, once
    (notice,) = notices
    assert notice.startswith("capeval: the coco group runs without SPICE (its Stanford CoreNLP jars are missing). ")
    assert "Warning" not in notice and "coco.py" not in notice and "import_attr" not in run.stderr  # no warning format
    # the advice: what SPICE runs on, which jars, where capeval looks for them, how they get there
    for needed in ("Java 8", "stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar", f"in {spice_lib()},",
                   "python -m pycocoevalcap.spice.get_stanford_models"):
        assert needed in notice, needed
    assert notice.endswith("Name spice among the metrics to get its error instead.")
    assert (tmp_path / "report" / "report.json").is_file()


@pytest.mark.parametrize("metrics", [("spice",), ("coco", "spice")])
def test_spice_asked_for_without_its_jars_is_the_error_alone(tmp_path, no_spice, metrics):
    run = run_cli(evaluate_args(tmp_path, *metrics), tmp_path)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1, run.stderr  # the error, nothing before it
    assert run.stderr.startswith("capeval evaluate: error: SPICE cannot run here (its Stanford CoreNLP jars are "
                                 "missing). SPICE runs pycocoevalcap's spice-1.0.jar on Java 8")
    assert f"in {spice_lib()}," in run.stderr and "capeval never reports SPICE as 0." in run.stderr
    assert not (tmp_path / "report").exists()
