"""Every evaluate module loads and scores offline: from the checkout, via `capeval install-modules`
(`evaluate.load("capeval/<name>")`), and from a wheel installed in a clean environment."""

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from PIL import Image

from capeval.modules import available_modules

REPO = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
MODULES = sorted(available_modules())

LOAD_EVERY_MODULE = """
import json, sys, evaluate
from capeval.modules import module_dir
loaded = {}
for name in json.loads(sys.argv[1]):
    options = {"device": "cpu"} if module_dir(name).parent.name == "metrics" else {}
    module = evaluate.load(sys.argv[2].format(name=name), **options)
    loaded[name] = type(module).__name__
print(json.dumps(loaded))
"""


def test_clip_modules_from_checkout_score_offline(tiny_hub):
    import evaluate

    image = Image.new("RGB", (30, 20), "green")
    for name, key in (("clip_s", "clip_s"), ("pac_s", "pac_s")):
        module = evaluate.load(str(REPO / "metrics" / name), device="cpu")
        free = module.compute(predictions=["green"], images=[image])
        with_refs = module.compute(predictions=["green", "a field"], images=[image, image],
                                   references=[["a green image"], "grass"])
        assert set(free) == {key, f"{key}_per_sample", "truncated_texts", "provenance", "hashcode"}
        assert free["hashcode"] == module.scorer.hashcode and free["provenance"] == module.scorer.provenance
        assert with_refs[f"{key}_per_sample"][0] == pytest.approx(free[f"{key}_per_sample"][0], abs=1e-6)
        assert len(with_refs[f"ref{key}_per_sample"]) == 2
        # a bare reference string beside lists is one reference, not a list of characters
        direct = module.scorer.score(["green", "a field"], images=[image, image], references=[["a green image"], ["grass"]])
        assert with_refs[f"ref{key}_per_sample"] == pytest.approx(direct[f"ref{key}_per_sample"], abs=1e-6)


def test_module_validates_before_arrow(tiny_hub):
    import evaluate

    from capeval import InputError

    module = evaluate.load(str(REPO / "metrics" / "clip_s"), device="cpu")
    with pytest.raises(InputError, match="mismatched lengths"):
        module.compute(predictions=["a", "b"], images=[Image.new("RGB", (4, 4))])
    with pytest.raises(InputError, match="empty caption"):
        module.compute(predictions=[""], images=[Image.new("RGB", (4, 4))])


def _run(code_args, env, cwd):
    out = subprocess.run(code_args, capture_output=True, text=True, env=env, cwd=cwd, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_install_modules_serves_evaluate_load_by_hub_name_offline(tiny_hub, tmp_path):
    """``capeval install-modules`` into the default cache ($HF_MODULES_CACHE, read by evaluate when imported: hence
    a fresh interpreter), then every module loaded by hub name in that interpreter."""
    env = {**os.environ, **OFFLINE, "HF_HUB_CACHE": str(tiny_hub), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    install_then_load = "from capeval.cli import main\nassert main(['install-modules']) == 0\n" + LOAD_EVERY_MODULE
    loaded = _run([sys.executable, "-c", install_then_load, json.dumps(MODULES), "capeval/{name}"], env, tmp_path)
    assert sorted(loaded) == MODULES
    assert sorted(p.name for p in (tmp_path / "modules" / "evaluate_modules" / "metrics").iterdir()
                  if p.name.startswith("capeval--")) == [f"capeval--{name}" for name in MODULES]


def test_wheel_in_clean_environment_serves_every_module(tiny_hub, tmp_path, source_tree_lock):
    with source_tree_lock:  # built in the checkout
        subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"),
                        str(REPO)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("capeval-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # dependencies come from the test environment, but not its editable capeval (.pth files there are not processed)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **OFFLINE, "HF_HUB_CACHE": str(tiny_hub),
           "HF_MODULES_CACHE": str(tmp_path / "modules")}
    # one interpreter of the clean venv: where capeval comes from, the dataset cards it ships, every module loaded
    where_and_cards = ("import capeval, json\nfrom capeval.benchmarks.catalog import cards_dir\n"
                       "print(json.dumps([capeval.__file__, "
                       "sorted(p.parent.name for p in cards_dir().glob('*/README.md'))]))\n")
    load_installed = where_and_cards + LOAD_EVERY_MODULE.replace(
        "sys.argv[2].format(name=name)", "str(__import__('capeval.modules').modules.module_dir(name))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", load_installed, json.dumps(MODULES), ""],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    (where, cards), loaded = [json.loads(line) for line in out.stdout.strip().splitlines()[-2:]]
    assert where.startswith(str(site)), where
    assert sorted(loaded) == MODULES
    assert set(MODULES) >= {"clip_s", "pac_s"}
    assert cards == sorted(p.parent.name for p in (REPO / "datasets").glob("*/README.md"))  # dataset cards ship too


def test_every_capeval_subpackage_is_listed_in_setup_cfg():
    import configparser

    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    listed = set(config["options"]["packages"].split())
    root = REPO / "shared"
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "capeval").rglob("__init__.py")}
    assert found <= listed, f"add to setup.cfg packages: {sorted(found - listed)}"


