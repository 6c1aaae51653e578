"""`capeval weights` and `capeval fetch`: the listing agrees with the registry and the README, fetching a metric
resolves every weight it loads, and `fetch --file` converts a hand-downloaded official file."""

import hashlib
import json
import re
from pathlib import Path

import pytest
import torch

from capeval.cli import main
from capeval.cli.weights import markdown_table
from capeval.core.constants import PROVENANCE_FILE, TINY_MARKER_FILE
from capeval.core.hub import converted_dir, load_safetensors, registered_weights

README = Path(__file__).resolve().parents[2] / "README.md"


def _rows(capsys, *args):
    assert main(["weights", "--json", *args]) == 0
    return {row["name"]: row for row in json.loads(capsys.readouterr().out)}  # one JSON document: a list


def test_weights_lists_every_registered_weight_with_its_source_pin_cache_and_fetch_command(tiny_hub, capsys):
    rows = _rows(capsys)
    specs = registered_weights()
    assert sorted(rows) == sorted(specs)
    for name, spec in specs.items():
        row = rows[name]
        if spec.upstream is not None:
            expected = f"sha256 {spec.upstream.sha256}" if spec.upstream.sha256 else "unpinned ("
        else:
            expected = f"commit {spec.revision}" if re.fullmatch("[0-9a-f]{40}", spec.revision) else "unpinned ("
        assert row["pin"].startswith(expected), name
        assert row["source"].startswith(spec.upstream.filename if spec.upstream else f"hub {spec.repo_id}")
        assert row["fetch"].startswith(f"capeval fetch {name}")
        assert row["cached"] and (Path(row["cached"]) / TINY_MARKER_FILE).exists()  # the tiny hub holds them all
    assert "--file" in rows["pacs-openclip-vit-l-14"]["fetch"]  # its authors give no direct link


def test_weights_reports_what_is_not_cached(tmp_path, monkeypatch, capsys):
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    assert all(row["cached"] is None for row in _rows(capsys).values())
    assert main(["weights"]) == 0
    assert "not cached here; fetch: capeval fetch sam-vit-b" in capsys.readouterr().out
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from capeval.core.errors import ModelNotAvailableError
    from capeval.core.hub import resolve

    with pytest.raises(ModelNotAvailableError, match="capeval fetch openai-clip-vit-b-32"):  # a hub weight too
        resolve("openai-clip-vit-b-32")


def test_readme_weights_table_is_the_registry_and_claims_no_pin_it_lacks():
    text = README.read_text()
    start = text.index("<!-- weights-table:start")
    block = text[text.index("\n", start) + 1:text.index("<!-- weights-table:end -->")].strip()
    assert block == markdown_table()
    for spec in registered_weights().values():
        if spec.upstream is None and not spec.pinned:
            for line in text.splitlines():
                if spec.repo_id in line:
                    assert not re.search(r"(?<!un)pinned", line), line


def test_fetch_a_metric_resolves_every_weight_it_loads(tiny_hub, capsys):
    assert main(["fetch", "clip_s"]) == 0
    out = capsys.readouterr().out
    assert "clip_s: openai-clip-vit-b-32: " in out and str(tiny_hub) in out


def test_fetch_file_converts_a_hand_downloaded_official_file(tmp_path, monkeypatch, capsys):
    from capeval.testing import TINY_BUILDERS

    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    TINY_BUILDERS["pacs-openclip-vit-l-14"](tmp_path / "tiny")
    state = load_safetensors(tmp_path / "tiny" / "open_clip_model.safetensors")
    official = tmp_path / "openClip_ViT-L-14.pth"
    torch.save({"state_dict": state}, official)
    assert main(["fetch", "pacs-openclip-vit-l-14", "--file", str(official)]) == 0
    target = converted_dir("pacs-openclip-vit-l-14")
    assert f"pacs-openclip-vit-l-14: {target}" in capsys.readouterr().out
    provenance = json.loads((target / PROVENANCE_FILE).read_text())
    assert provenance["sha256"] == hashlib.sha256(official.read_bytes()).hexdigest()
    assert provenance["converter"] == "pac-s-vit-l-14" and official.exists()  # the user's own file is kept
    converted = load_safetensors(target / "open_clip_model.safetensors")
    assert all(torch.equal(converted[k], v) for k, v in state.items())


@pytest.mark.parametrize("argv, message", [
    (["fetch", "no-such-thing"], "unknown weight or metric"),
    (["fetch", "clip_s", "--file", "x.pth"], "--file takes exactly one weight"),
    (["fetch", "openai-clip-vit-b-32", "--file", "x.pth"], "--file takes exactly one weight"),
])
def test_fetch_refuses_bad_requests(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_weights_marks_tiny_random_weights_as_tiny(tiny_hub, tmp_path, monkeypatch, capsys):
    rows = _rows(capsys)
    assert all(row["tiny"] is True for row in rows.values())
    assert main(["weights"]) == 0
    out = capsys.readouterr().out
    assert out.count("TINY RANDOM TEST WEIGHTS") == len(rows)
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "capeval"))
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    converted = converted_dir("vcrscore-gbr")  # a converted copy of the real file is not marked
    converted.mkdir(parents=True)
    (converted / registered_weights()["vcrscore-gbr"].files[0]).write_text("{}")
    (converted / PROVENANCE_FILE).write_text("{}")
    row = _rows(capsys)["vcrscore-gbr"]
    assert row["cached"] == str(converted) and row["tiny"] is False


def test_weights_check_fails_while_a_hub_weight_is_unpinned_and_names_it(monkeypatch, capsys):
    import dataclasses

    from capeval.core import hub

    unpinned = sorted(n for n, s in registered_weights().items() if s.upstream is None and not s.pinned)
    assert unpinned  # the hub weights no public source gave a commit for (README table: "unpinned")
    assert main(["weights", "--check"]) == 1
    out = capsys.readouterr().out
    assert all(f"{name}: unpinned" in out for name in unpinned) and f"{len(unpinned)} hub weights unpinned" in out
    for name in unpinned:
        monkeypatch.setitem(hub._REGISTRY, name, dataclasses.replace(registered_weights()[name], revision="0" * 40))
    assert main(["weights", "--check"]) == 0
    assert "every hub weight is pinned to a commit" in capsys.readouterr().out
