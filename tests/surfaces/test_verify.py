"""`capeval verify`: published anchors recomputed with the weights present. On tiny random weights every anchor is
reported as a mismatch (it can never be green by construction); with the official VCRScore regressor, converted
from the authors' pickle, its anchor passes."""

import json

import numpy as np
import pytest
from PIL import Image

from capeval.cli import main


def _example_folder(root, folder):
    """An example folder in the official layout, with random images (the layout is what verify reads)."""
    (root / folder).mkdir(parents=True)
    for i in (1, 2):
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (48, 64, 3), dtype=np.uint8)).save(
            root / folder / f"image{i}.jpg")
    for kind in ("good", "bad"):
        (root / folder / f"{kind}_captions.json").write_text(json.dumps({"image1": f"a {kind} cat",
                                                                         "image2": f"a {kind} dog"}))
    (root / folder / "refs.json").write_text(json.dumps({"image1": ["two cats"], "image2": ["a black dog"]}))


def test_verify_on_tiny_weights_reports_every_mismatch(tiny_hub, tmp_path, capsys):
    _example_folder(tmp_path, "clipscore")
    _example_folder(tmp_path, "pacscore")
    code = main(["verify", "--data-dir", str(tmp_path), "--only", "clip_s", "pac_s", "vcrscore_regressor"])
    out = capsys.readouterr().out
    assert code == 1
    assert out.count("MISMATCH") == 9 and " ok " not in out  # 2 + 2 + 2 + 2 values, 1 regressor value
    assert "TINY RANDOM TEST WEIGHTS were loaded" in out and "openai-clip-vit-b-32" in out
    assert "published 0.8585" in out and "published 0.7892486442" in out
    assert "5 anchors checked, 5 failed, 0 skipped" in out


def test_verify_skips_image_anchors_without_data_and_fails_when_nothing_was_checked(tiny_hub, capsys):
    assert main(["verify", "--only", "clip_s"]) == 1
    out = capsys.readouterr().out
    assert "skipped: needs --data-dir with clipscore/" in out and "0 anchors checked" in out


def test_verify_reports_missing_weights_as_unavailable(tmp_path, monkeypatch, capsys):
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    assert main(["verify", "--only", "vcrscore_regressor"]) == 1  # nothing could be checked
    out = capsys.readouterr().out
    assert "UNAVAILABLE" in out and "capeval fetch vcrscore-gbr" in out
    assert "0 anchors checked, 0 failed, 0 skipped, 1 unavailable (weights or data absent" in out
    assert "1 failed" not in out


def test_verify_passes_with_the_official_vcrscore_regressor(shared_data, tmp_path, monkeypatch, capsys):
    import huggingface_hub.constants as hub_constants

    official = shared_data.parent / "reference" / "vcrscore" / "model_GBR_VCR.pickle"
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))  # no capeval/vcrscore-gbr repo
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    assert main(["fetch", "vcrscore-gbr", "--file", str(official)]) == 0  # sha256 checked against the published one
    capsys.readouterr()
    assert main(["verify", "--only", "vcrscore_regressor"]) == 0
    out = capsys.readouterr().out
    assert "ok        vcrscore" in out and "1 anchors checked, 0 failed" in out and "TINY" not in out


@pytest.mark.parametrize("group", ["clip_s", "pac_s", "vcrscore_example"])
def test_verify_with_the_official_example_images_runs_on_tiny_weights_and_fails(group, tiny_hub, shared_data,
                                                                                 capsys):
    assert main(["verify", "--data-dir", str(shared_data / "images"), "--only", group]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "needs --data-dir" not in out and " 0 skipped" in out
