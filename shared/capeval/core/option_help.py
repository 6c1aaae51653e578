"""The help of the scorer options that several scorers share (pure Python: ``capeval --help`` may read it without
importing numpy or torch). A scorer's own options get their help in its ``registration.py`` (``option_help=``); the
names and defaults of every option are its factory's signature (:meth:`capeval.core.scoring.ScorerSpec.option_list`)."""

from __future__ import annotations

OPTION_HELP = {
    "weights": "the scorer's weights: a registry name (`capeval weights`), a hub id or a local directory",
    "device": "'auto' (CUDA when available), 'cpu', 'cuda', 'cuda:N' or 'mps' (CPU-only metrics ignore it)",
    "dtype": "model dtype: float32 (default), float16 or bfloat16 (CPU-only metrics ignore it)",
    "precision": "None: capeval's numerics (dtype); 'official': the official implementation's own numerics "
                 "(e.g. OpenAI's mixed fp16 CLIP), those of the published numbers; leave dtype unset with it",
    "batch_size": "inputs per forward pass (values do not depend on it)",
    "cache_dir": "where weights are looked up and downloaded (default: the Hugging Face cache)",
    "persist_dir": "folder where computed features are kept between runs (default: none; each cache's files in at most "
                   "1 GiB for embeddings, 256 MiB for parses, least recently used removed first)",
    "cache_bytes": "bound of each in-memory feature cache, in bytes",
    "preprocess_workers": "CLIP's official image preprocessing in that many worker processes (same pixels)",
    "clip_backbone": "a loaded ClipBackbone of the scorer's CLIP weights to share with other scorers",
    "coco_backend": "'python' (the default: the PTB tokenizer and METEOR 1.5 in Python, equal to pycocoevalcap's "
                    "jars, no Java) or 'java' (pycocoevalcap's jars, for cross-checking)",
}
