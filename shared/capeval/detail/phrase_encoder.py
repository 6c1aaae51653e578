"""The all-mpnet-base-v2 phrase encoder CAPTURE's soft stage and Soft-SPICE share: one
:class:`~capeval.text.mpnet.MPNetEncoder` per weights and settings alive in a process (one model load, one
embedding cache), as :func:`capeval.backbones.scene_graph_parser.shared_scene_graph_parser` shares the parser."""

from __future__ import annotations

import threading
import weakref
from pathlib import Path

from capeval.core.caches import DEFAULT_CACHE_BYTES

ENCODER_WEIGHTS = "all-mpnet-base-v2"

_LIVE: "weakref.WeakValueDictionary[tuple, object]" = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


def shared_mpnet_encoder(weights: str = ENCODER_WEIGHTS, *, device="auto", dtype=None, batch_size: int = 64,
                         cache_dir=None, persist_dir=None, cache_bytes: int = DEFAULT_CACHE_BYTES):
    """The :class:`~capeval.text.mpnet.MPNetEncoder` of these weights (the folder they resolve to), device, dtype and
    cache settings that is alive in this process, else a new one. It lives while a consumer holds it, so the
    encoders kept are bounded by the scorers alive."""
    from capeval.core.device import resolve_device, resolve_dtype
    from capeval.core.hub import get_spec, resolve
    from capeval.text.mpnet import MPNetEncoder

    files = list(get_spec(weights).files) if weights == ENCODER_WEIGHTS else None
    directory = resolve(weights, files, cache_dir=cache_dir).resolve()
    key = (str(directory), str(resolve_device(device)), str(resolve_dtype(dtype)), batch_size,
           str(Path(persist_dir).resolve()) if persist_dir else None, cache_bytes)
    with _LIVE_LOCK:
        encoder = _LIVE.get(key)
        if encoder is None:
            encoder = MPNetEncoder(weights, device=device, dtype=dtype, batch_size=batch_size, cache_dir=cache_dir,
                                   persist_dir=persist_dir, cache_bytes=cache_bytes)
            _LIVE[key] = encoder
        return encoder
