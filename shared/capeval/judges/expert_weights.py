"""EXPERT's judge weights: the authors' LoRA adapter (``hjkim811/EXPERT-llava-13b-lora``, trained with LLaVA's own
code over ``liuhaotian/llava-v1.5-13b``) merged into LLaVA-1.5-13B in transformers' ``llava-hf`` layout.

The adapter names its tensors as LLaVA's ``LlavaLlamaForCausalLM`` does (``model.layers.N...``,
``model.mm_projector.0``, ``lm_head``), under peft's ``base_model.model.`` prefix; its ``non_lora_trainables.bin``
holds the fully trained projector. Merging ``W + scale · B @ A`` (``scale = lora_alpha / r``; ``/ sqrt(r)`` with
rsLoRA) commutes with renaming the keys, so the adapter is merged into the ``llava-hf`` conversion of the same base
checkpoint, each of its keys mapped to the base's name (:func:`hf_key`). The merge runs in float32 and is stored in
the base's dtype. The merged folder is cached under ``<capeval cache>/weights/expert-llava-1.5-13b-hf-<digest>``
(the digest of the base's and the adapter's files' sha256), with a record (``expert_merge.json``) naming both and
every file written with its sha256 (the folder's model id while those files are unchanged).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

from capeval.core.constants import PROVENANCE_FILE, TINY_MARKER_FILE
from capeval.core.convert import load_torch_checkpoint, write_model_card
from capeval.core.errors import ConversionError, ModelNotAvailableError
from capeval.core.hub import default_cache_dir, recorded_files, resolve
from capeval.core.version import __version__
from capeval.judges.identity import (MERGE_RECORD, content_digest, content_files, content_sha256, folder_content,
                                     folder_model_id)

BASE_WEIGHT = "llava-1.5-13b-hf"  # the registered llava-hf conversion of liuhaotian/llava-v1.5-13b (FLEUR's judge)
ADAPTER_WEIGHT = "expert-llava-13b-lora"
ADAPTER_FILES = ("adapter_config.json", "config.json", "non_lora_trainables.bin")
ADAPTER_WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")  # peft writes one of them
INDEX_FILE = "model.safetensors.index.json"
MERGED_NAME = "expert-llava-1.5-13b-hf"

# original LLaVA name prefix -> the llava-hf names it may have (transformers' conversion; transformers 5's layout;
# a vision tower saved without its ``vision_model`` level), tried in order against the base's own keys
KEY_RULES: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("model.vision_tower.vision_tower.vision_model.", ("vision_tower.vision_model.", "model.vision_tower.vision_model.",
                                                       "vision_tower.", "model.vision_tower.")),
    ("model.mm_projector.0.", ("multi_modal_projector.linear_1.", "model.multi_modal_projector.linear_1.")),
    ("model.mm_projector.2.", ("multi_modal_projector.linear_2.", "model.multi_modal_projector.linear_2.")),
    ("model.", ("language_model.model.", "model.language_model.")),
    ("lm_head.", ("language_model.lm_head.", "lm_head.")),
)
PEFT_PREFIX = "base_model.model."
_LORA_KEY = re.compile(r"^(?P<module>.+)\.lora_(?P<part>[AB])(?:\.[^.]+)?\.weight$")


def hf_key(original: str, base_keys: Iterable[str]) -> str:
    """The llava-hf name in ``base_keys`` of the original LLaVA tensor ``original``; a
    :class:`~capeval.core.errors.ConversionError` naming it when the base has no such tensor."""
    base_keys = base_keys if isinstance(base_keys, (set, frozenset, dict)) else set(base_keys)
    for prefix, targets in KEY_RULES:
        if original.startswith(prefix):
            rest = original[len(prefix):]
            for target in targets:
                if target + rest in base_keys:
                    return target + rest
            break
    raise ConversionError(f"{original}: no tensor of the llava-hf base corresponds to it")


def lora_scale(config: Mapping) -> float:
    """``lora_alpha / r`` (``/ sqrt(r)`` with rsLoRA) of a peft LoRA config; any setting this merge does not
    implement is refused, naming it."""
    refused = {"peft_type": ("LORA",), "use_dora": (False, None), "bias": ("none",), "fan_in_fan_out": (False, None),
               "modules_to_save": (None, []), "rank_pattern": ({}, None), "alpha_pattern": ({}, None),
               "layer_replication": (None,)}
    for name, allowed in refused.items():
        if config.get(name, allowed[0]) not in allowed:
            raise ConversionError(f"adapter_config.json: {name}={config.get(name)!r} is not supported (merging "
                                  f"implements plain LoRA: {name} one of {list(allowed)})")
    rank = config.get("r")
    if not (isinstance(rank, int) and rank > 0):
        raise ConversionError(f"adapter_config.json: r must be a positive integer, not {rank!r}")
    return float(config["lora_alpha"]) / (math.sqrt(rank) if config.get("use_rslora") else rank)


def adapter_weights_file(adapter_dir: Path) -> Path:
    """The adapter's weights: ``adapter_model.safetensors``, else ``adapter_model.bin``."""
    for name in ADAPTER_WEIGHT_FILES:
        if (adapter_dir / name).is_file():
            return adapter_dir / name
    raise ConversionError(f"{adapter_dir}: no adapter weights ({' or '.join(ADAPTER_WEIGHT_FILES)})")


