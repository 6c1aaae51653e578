"""The Polos head artifact (our safetensors + JSON layout) and the official PyTorch-Lightning checkpoint:
safe loading, key mapping, hyper-parameter checks and conversion."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Tuple

from capeval.core.convert import load_torch_checkpoint, write_model_card
from capeval.core.errors import ConversionError

SIMCSE_FILES = ("config.json", "pytorch_model.bin", "vocab.json", "merges.txt", "tokenizer_config.json",
                "special_tokens_map.json")
CONFIG_FILE = "polos_config.json"  # the head artifact: config + weights
HEAD_FILE = "polos_head.safetensors"
HEAD_FILES = (CONFIG_FILE, HEAD_FILE)
NUM_LAYERS = 13
OFFICIAL_HIDDEN = (2304, 1152)
OFFICIAL_TEXT_ENCODER = "princeton-nlp/sup-simcse-roberta-base"
HEAD_LICENSE = "bsd-3-clause-clear"


def head_config(*, text_dim: int, clip_dim: int, hidden=OFFICIAL_HIDDEN, num_layers: int = NUM_LAYERS,
                clip_weights: str = "openai-clip-vit-b-32", text_encoder: str = "simcse-roberta-base") -> Dict:
    return {"feature_dim": 4 * text_dim + 6 * clip_dim, "text_dim": text_dim, "clip_dim": clip_dim,
            "hidden": [int(h) for h in hidden], "num_layers": num_layers, "clip_weights": clip_weights,
            "text_encoder": text_encoder}


def write_head(out_dir: Path, state_dict, config: Dict) -> None:
    """Our head layout: ``polos_config.json`` + ``polos_head.safetensors`` (float32)."""
    from safetensors.torch import save_file

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / CONFIG_FILE).write_text(json.dumps(config, indent=2))
    save_file({k: v.detach().float().contiguous().cpu() for k, v in state_dict.items()}, str(out_dir / HEAD_FILE))


class _InertGlobal:
    """Stands in for a class or function named in a checkpoint's metadata (e.g. Lightning callback classes used as
    dict keys): it is never the named object, runs no code and keeps no state."""

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass


# What a Lightning checkpoint's metadata may name besides tensors: Lightning's own classes (callbacks as dict keys,
# hyper-parameter containers, enums), argparse hyper-parameters and numpy scalars in logged metrics.
LIGHTNING_MODULES = ("pytorch_lightning.", "lightning.", "lightning_fabric.")
METADATA_GLOBALS = frozenset({"argparse.Namespace", "numpy.dtype", "numpy.core.multiarray.scalar",
                              "numpy._core.multiarray.scalar"})


def expected_metadata_global(name: str) -> bool:
    return name in METADATA_GLOBALS or name.startswith(LIGHTNING_MODULES)


def load_lightning_checkpoint(path: Path) -> Dict:
    """A PyTorch-Lightning checkpoint via ``torch.load(weights_only=True)``; the globals its metadata names (callback
    classes, hyper-parameter containers: :func:`expected_metadata_global`) are replaced by inert stand-ins instead of
    being imported. Any other global (``shutil.copyfile``, ``posix.system``, …) is refused by name
    (:class:`ConversionError`, one line) before anything is loaded."""
    import torch
    from torch.serialization import get_unsafe_globals_in_checkpoint, safe_globals

    try:
        unsafe = get_unsafe_globals_in_checkpoint(str(path))
    except (RuntimeError, ValueError):  # not a zip-format checkpoint: plain weights-only loading
        return load_torch_checkpoint(path)
    unexpected = [name for name in unsafe if not expected_metadata_global(name)]
    if unexpected:
        raise ConversionError(f"{path}: refusing to load {', '.join(unexpected)}: not a tensor nor a Lightning "
                              "metadata type (a checkpoint names no other global)")
    stand_ins = [(type(name.rsplit(".", 1)[-1], (_InertGlobal,), {}), name) for name in unsafe]
    with safe_globals(stand_ins):
        return torch.load(str(path), map_location="cpu", weights_only=True)


_MLP_KEYS = {f"ff.0.ff.linear_{i}.{p}": f"mlp.{j}.{p}" for i, j in ((1, 0), (2, 3), (3, 6)) for p in ("weight", "bias")}
_EXPECTED_HPARAMS = {"layer": "mix", "pool": "cls", "activations": "Tanh", "final_activation": False}


def check_official_hparams(hparams: Dict) -> None:
    """Refuse official configurations capeval does not implement (other pooling, activations or encoders)."""
    wrong = {k: hparams[k] for k, v in _EXPECTED_HPARAMS.items() if k in hparams and hparams[k] != v}
    model = hparams.get("pretrained_model", OFFICIAL_TEXT_ENCODER)
    if model != OFFICIAL_TEXT_ENCODER:
        wrong["pretrained_model"] = model
    if wrong:
        raise ValueError(f"unsupported Polos configuration {wrong}; capeval implements {_EXPECTED_HPARAMS} with "
                         f"{OFFICIAL_TEXT_ENCODER}")


def _read_hparams(checkpoint: Dict, official: Path) -> Dict:
    """``hparams.yaml`` beside the checkpoint path as given (as the official loader reads it; a link is followed),
    else the checkpoint's own."""
    yaml_file = official.with_name("hparams.yaml")
    if yaml_file.exists() or yaml_file.is_symlink():
        return read_hparams_yaml(yaml_file)
    hparams = checkpoint.get("hyper_parameters", {}) if isinstance(checkpoint, dict) else {}
    return hparams if isinstance(hparams, dict) else {}


