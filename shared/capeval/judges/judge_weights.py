"""Where a judge's weights are and what they are, whatever backend runs them: the local folder of a judge reference
(:func:`resolve_judge`), its model id (what a judge cache is keyed by) and the sha256 of its weight shards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

from capeval.core.hub import resolve
from capeval.judges.expert_weights import merged_model_id
from capeval.judges.identity import content_sha256, folder_model_id
from capeval.judges.registration import JUDGE_FILES

INDEX_FILE = "model.safetensors.index.json"


def resolve_judge(ref: str, cache_dir=None) -> Path:
    """The local folder of judge ``ref`` (registered name, hub id[@revision] or folder) with every weight shard its
    index names (a single ``model.safetensors`` folder is taken as it is)."""
    local = Path(ref).expanduser()
    if local.is_dir():
        return resolve(ref)
    directory = resolve(ref, list(JUDGE_FILES), cache_dir=cache_dir)
    shards = sorted(set(json.loads((directory / INDEX_FILE).read_text())["weight_map"].values()))
    return resolve(ref, shards, cache_dir=cache_dir)


def judge_model_id(directory: Path) -> str:
    """The model id of a judge folder (what a judge cache is keyed by): ``adapter+base`` of an unchanged merged
    EXPERT folder, ``repo@commit`` of a hub snapshot, else ``local:`` and the digest of the folder's files
    (:mod:`capeval.judges.identity`); ``+tiny-random`` for capeval's test weights."""
    return merged_model_id(directory) or folder_model_id(directory)


def shard_sha256s(directory: Path) -> Dict[str, str]:
    """sha256 of each weight shard named by the folder's index (the name of the hub cache blob a shard links to,
    else hashed): the weights' content, which the index alone does not pin."""
    index = directory / INDEX_FILE
    names = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file() else []
    return {name: content_sha256(directory / name) for name in names}
