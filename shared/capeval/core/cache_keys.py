"""The one key of every feature cache (embeddings, masks, detections, scene graphs, generated images).

A cache's :class:`~capeval.core.caches.CacheNamespace` names what its values are a function of: the content
identity of the weights that computed them (as the provenance describes them: a hub snapshot's ``repo@commit``, the
upstream source and sha256 of converted weights, or the sha256 of a local folder's files, so a folder rewritten in
place gets another key), the forward's numerics (dtype, precision mode, forward tags), the preprocessing, and the
capeval version. Persisted features live under ``persist_dir/<kind>-<digest>``, beside a ``namespace.json`` with the
description.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Sequence, Union

from capeval.core.provenance import describe_weights
from capeval.core.caches import CacheNamespace
from capeval.core.version import __version__

Weights = Union[str, os.PathLike]


def cache_namespace(kind: str, weights: Union[Weights, Sequence[Weights]], **numerics) -> CacheNamespace:
    """The namespace of ``kind`` values computed by the weights in directory ``weights`` (or several directories;
    none for values of code alone) under ``numerics``: every setting that changes a value (dtype, precision mode,
    forward tags, preprocessing, ...), JSON values or objects with a deterministic ``str`` (e.g. a dtype)."""
    directories = [weights] if isinstance(weights, (str, os.PathLike)) else list(weights)
    description = json.dumps({"kind": kind, "capeval": __version__, "weights": list(map(weights_identity, directories)),
                              "numerics": numerics}, sort_keys=True, default=str)
    return CacheNamespace(kind, hashlib.sha256(description.encode()).hexdigest(), description)


def weights_identity(directory: Weights) -> dict:
    """The content identity of the weights in ``directory`` (its provenance description without the name it was asked
    by): what a cache, or a model shared within a process, is keyed by, so that a folder rewritten in place is
    another model."""
    identity = describe_weights("", directory)
    del identity["ref"]  # the name it was asked by changes nothing
    return identity