def read_tensors(path: Path) -> Dict[str, "object"]:
    """Tensors of a safetensors file, or of an authors' ``.bin`` read with ``torch.load(weights_only=True)``."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    state = load_torch_checkpoint(path)
    if not isinstance(state, dict):
        raise ConversionError(f"{path.name}: not a state dict")
    return state


def lora_pairs(adapter: Mapping[str, "object"]) -> Dict[str, Tuple["object", "object"]]:
    """``{original module name: (A, B)}`` from peft's adapter tensors (``base_model.model.<module>.lora_A.weight``)."""
    parts: Dict[str, Dict[str, object]] = {}
    for key, tensor in adapter.items():
        match = _LORA_KEY.match(key)
        if match is None or not key.startswith(PEFT_PREFIX):
            raise ConversionError(f"adapter tensor {key}: not a LoRA weight of a peft model")
        module = match["module"][len(PEFT_PREFIX):]
        parts.setdefault(module, {})[match["part"]] = tensor
    incomplete = sorted(m for m, p in parts.items() if set(p) != {"A", "B"})
    if incomplete:
        raise ConversionError(f"adapter: {incomplete[0]} lacks its lora_A or lora_B weight")
    return {module: (p["A"], p["B"]) for module, p in parts.items()}


def non_lora_names(state: Mapping[str, "object"]) -> Dict[str, "object"]:
    """``non_lora_trainables.bin``'s tensors under LLaVA's own names (its loader drops ``base_model.``, then
    ``model.`` when the names start ``model.model.``)."""
    renamed = {(k[len("base_model."):] if k.startswith("base_model.") else k): v for k, v in state.items()}
    if any(k.startswith("model.model.") for k in renamed):
        renamed = {(k[len("model."):] if k.startswith("model.") else k): v for k, v in renamed.items()}
    return renamed


def merge_plan(base_shapes: Mapping[str, Tuple[int, ...]], pairs: Mapping[str, Tuple["object", "object"]],
               replaced: Mapping[str, "object"]) -> Tuple[Dict[str, Tuple["object", "object"]], Dict[str, "object"]]:
    """The base tensors the adapter changes: ``({hf name: (A, B)}, {hf name: new tensor})``, every shape checked."""
    deltas, replacements = {}, {}
    for module, (a, b) in pairs.items():
        name = hf_key(module + ".weight", base_shapes)
        shape = (int(b.shape[0]), int(a.shape[1]))
        if a.dim() != 2 or b.dim() != 2 or a.shape[0] != b.shape[1] or shape != tuple(base_shapes[name]):
            raise ConversionError(f"adapter {module}: B @ A is {tuple(b.shape)} @ {tuple(a.shape)}, the base weight "
                                  f"{name} is {tuple(base_shapes[name])}")
        deltas[name] = (a, b)
    for original, tensor in replaced.items():
        name = hf_key(original, base_shapes)
        if tuple(tensor.shape) != tuple(base_shapes[name]):
            raise ConversionError(f"non_lora_trainables {original}: shape {tuple(tensor.shape)}, the base's {name} "
                                  f"is {tuple(base_shapes[name])}")
        replacements[name] = tensor
    return deltas, replacements