def test_hice_module_from_checkout_scores_offline(tiny_hub):
    import evaluate

    image = Image.new("RGB", (40, 30), "green")
    module = evaluate.load(str(REPO / "metrics" / "hice_s"), device="cpu",
                           scorer_options={"phrase_parser": "spacy",
                                           "region_settings": {"points_per_side": 4, "pred_iou_thresh": 0.0,
                                                               "stability_score_thresh": 0.0}})
    free = module.compute(predictions=["a green field"], images=[image])
    both = module.compute(predictions=["a green field"], images=[image], references=[["grass"]],
                          return_report=True)
    assert free["hice_s_per_sample"][0] == pytest.approx(both["hice_s_per_sample"][0], abs=1e-6)
    assert len(both["refhice_s_per_sample"]) == 1 and both["reports"][0]["caption"] == "a green field"


def test_module_options_are_the_scorers_and_typos_are_refused(tiny_hub):
    import evaluate

    from capeval import InputError
    from capeval.core.scoring import load_scorer

    official = evaluate.load(str(REPO / "metrics" / "clip_s"), device="cpu", precision="official")
    assert official.scorer.provenance == load_scorer("clip_s", device="cpu", precision="official").provenance
    assert official.scorer.provenance["options"]["precision"] == "official"
    assert official.scorer.hashcode != evaluate.load(str(REPO / "metrics" / "clip_s"), device="cpu").scorer.hashcode
    for typo, meant in (("weight", "weights"), ("batchsize", "batch_size"), ("precison", "precision")):
        with pytest.raises(InputError, match=rf"clip_s: unknown option\(s\) \['{typo}'\]; it accepts .*'{meant}'"):
            evaluate.load(str(REPO / "metrics" / "clip_s"), device="cpu", **{typo: 1})
    with pytest.raises(InputError, match=r"\['batch_size'\] given both directly and in scorer_options"):
        evaluate.load(str(REPO / "metrics" / "clip_s"), batch_size=2, scorer_options={"batch_size": 4})


def test_module_empty_caption_policy_is_the_scorers(tiny_hub):
    import evaluate

    from capeval import InputError

    images = [Image.new("RGB", (30, 20), "green"), Image.new("RGB", (20, 30), "red"), Image.new("RGB", (24, 24))]
    captions = ["green", " ", "a red field"]
    for policy, count in (("skip", "skipped_empty_captions"), (0.5, "empty_captions")):
        module = evaluate.load(str(REPO / "metrics" / "clip_s"), device="cpu", empty_caption=policy)
        result = module.compute(predictions=captions, images=images, references=[["grass"], ["x"], "a red image"])
        expected = module.scorer.score(captions, images=images, references=[["grass"], ["x"], ["a red image"]],
                                       empty_caption=policy)
        assert result == expected and result[count] == 1
        assert result["clip_s_per_sample"][1] == (None if policy == "skip" else 0.5)
    with pytest.raises(InputError, match=r"images\[1\]: image file not found"):  # skipped samples are validated
        module.compute(predictions=captions, images=[images[0], "/no/such.png", images[2]])
    for policy in (float("nan"), "zero"):
        with pytest.raises(InputError, match="empty_caption must be 'score', 'error', 'skip' or a finite score"):
            evaluate.load(str(REPO / "metrics" / "clip_s"), device="cpu", empty_caption=policy)
