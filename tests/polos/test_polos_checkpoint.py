"""The Polos family: official-checkpoint conversion (fabricated Lightning checkpoint with the official key names
and shapes), direct loading of the official file, and the registered weights."""

import json

import numpy as np
import pytest
import torch

from capeval.cli import main
from capeval.polos.scorer import load_head

FEATURES, H1, H2 = 4 * 768 + 6 * 512, 2304, 1152
CALLS = []


LIGHTNING_MODULE = "pytorch_lightning.callbacks.model_checkpoint"


class ModelCheckpoint:
    """Stands for Lightning's callback class, saved as a dict key as Lightning 1.2 does (pickled under Lightning's
    module name: :func:`_write_checkpoint` lends it a stand-in module while saving)."""


ModelCheckpoint.__module__ = LIGHTNING_MODULE


def _record(*args):
    CALLS.append(args)


class Payload:
    """Unpickling this would call ``_record``: the loader must not run it."""

    def __reduce__(self):
        return _record, ("ran",)


def _official_state():
    torch.manual_seed(0)
    state = {f"scalar_mix.scalar_parameters.{i}": torch.randn(1) for i in range(13)}
    state["scalar_mix.gamma"] = torch.randn(1)
    for i, (o, n) in enumerate(((H1, FEATURES), (H2, H1), (1, H2)), 1):
        state[f"ff.0.ff.linear_{i}.weight"] = torch.randn(o, n) * 0.01
        state[f"ff.0.ff.linear_{i}.bias"] = torch.randn(o)
    state["encoder.model.embeddings.word_embeddings.weight"] = torch.randn(50, 768)
    state["clip.text_projection"] = torch.randn(8, 512)
    return state


