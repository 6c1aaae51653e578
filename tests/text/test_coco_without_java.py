"""The standard COCO table without Java (issue #35 item 4/5): with no `java` on PATH, the README's `capeval evaluate
--metrics coco` example prints the same table as the jars print it (run here with Java, `--coco-backend java`), and
the drop-in's path imports no model stack."""

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

from capeval.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "coco_small"
COMMAND = ["evaluate", "--karpathy", str(EXAMPLE / "dataset_coco.json"), "--split", "test", "--results",
           *(str(EXAMPLE / f"{name}.json") for name in ("baseline", "model_a", "model_b")),
           "--images", str(EXAMPLE / "images"), "--metrics", "coco", "--baseline", "baseline", "--resamples", "1000",
           "--json"]


def without_java(tmp_path) -> dict:
    """The environment with a PATH that holds this Python's folder only (no `java`, no `javac`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": str(bin_dir), "HF_HUB_OFFLINE": "1"}
    assert shutil.which("java", path=env["PATH"]) is None
    return env


def run_cli(args, env, cwd):
    run = subprocess.run([sys.executable, "-m", "capeval.cli", *args], capture_output=True, text=True, env=env,
                         cwd=cwd, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_the_readme_coco_command_runs_without_java_and_equals_the_jars(tmp_path, monkeypatch, capsys):
    no_java = run_cli(COMMAND, without_java(tmp_path), tmp_path)
    # the jars' table: the same command with Java, in this process (its METEOR jar, kept per process, may be running)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 6 images' significance notice: not this test's subject
        assert main([*COMMAND, "--coco-backend", "java"]) == 0
    jars = json.loads(capsys.readouterr().out)
    assert no_java["keys"] == ["bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor", "rouge_l", "cider"]
    for report in (no_java, jars):
        for entry in report["images"]:
            entry.pop("file", None)
    assert no_java["systems"] == jars["systems"]  # values, CIs (the same resamples): bitwise
    assert no_java["images"] == jars["images"] and no_java["comparisons"] == jars["comparisons"]


def test_java_is_only_asked_for_when_the_jars_are(tmp_path):
    """Without Java: --coco-backend java and SPICE fail with one line naming what is missing."""
    env = without_java(tmp_path)
    run = subprocess.run([sys.executable, "-m", "capeval.cli", *COMMAND, "--coco-backend", "java"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    error = run.stderr.strip().splitlines()[-1]  # after the line saying SPICE is left out
    assert run.returncode == 2 and error.startswith("capeval evaluate: error: ") and "Traceback" not in run.stderr
    assert "`java` (Java 17) is not on PATH" in error and "coco_backend='python'" in error


DROP_IN = """
import json, sys
from capeval.cocoevalcap import COCOEvalCap

annotations, results = sys.argv[1:3]
evaluation = COCOEvalCap(annotations, results, quiet=True)
evaluation.params["image_id"] = [r["image_id"] for r in json.load(open(results))]
evaluation.evaluate()
stack = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "open_clip", "torchvision"))
print(json.dumps({"eval": evaluation.eval, "images": len(evaluation.imgToEval), "stack": stack}))
"""


def test_the_drop_in_imports_no_model_stack():
    """A real ``COCOEvalCap(...).evaluate()`` (every metric of the coco group scored, METEOR included), in a fresh
    interpreter: not one module of torch, transformers, open_clip or torchvision is loaded."""
    run = subprocess.run([sys.executable, "-c", DROP_IN, str(EXAMPLE / "captions_val2014.json"),
                          str(EXAMPLE / "model_a.json")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    done = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(done["eval"]) >= {"Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "ROUGE_L", "CIDEr"}
    assert done["images"] == len(json.loads((EXAMPLE / "model_a.json").read_text()))
    assert done["stack"] == []
