"""README's "Evaluate my model on COCO Karpathy test" as written: the two-command recipe parses with the real
``capeval evaluate`` parser, the example command runs in a shell from the checkout root and prints exactly the
table the README shows, and the Python snippet runs (on the example's files, tiny weights)."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "coco_small"


def section() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("## Evaluate my model on COCO Karpathy test")
    return text[start:text.index("\n## ", start + 1)]


def fenced(language: str):
    return re.findall(rf"```{language}\n(.*?)```", section(), flags=re.S)


def test_the_two_commands_are_an_install_and_a_valid_evaluate_command():
    from capeval.cli import build_parser

    (recipe,) = [block for block in fenced("bash") if "pip install" in block]
    install, command = [line for line in recipe.splitlines() if line.strip()]
    assert install == "pip install ."
    argv = shlex.split(command)
    assert argv[0] == "capeval"
    args = build_parser("evaluate").parse_args(argv[1:])
    assert args.metrics == ["coco", "clip_s", "pac_s", "polos"] and args.split == "test"
    assert args.baseline in [Path(path).stem for path in args.results]


def test_the_example_runs_as_written_and_prints_the_table_shown():
    (command,) = [block for block in fenced("bash") if "examples/coco_small" in block]
    (shown,) = fenced("text")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(["bash", "-e", "-c", command], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.rstrip("\n") == shown.rstrip("\n")


def test_the_python_snippet_runs(tiny_hub, tmp_path, monkeypatch):
    (snippet,) = [block for block in fenced("python") if "evaluate_captions" in block]
    shutil.copy(EXAMPLE / "dataset_coco.json", tmp_path / "dataset_coco.json")
    shutil.copy(EXAMPLE / "baseline.json", tmp_path / "baseline.json")
    shutil.copy(EXAMPLE / "model_b.json", tmp_path / "my_model.json")
    (tmp_path / "coco").symlink_to(EXAMPLE / "images")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(snippet, "README.md", "exec"), namespace)
    cider = namespace["report"]["systems"]["my_model"]["scores"]["cider"]
    assert set(cider) == {"value", "ci"}
    written = json.loads((tmp_path / "report" / "report.json").read_text())
    assert written["coverage"]["text"] == "scored 6 of 6 images of split test"
    assert {"clip_s", "refclip_s", "cider"} <= set(written["keys"])