def read_hparams_yaml(yaml_file: Path) -> Dict:
    """The hyper-parameter mapping of a Lightning ``hparams.yaml``; a broken link, a folder, invalid YAML or a file
    that is not a mapping (e.g. a link flattened into a file holding its target's path) is a
    :class:`~capeval.core.errors.ConversionError` naming the file."""
    import yaml

    if not yaml_file.is_file():
        what = f"a link to {os.readlink(yaml_file)}, which is not a file" if yaml_file.is_symlink() else "not a file"
        raise ConversionError(f"{yaml_file}: {what}: put the checkpoint's hparams.yaml beside it")
    try:
        hparams = yaml.safe_load(yaml_file.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConversionError(f"{yaml_file}: not valid YAML ({' '.join(str(exc).split())})") from exc
    if hparams is None:
        return {}
    if not isinstance(hparams, dict):
        raise ConversionError(f"{yaml_file}: holds {type(hparams).__name__} {str(hparams)[:80]!r}, not the "
                              f"hyper-parameter mapping (a symbolic link copied as a file holding its target's "
                              f"path?): put the real hparams.yaml beside the checkpoint")
    return hparams


def official_to_head_state(state_dict: Dict) -> Dict:
    """Map the official checkpoint's trained keys to :class:`capeval.polos.scorer.PolosHead`."""
    import torch

    mix_keys = sorted((k for k in state_dict if k.startswith("scalar_mix.scalar_parameters.")),
                      key=lambda k: int(k.rsplit(".", 1)[1]))
    missing = [k for k in (*_MLP_KEYS, "scalar_mix.gamma") if k not in state_dict]
    if missing or not mix_keys:
        raise ValueError(f"not an official Polos checkpoint: missing {(missing or ['scalar_mix.scalar_parameters.*'])[:5]}")
    head = {ours: state_dict[theirs] for theirs, ours in _MLP_KEYS.items()}
    head["scalar_parameters"] = torch.stack([state_dict[k].reshape(()) for k in mix_keys])
    head["gamma"] = state_dict["scalar_mix.gamma"].reshape(1)
    return head


def official_head_config(state_dict: Dict, head: Dict) -> Dict:
    """Dimensions of an official head, cross-checked against the encoders' weights stored beside it."""
    h1, feature_dim = head["mlp.0.weight"].shape
    embeddings = state_dict.get("encoder.model.embeddings.word_embeddings.weight")
    text_dim = int(embeddings.shape[1]) if embeddings is not None else 768
    projection = state_dict.get("clip.text_projection")
    clip_dim = int(projection.shape[1]) if projection is not None else (int(feature_dim) - 4 * text_dim) // 6
    config = head_config(text_dim=text_dim, clip_dim=clip_dim, hidden=(h1, head["mlp.3.weight"].shape[0]),
                         num_layers=int(head["scalar_parameters"].numel()))
    if config["feature_dim"] != feature_dim:
        raise ValueError(f"official head takes {feature_dim} features but its encoders give 4·{text_dim} + "
                         f"6·{clip_dim} = {config['feature_dim']}")
    return config


def read_official_head(official: Path) -> Tuple[Dict, Dict]:
    """(head state dict, config) of the official ``reprod.ckpt`` (+ ``hparams.yaml`` beside it, when present)."""
    checkpoint = load_lightning_checkpoint(official)
    check_official_hparams(_read_hparams(checkpoint, official))
    state_dict = checkpoint.get("state_dict", checkpoint)
    head = official_to_head_state(state_dict)
    return head, official_head_config(state_dict, head)


def convert_polos(official: Path, out_dir: Path) -> None:
    head, config = read_official_head(official)
    write_head(out_dir, head, config)
    write_model_card(out_dir, title="Polos head (capeval layout)", source=official.name, license=HEAD_LICENSE,
                     body="The scalar mix (13 logits + gamma) and MLP of the official Polos checkpoint; the frozen "
                          "encoders are not copied: CLIP ViT-B/32 (`openai-clip-vit-b-32`) and "
                          f"`{OFFICIAL_TEXT_ENCODER}`. Score with `capeval score polos --weights <this dir>` or "
                          "`evaluate.load('capeval/polos', weights=...)`.")