def _write_checkpoint(path, state, **extra):
    import sys
    import types

    parts = LIGHTNING_MODULE.split(".")
    names = [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
    assert not any(name in sys.modules for name in names)  # Lightning is not installed
    sys.modules.update({name: types.ModuleType(name) for name in names})  # only while saving: pickle imports the
    sys.modules[LIGHTNING_MODULE].ModelCheckpoint = ModelCheckpoint     # class's module to find it
    try:
        torch.save({"epoch": 3, "state_dict": state,
                    "callbacks": {ModelCheckpoint: {"best_model_score": torch.tensor(.5)}},
                    "hyper_parameters": {"pool": "cls", "layer": "mix"}, **extra}, path)
    finally:
        for name in names:
            del sys.modules[name]


def test_official_checkpoint_converts_and_loads_directly(tmp_path):
    state = _official_state()
    _write_checkpoint(tmp_path / "reprod.ckpt", state)
    (tmp_path / "hparams.yaml").write_text("model: PolosEstimator\npretrained_model: princeton-nlp/sup-simcse-roberta-base"
                                           "\nlayer: mix\npool: cls\nactivations: Tanh\nfinal_activation: false\n"
                                           "hidden_sizes: 2304,1152\n")
    assert main(["convert", "polos", str(tmp_path / "reprod.ckpt"), "--output", str(tmp_path / "out")]) == 0
    head, config = load_head(str(tmp_path / "out"))
    assert config["feature_dim"] == 6144 and config["hidden"] == [2304, 1152]
    assert (config["text_dim"], config["clip_dim"], config["num_layers"]) == (768, 512, 13)
    mlp = [m for m in head.mlp if isinstance(m, torch.nn.Linear)]
    for i, linear in enumerate(mlp, 1):
        assert torch.equal(linear.weight, state[f"ff.0.ff.linear_{i}.weight"])
        assert torch.equal(linear.bias, state[f"ff.0.ff.linear_{i}.bias"])
    assert torch.equal(head.scalar_parameters, torch.cat([state[f"scalar_mix.scalar_parameters.{i}"] for i in range(13)]))
    assert torch.equal(head.gamma, state["scalar_mix.gamma"])
    assert [type(m).__name__ for m in head.mlp] == ["Linear", "Tanh", "Dropout", "Linear", "Tanh", "Dropout",
                                                      "Linear", "Sigmoid"]
    x = torch.randn(2, FEATURES)
    expected = torch.sigmoid(mlp[2](torch.tanh(mlp[1](torch.tanh(mlp[0](x))))))
    torch.testing.assert_close(head.mlp(x), expected)
    assert "library_name: capeval" in (tmp_path / "out" / "README.md").read_text()

    direct, direct_config = load_head(str(tmp_path / "reprod.ckpt"))  # the official file loads directly too
    assert direct_config == config
    for key, value in head.state_dict().items():
        assert torch.equal(direct.state_dict()[key], value), key


@pytest.mark.parametrize("payload, name", [(Payload(), f"{__name__}._record"), (None, "shutil.copyfile"),
                                           (None, "posix.system")])
def test_a_checkpoint_naming_any_other_global_is_refused_by_name_with_nothing_run_or_written(tmp_path, capsys,
                                                                                           payload, name):
    """#34 item 5: globals other than tensors and Lightning's metadata classes are refused in one line naming them
    (they were replaced by inert stand-ins, shutil.copyfile included, and the checkpoint converted), before anything
    is loaded or written."""
    import os
    import shutil

    class Calls:
        def __reduce__(self):
            return {"shutil.copyfile": shutil.copyfile, "posix.system": os.system}[name], (
                (str(tmp_path / "hparams.yaml"), str(tmp_path / "copied")) if name == "shutil.copyfile"
                else (f"touch {tmp_path / 'pwned'}",))

    _write_checkpoint(tmp_path / "reprod.ckpt", _official_state(), payload=payload or Calls())
    (tmp_path / "hparams.yaml").write_text("layer: mix\npool: cls\n")
    capsys.readouterr()
    assert main(["convert", "polos", str(tmp_path / "reprod.ckpt"), "--output", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error == (f"capeval convert: error: {tmp_path / 'reprod.ckpt'}: refusing to load {name}: not a tensor nor "
                     "a Lightning metadata type (a checkpoint names no other global)\n")
    with pytest.raises(ValueError, match=f"refusing to load {name}"):
        load_head(str(tmp_path / "reprod.ckpt"))
    assert CALLS == [] and not (tmp_path / "copied").exists() and not (tmp_path / "pwned").exists()
    assert not (tmp_path / "out").exists()


def test_unsupported_official_configurations_are_refused(tmp_path, capsys):
    _write_checkpoint(tmp_path / "reprod.ckpt", _official_state())
    (tmp_path / "hparams.yaml").write_text("pool: avg\nlayer: mix\n")
    with pytest.raises(ValueError, match="unsupported Polos configuration"):
        load_head(str(tmp_path / "reprod.ckpt"))
    (tmp_path / "b").mkdir()  # no hparams.yaml beside these
    torch.save({"state_dict": {"unrelated": torch.zeros(1)}}, tmp_path / "b" / "other.ckpt")
    assert main(["convert", "polos", str(tmp_path / "b" / "other.ckpt"), "--output", str(tmp_path / "out2")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("capeval convert: error: ")
    assert "other.ckpt" in error and "not an official Polos checkpoint" in error
    state = _official_state()
    state["clip.text_projection"] = torch.randn(8, 768)
    torch.save({"state_dict": state}, tmp_path / "b" / "mismatch.ckpt")
    with pytest.raises(ValueError, match="takes 6144 features"):
        load_head(str(tmp_path / "b" / "mismatch.ckpt"))


def test_registered_weights_and_tiny_models(tiny_hub):
    from transformers import AutoModel

    from capeval.core.hub import get_spec, resolve

    simcse, head = get_spec("simcse-roberta-base"), get_spec("polos")
    assert simcse.repo_id == "princeton-nlp/sup-simcse-roberta-base" and simcse.format == "transformers"
    assert head.files == ("polos_config.json", "polos_head.safetensors")
    model = AutoModel.from_pretrained(str(resolve("simcse-roberta-base")))
    assert model.config.num_hidden_layers + 1 == 13  # as RoBERTa-base: the scalar mix sees 13 hidden states
    tiny_head, config = load_head("polos")
    assert config["feature_dim"] == 4 * model.config.hidden_size + 6 * config["clip_dim"]
    assert tiny_head.scalar_parameters.shape == (13,)


def test_head_and_encoders_must_agree(tiny_hub, tmp_path):
    from capeval.polos.checkpoint import CONFIG_FILE, HEAD_FILE, HEAD_FILES, head_config, write_head
    from capeval.polos.scorer import PolosScorer, head_from_config

    config = head_config(text_dim=32, clip_dim=32, hidden=(8, 4))
    write_head(tmp_path, head_from_config(config).state_dict(), config)
    assert HEAD_FILES == (CONFIG_FILE, HEAD_FILE)  # the artifact's file names, defined once
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(HEAD_FILES)
    assert json.loads((tmp_path / CONFIG_FILE).read_text()) == config
    with pytest.raises(ValueError, match="expects .* but its encoders give"):
        PolosScorer(str(tmp_path), device="cpu")
    assert np.isfinite(head_from_config(config).mlp(torch.zeros(1, config["feature_dim"])).item())


def test_a_linked_hparams_yaml_is_read_through_the_link_and_a_broken_one_is_named(tmp_path, capsys):
    """``hparams.yaml`` beside the checkpoint may be a link (Lightning runs share one): it is followed; a link to
    nothing or to a folder, and a link flattened into a file holding its target's path, are one-line errors naming
    the file — never silently skipped for the checkpoint's own hyper-parameters, never an AttributeError."""
    _write_checkpoint(tmp_path / "reprod.ckpt", _official_state())
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "hparams.yaml").write_text("pool: avg\nlayer: mix\n")
    link = tmp_path / "hparams.yaml"
    link.symlink_to("shared/hparams.yaml")
    with pytest.raises(ValueError, match=r"unsupported Polos configuration \{'pool': 'avg'\}"):
        load_head(str(tmp_path / "reprod.ckpt"))
    for target, message in (("missing/hparams.yaml", "a link to missing/hparams.yaml, which is not a file"),
                            ("shared", "a link to shared, which is not a file")):
        link.unlink()
        link.symlink_to(target)
        with pytest.raises(ValueError, match=message):
            load_head(str(tmp_path / "reprod.ckpt"))
        assert main(["convert", "polos", str(tmp_path / "reprod.ckpt"), "--output", str(tmp_path / "out")]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and str(link) in error and message in error
    link.unlink()
    link.write_text("../shared/hparams.yaml")  # what a copy or archive that flattens links leaves
    with pytest.raises(ValueError, match="not the hyper-parameter mapping"):
        load_head(str(tmp_path / "reprod.ckpt"))
    assert not (tmp_path / "out").exists()