def _base_shapes(base_dir: Path, shards: Sequence[str]) -> Dict[str, Tuple[int, ...]]:
    from safetensors import safe_open

    shapes = {}
    for shard in shards:
        with safe_open(str(base_dir / shard), framework="pt") as handle:
            for key in handle.keys():
                shapes[key] = tuple(handle.get_slice(key).get_shape())
    return shapes


def merge_adapter(base_dir: os.PathLike, adapter_dir: os.PathLike, out_dir: os.PathLike) -> Path:
    """Write the llava-hf checkpoint ``base + adapter`` to ``out_dir``: every base shard with the LoRA deltas added
    (float32, stored in the base tensor's dtype) and the projector replaced by ``non_lora_trainables.bin``, the
    base's index, config and processor files, and a model card."""
    from safetensors.torch import load_file, save_file

    base_dir, adapter_dir, out_dir = Path(base_dir), Path(adapter_dir), Path(out_dir)
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    scale = lora_scale(config)
    pairs = lora_pairs(read_tensors(adapter_weights_file(adapter_dir)))
    extra = non_lora_names(read_tensors(adapter_dir / "non_lora_trainables.bin")) \
        if (adapter_dir / "non_lora_trainables.bin").is_file() else {}
    index = json.loads((base_dir / INDEX_FILE).read_text())
    shards = sorted(set(index["weight_map"].values()))
    deltas, replacements = merge_plan(_base_shapes(base_dir, shards), pairs, extra)
    out_dir.mkdir(parents=True, exist_ok=True)
    for shard in shards:
        tensors = load_file(str(base_dir / shard))
        for name in tensors:
            if name in deltas:
                a, b = deltas[name]
                merged = tensors[name].float() + scale * (b.float() @ a.float())
                tensors[name] = merged.to(tensors[name].dtype)
            elif name in replacements:
                tensors[name] = replacements[name].to(tensors[name].dtype).clone()
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(out_dir / shard), metadata={"format": "pt"})
    for item in base_dir.iterdir():
        if item.is_file() and item.name not in {*shards, PROVENANCE_FILE, MERGE_RECORD, "README.md"}:
            shutil.copyfile(item, out_dir / item.name)
    if (adapter_dir / TINY_MARKER_FILE).exists():
        (out_dir / TINY_MARKER_FILE).write_text("merged from a tiny random test adapter: scores mean nothing\n")
    write_model_card(out_dir, title="EXPERT judge (LLaVA-1.5-13B + EXPERT LoRA, llava-hf layout)",
                     source=f"{adapter_dir} merged into {base_dir}", license="llama2",
                     body=f"LoRA scale {scale}: {len(deltas)} weights changed, {len(replacements)} replaced from "
                          f"non_lora_trainables.bin.")
    (out_dir / MERGE_RECORD).write_text(json.dumps({  # last: what the folder holds, each file's sha256 as written
        "weight": MERGED_NAME, "base": base_id(base_dir), "adapter": adapter_id(adapter_dir),
        "digest": merged_digest(base_dir, adapter_dir), "lora_scale": scale, "changed": len(deltas),
        "replaced": len(replacements), "converter": "expert-llava-hf", "capeval_version": __version__,
        "files": recorded_files(out_dir, content_files(out_dir))}, indent=2))
    return out_dir


def _base_parts(base_dir: Path) -> Dict[str, str]:
    """The base's content: its shards (those its index names) and the files beside them."""
    index = json.loads((base_dir / INDEX_FILE).read_text())
    shards = set(index["weight_map"].values())
    return folder_content(base_dir, sorted(shards | set(content_files(base_dir))))


def _adapter_parts(adapter_dir: Path) -> Dict[str, str]:
    return folder_content(adapter_dir)


def base_id(base_dir: Path) -> str:
    """The base's identity: ``repo@commit``, or the digest of a local folder's files (its content)."""
    return folder_model_id(base_dir, lambda: _base_parts(base_dir))


def adapter_id(adapter_dir: Path) -> str:
    """The adapter's identity: ``repo@commit``, or the digest of a local folder's files (its content)."""
    return folder_model_id(adapter_dir, lambda: _adapter_parts(adapter_dir))


def _local(ref: str) -> Optional[Path]:
    path = Path(ref).expanduser()
    return path if path.is_dir() else None


