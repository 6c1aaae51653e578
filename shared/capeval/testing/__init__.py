"""Tiny random models for offline tests and demos, in the Hugging Face hub-cache layout (never product code paths).

    populate_tiny_hub_cache(dir)  # then HF_HUB_CACHE=dir HF_HUB_OFFLINE=1

writes ``models--org--name/snapshots/<revision>/<files>`` and ``refs/main`` for every registered weight,
so every metric runs offline through its real loading code. Every snapshot holds the marker file
:data:`capeval.core.constants.TINY_MARKER_FILE` (loading one warns, and results say ``tiny_random_weights``), and
the default Hugging Face cache is refused unless ``force=True``: tiny weights are filed under the real repo ids and
commits, so they would shadow real ones there.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional

from capeval.core.constants import HALF_PREPROCESS, TINY_MARKER_FILE
from capeval.core.hub import WeightSpec, registered_weights
from capeval.testing.tiny_blip2 import write_tiny_blip2
from capeval.testing.tiny_clip import tiny_clip_factory
from capeval.testing.tiny_detail import (write_tiny_punkt, write_tiny_spice_synonyms, write_tiny_tagger,
                                         write_tiny_wordnet_package)
from capeval.testing.tiny_expert import write_tiny_expert_adapter
from capeval.testing.tiny_hice_s import (
    tiny_alpha_clip_factory,
    tiny_factual_factory,
    tiny_mobile_sam_factory,
    tiny_sam_factory,
)
from capeval.testing.tiny_image_roundtrip import write_tiny_dinov2, write_tiny_sd_turbo
from capeval.testing.tiny_judges import write_tiny_llava
from capeval.testing.tiny_long_clip import tiny_long_clip_factory
from capeval.testing.tiny_polos import tiny_polos_head, tiny_roberta
from capeval.testing.tiny_text import tiny_mpnet
from capeval.testing.tiny_vcrscore import tiny_regressor, write_tiny_detr, write_tiny_vilt, write_tiny_yolos

# fast settings of the slow tiny pipelines for tests (options the scorers declare anyway)
FAST_TINY_OPTIONS = {
    "hice_s": {"phrase_parser": "spacy", "region_settings": {"points_per_side": 4, "pred_iou_thresh": 0.0,
                                                             "stability_score_thresh": 0.0, "max_regions": 3}},
    "image_roundtrip": {"steps": 1, "height": 32, "width": 32, "use_image_cache": False},
}
_SHA = re.compile(r"^[0-9a-f]{40}$")

# A tiny random stand-in for every registered weight, by weight name: ``builder(out_dir)`` writes the weights'
# files in their real layout (a test checks that every registered weight has one).
TINY_BUILDERS: Dict[str, Callable[[Path], None]] = {
    "openai-clip-vit-b-32": tiny_clip_factory(),
    "openai-clip-vit-l-14": tiny_clip_factory(patch_size=14, seed=1),
    "pacs-clip-vit-b-32": tiny_clip_factory(seed=2),
    "pacs-openclip-vit-l-14": tiny_clip_factory(preprocess_cfg=HALF_PREPROCESS, quick_gelu=False, patch_size=14,
                                                seed=3),
    "openai-clip-vit-b-16": tiny_clip_factory(patch_size=16, seed=4),
    "long-clip-b": tiny_long_clip_factory(patch_size=16, seed=30),
    "long-clip-l": tiny_long_clip_factory(patch_size=14, seed=31),
    "openai-clip-vit-l-14-336": tiny_clip_factory(patch_size=14, image_size=336, seed=5),
    "mcip-vit-l-14-336": tiny_clip_factory(patch_size=14, image_size=336, seed=7),
    "laion-clip-vit-g-14": tiny_clip_factory(quick_gelu=False, patch_size=14, seed=8),
    "simcse-roberta-base": tiny_roberta,
    "polos": tiny_polos_head,
    "all-mpnet-base-v2": tiny_mpnet,
    "blip2-itm-vit-g": write_tiny_blip2,
    "alpha-clip-vit-b-16": tiny_alpha_clip_factory(patch_size=16, image_size=224, seed=10),
    "alpha-clip-vit-l-14": tiny_alpha_clip_factory(patch_size=14, image_size=224, seed=11),
    "alpha-clip-vit-l-14-336": tiny_alpha_clip_factory(patch_size=14, image_size=336, seed=12),
    "sam-vit-b": tiny_sam_factory(seed=20),
    "sam-vit-l": tiny_sam_factory(seed=20),
    "sam-vit-h": tiny_sam_factory(seed=20),
    "mobile-sam": tiny_mobile_sam_factory(seed=21),
    "flan-t5-base-vg-factual-sg": tiny_factual_factory(),
    "vcrscore-gbr": tiny_regressor,
    "vilt-b32-finetuned-coco": write_tiny_vilt,
    "detr-resnet-50": write_tiny_detr,
    "yolos-small": write_tiny_yolos,
    "sd-turbo": write_tiny_sd_turbo,
    "dinov2-small": write_tiny_dinov2,
    "llava-1.5-13b-hf": write_tiny_llava,
    "expert-llava-13b-lora": write_tiny_expert_adapter,
    "nltk-punkt-tab": write_tiny_punkt,
    "nltk-averaged-perceptron-tagger-eng": write_tiny_tagger,
    "nltk-wordnet": write_tiny_wordnet_package,
    "factual-spice-synonyms": write_tiny_spice_synonyms,
}


def snapshot_revision(spec: WeightSpec) -> str:
    """The commit a cache entry is filed under: the pinned one, or a stable stand-in for branch names."""
    if _SHA.match(spec.revision):
        return spec.revision
    return hashlib.sha1(f"capeval-tiny:{spec.repo_id}@{spec.revision}".encode()).hexdigest()


def default_hub_cache() -> Path:
    """The hub cache Hugging Face libraries use when none is configured: ``$HF_HOME/hub`` or
    ``~/.cache/huggingface/hub``."""
    home = os.environ.get("HF_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".cache" / "huggingface") / "hub"


def populate_tiny_hub_cache(cache_dir: os.PathLike, names: Optional[Iterable[str]] = None, *,
                            force: bool = False) -> Path:
    """Write a tiny random model for every registered weight (or only ``names``) into ``cache_dir``, each snapshot
    marked with :data:`TINY_MARKER_FILE`. The default hub cache (:func:`default_hub_cache`) is refused unless
    ``force=True``."""
    cache_dir = Path(cache_dir)
    if not force and cache_dir.expanduser().resolve() == default_hub_cache().resolve():
        raise ValueError(f"refusing to write tiny random weights into the default Hugging Face cache {cache_dir}: "
                         "they would be loaded in place of the real weights. Use a dedicated directory (and "
                         "HF_HUB_CACHE=<it>), or pass force=True")
    weights = registered_weights()
    for name in names or weights:
        spec = weights[name]
        builder = TINY_BUILDERS.get(name)
        if builder is None:
            raise KeyError(f"no tiny builder for registered weight {name!r}: add one to capeval.testing.TINY_BUILDERS")
        repo_dir = cache_dir / ("models--" + spec.repo_id.replace("/", "--"))
        revision = snapshot_revision(spec)
        snapshot = repo_dir / "snapshots" / revision
        if snapshot.is_dir() and all((snapshot / f).exists() for f in spec.files):
            (snapshot / TINY_MARKER_FILE).touch()  # a cache written before markers existed
            continue
        with tempfile.TemporaryDirectory(dir=cache_dir if cache_dir.exists() else None) as tmp:
            builder(Path(tmp))
            missing = [f for f in spec.files if not (Path(tmp) / f).exists()]
            if missing:
                raise RuntimeError(f"tiny factory of {name!r} did not write {missing}")
            (Path(tmp) / TINY_MARKER_FILE).write_text("tiny random weights written by capeval.testing: scores from "
                                                      "them mean nothing\n")
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(snapshot, ignore_errors=True)
            shutil.copytree(tmp, snapshot)
        (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
        ref = "main" if _SHA.match(spec.revision) else spec.revision
        (repo_dir / "refs" / ref).write_text(revision)
    return cache_dir
