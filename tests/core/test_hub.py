from pathlib import Path

import pytest

from capeval import ModelNotAvailableError
from capeval.backbones.clip import ClipBackbone
from capeval.core.hub import get_spec, registered_weights, resolve
from capeval.testing import snapshot_revision


def test_every_registered_weight_is_complete():
    for name, spec in registered_weights().items():
        assert spec.repo_id.count("/") == 1, name
        assert spec.revision and spec.files and spec.license and spec.source_url, name


def test_load_by_registry_name_and_by_hub_id_offline(tiny_hub):
    spec = get_spec("openai-clip-vit-b-32")
    by_name = resolve("openai-clip-vit-b-32")
    by_id = resolve(f"{spec.repo_id}@{spec.revision}", spec.files)
    assert by_name == by_id
    assert by_name.name == snapshot_revision(spec) and str(by_name).startswith(str(tiny_hub))
    backbone = ClipBackbone(f"{spec.repo_id}@{spec.revision}", device="cpu")
    assert backbone.encode_texts(["a dog"]).shape == (1, 32)


def test_missing_model_names_repo_and_how_to_fetch(tiny_hub):
    with pytest.raises(ModelNotAvailableError) as info:
        resolve("someorg/not-in-cache", ["model.safetensors"])
    message = str(info.value)
    assert "someorg/not-in-cache" in message and "hf download someorg/not-in-cache" in message


def test_local_directory_and_bad_reference(tiny_hub, tmp_path):
    assert resolve(str(tmp_path)) == tmp_path
    with pytest.raises(ModelNotAvailableError, match="lacks"):
        resolve(str(tmp_path), ["open_clip_config.json"])
    with pytest.raises(ModelNotAvailableError, match="neither a local directory"):
        resolve("not-a-name")


def _damage(path, how):
    """Overwrite a safetensors file the ways a download or copy goes wrong."""
    import random
    import struct

    data = path.read_bytes()
    damaged = {"truncated": data[: len(data) // 2],
               "last byte lost": data[:-1],
               "header only": data[:8],
               "garbage": random.Random(0).randbytes(len(data)),
               "bad header": struct.pack("<Q", 16) + b"{not json at all"}[how]
    path.write_bytes(damaged)


@pytest.mark.parametrize("how", ["truncated", "last byte lost", "header only", "garbage", "bad header"])
def test_a_corrupt_clip_weights_file_is_named(tmp_path, capsys, how):
    """A damaged ``open_clip_model.safetensors`` in a local weights directory: the error names the file (safetensors'
    own error names none), through the backbone and as the CLI's one-line error."""
    from capeval.cli import main
    from capeval.testing import tiny_clip_factory

    directory = tmp_path / "weights"
    tiny_clip_factory(seed=3)(directory)
    weights = directory / "open_clip_model.safetensors"
    ClipBackbone(str(directory), device="cpu")  # intact: loads
    _damage(weights, how)
    with pytest.raises(ModelNotAvailableError) as info:
        ClipBackbone(str(directory), device="cpu")
    message = str(info.value)
    assert str(weights) in message and "corrupt or truncated" in message
    (tmp_path / "in.jsonl").write_text('{"caption": "a dog", "image": "dog.png"}\n')
    assert main(["score", "clip_s", "--weights", str(directory), "--input", str(tmp_path / "in.jsonl"),
                 "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("capeval score: error: weights file ") and str(weights) in err


def test_a_corrupt_file_behind_a_hub_cache_link_names_the_link_and_its_blob(tmp_path):
    """A snapshot file of the Hugging Face cache is a link to a blob: both are named (both must be deleted)."""
    from capeval.core.hub import load_safetensors
    from capeval.testing import tiny_clip_factory

    tiny_clip_factory(seed=3)(tmp_path / "w")
    blob = tmp_path / "blobs" / "0123abcd"
    blob.parent.mkdir()
    (tmp_path / "w" / "open_clip_model.safetensors").rename(blob)
    link = tmp_path / "snapshots" / "main" / "open_clip_model.safetensors"
    link.parent.mkdir(parents=True)
    link.symlink_to(Path("..") / ".." / "blobs" / "0123abcd")
    assert set(load_safetensors(link)) == set(load_safetensors(blob))  # intact: loads
    _damage(blob, "truncated")
    with pytest.raises(ModelNotAvailableError) as info:
        load_safetensors(link)
    assert str(link) in str(info.value) and str(blob.resolve()) in str(info.value)


def test_a_corrupt_polos_head_is_named(tmp_path):
    from capeval.polos.scorer import CONFIG_FILE, HEAD_FILE, load_head

    (tmp_path / CONFIG_FILE).write_text("{}")
    (tmp_path / HEAD_FILE).write_bytes(b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n")
    with pytest.raises(ModelNotAvailableError, match="corrupt or truncated") as info:
        load_head(str(tmp_path))
    assert str(tmp_path / HEAD_FILE) in str(info.value)


def test_unpinned_hub_weights_warn_once_per_process_naming_the_commit_loaded(tiny_hub, monkeypatch):
    import warnings

    from capeval.core import hub
    from capeval.core.hub import UnpinnedWeightsWarning

    monkeypatch.setattr(hub, "_UNPINNED_WARNED", set())  # a fresh process
    unpinned = [n for n, s in registered_weights().items() if s.upstream is None and not s.pinned]
    assert unpinned
    for name in unpinned:
        spec = get_spec(name)
        with pytest.warns(UnpinnedWeightsWarning) as caught:
            resolve(name)
        (warning,) = caught
        assert f"{spec.repo_id}@{snapshot_revision(spec)}" in str(warning.message) and name in str(warning.message)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnpinnedWeightsWarning)
            resolve(name)  # once per process
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnpinnedWeightsWarning)
        resolve("openai-clip-vit-b-32")  # pinned: silent
        resolve("openai-clip-vit-b-16")  # pinned in this change (a commit found in public code)
