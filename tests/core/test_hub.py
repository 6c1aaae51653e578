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
