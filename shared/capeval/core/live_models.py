"""``LiveModels``: one loaded model per weights and settings alive in a process, shared by every consumer holding it
(the FACTUAL parser of HICE-S, CAPTURE and the SPICE variants; the all-mpnet-base-v2 of MPNetScore, CAPTURE and
Soft-SPICE)."""

from __future__ import annotations

import json
import threading
import weakref
from typing import Callable, Mapping, TypeVar

from capeval.core.cache_keys import Weights, weights_identity

Model = TypeVar("Model")


class LiveModels:
    """Models by the content of their weights (:func:`~capeval.core.cache_keys.weights_identity`: a folder rewritten
    in place is another model) and their settings. A model lives while a consumer holds it (weak values), so the
    models kept are bounded by the consumers alive."""

    def __init__(self):
        self._live: "weakref.WeakValueDictionary[tuple, object]" = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def get(self, directory: Weights, settings: Mapping, build: Callable[[], Model]) -> Model:
        """The live model of the weights in ``directory`` and ``settings`` (JSON values or objects with a
        deterministic ``str``), else ``build()``'s, kept."""
        key = (str(directory), json.dumps(weights_identity(directory), sort_keys=True, default=str),
               json.dumps(dict(settings), sort_keys=True, default=str))
        with self._lock:
            model = self._live.get(key)
            if model is None:
                model = self._live[key] = build()
            return model