def resolve_base(ref: str = BASE_WEIGHT, cache_dir=None) -> Path:
    """The base checkpoint's folder (a registry name or a local folder) with every shard its index names."""
    if _local(ref) is not None:
        return _local(ref)
    directory = resolve(ref, cache_dir=cache_dir)
    shards = sorted(set(json.loads((directory / INDEX_FILE).read_text())["weight_map"].values()))
    return resolve(ref, shards, cache_dir=cache_dir)


def resolve_adapter(ref: str = ADAPTER_WEIGHT, cache_dir=None) -> Path:
    """The adapter's folder (a registry name or a local folder) with its config, ``non_lora_trainables.bin`` and its
    weights (``adapter_model.safetensors``, else ``adapter_model.bin``)."""
    if _local(ref) is not None:
        return _local(ref)
    directory = resolve(ref, cache_dir=cache_dir)
    if any((directory / name).is_file() for name in ADAPTER_WEIGHT_FILES):
        return directory
    missing = []
    for name in ADAPTER_WEIGHT_FILES:
        try:
            return resolve(ref, [name], cache_dir=cache_dir)
        except ModelNotAvailableError as exc:
            missing.append(str(exc).splitlines()[0])
    raise ModelNotAvailableError(f"EXPERT adapter {ref!r} has no adapter weights: {'; '.join(missing)}")


def merged_digest(base_dir: Path, adapter_dir: Path) -> str:
    """What the merged weights are made of: the base's and the adapter's files' sha256."""
    parts = {f"base/{k}": v for k, v in _base_parts(base_dir).items()}
    parts.update({f"adapter/{k}": v for k, v in _adapter_parts(adapter_dir).items()})
    return content_digest(parts)


def merged_judge(base: str = BASE_WEIGHT, adapter: str = ADAPTER_WEIGHT, cache_dir=None) -> Path:
    """The folder of EXPERT's merged judge for ``base`` and ``adapter`` (registry names or folders): from capeval's
    cache, else merged there now (one process at a time)."""
    from capeval.core.download import file_lock

    base_dir, adapter_dir = resolve_base(base, cache_dir), resolve_adapter(adapter, cache_dir)
    target = default_cache_dir() / "weights" / f"{MERGED_NAME}-{merged_digest(base_dir, adapter_dir)[:16]}"
    if (target / MERGE_RECORD).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(default_cache_dir() / "locks" / f"{target.name}.lock"):
        if (target / MERGE_RECORD).is_file():
            return target
        with tempfile.TemporaryDirectory(prefix=f".{target.name}-", dir=target.parent) as tmp:
            out = merge_adapter(base_dir, adapter_dir, Path(tmp) / "out")
            shutil.rmtree(target, ignore_errors=True)
            os.replace(out, target)
    return target


def merged_model_id(directory: Path) -> Optional[str]:
    """``adapter+base`` (each :func:`adapter_id` / :func:`base_id`) of a merged judge folder, from the record the
    merge wrote, while every file is the one the merge wrote (the sha256 it recorded; a file whose size or
    modification time changed is hashed again); None for other folders, and for a merged folder whose files
    changed since (or that records none): its id is then its content
    (:func:`capeval.judges.judge_weights.judge_model_id`)."""
    record = Path(directory) / MERGE_RECORD
    if not record.is_file():
        return None
    info = json.loads(record.read_text())
    written = info.get("files")
    if info.get("weight") != MERGED_NAME or not isinstance(written, dict):
        return None
    if list(content_files(directory)) != sorted(written) or any(
            content_sha256(Path(directory) / name, entry) != entry.get("sha256") for name, entry in written.items()):
        return None
    return f"{info['adapter']}+{info['base']}"



def convert_expert_adapter(adapter_dir: Path, out_dir: Path) -> None:
    """``capeval convert expert-llava-hf <adapter folder> --output <out>``: the adapter merged into the registered llava-hf
    LLaVA-1.5-13B (fetched or found in the Hugging Face cache)."""
    if not Path(adapter_dir).is_dir():
        raise ConversionError(f"{adapter_dir}: give the adapter's folder (adapter_config.json, adapter weights, "
                              "non_lora_trainables.bin)")
    merge_adapter(resolve_base(BASE_WEIGHT), Path(adapter_dir), Path(out_dir))
