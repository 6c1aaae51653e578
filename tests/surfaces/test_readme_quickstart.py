"""The README Quickstart as written: the offline recipe (tiny weights in a cache of their own) runs, and the evaluate
snippet's output comment lists every key the result has (and every key of its provenance)."""

import json
import os
import re
import subprocess
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parents[2]
RECIPE_CACHE = "/tmp/capeval-tiny-hub"  # the folder the README names; the test writes into its own


def quickstart() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("## Quickstart")
    return text[start:text.index("\n## ", start + 1)]


def fenced(section: str, language: str):
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def test_quickstart_runs_offline_and_its_output_comment_has_every_key(tmp_path):
    section = quickstart()
    (recipe,) = [block for block in fenced(section, "bash") if "populate_tiny_hub_cache" in block]
    (snippet,) = [block for block in fenced(section, "python") if "evaluate.load" in block]
    code, comment = snippet.split("\n#", 1)
    assert RECIPE_CACHE in recipe and code.count("clip_s.compute(") == 1
    (tmp_path / "metrics").symlink_to(REPO / "metrics")  # "from the checkout root", without writing into it
    Image.new("RGB", (64, 48), (120, 90, 40)).save(tmp_path / "dog.jpg")
    program = code.replace("clip_s.compute(", "result = clip_s.compute(") + (
        "\nimport json\nprint(json.dumps([sorted(result), sorted(result['provenance'])]))\n")
    (tmp_path / "quickstart.py").write_text(program)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}  # only what the recipe sets
    script = recipe.replace(RECIPE_CACHE, str(tmp_path / "tiny-hub")) + "\npython quickstart.py\n"
    run = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    keys, provenance_keys = json.loads(run.stdout.strip().splitlines()[-1])
    assert "TinyWeightsWarning" in run.stderr
    assert set(re.findall(r"'(\w+)':", comment)) == set(keys) | set(provenance_keys)
