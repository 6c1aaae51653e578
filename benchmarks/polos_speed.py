"""Polos throughput on full-size random encoders (CLIP ViT-B/32 + RoBERTa-base), 5 references per sample, and what
image/text de-duplication saves on a Pascal-50S-shaped workload (two candidates per image, judged against the same
5 references), timed against a workload of the same size whose images and references are all distinct.

    python benchmarks/polos_speed.py --samples 256 --device cuda
"""

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image


def build(tmp: Path, device: str, batch_size: int, dtype: str):
    from transformers import RobertaConfig, RobertaModel

    from capeval.bench import random_clip_dir
    from capeval.polos.registration import _tiny_roberta, head_config, write_head
    from capeval.polos.scorer import PolosScorer, head_from_config

    random_clip_dir("ViT-B-32", tmp / "clip")  # open_clip ViT-B-32 (QuickGELU), random weights
    _tiny_roberta(tmp / "roberta")  # tokenizer files; the model is replaced by a full-size RoBERTa-base
    vocab = len(json.loads((tmp / "roberta" / "vocab.json").read_text()))
    torch.manual_seed(0)
    RobertaModel(RobertaConfig(vocab_size=vocab, max_position_embeddings=514, pad_token_id=1, bos_token_id=0,
                               eos_token_id=2)).save_pretrained(str(tmp / "roberta"))
    (tmp / "roberta" / "pytorch_model.bin").unlink(missing_ok=True)
    config = head_config(text_dim=768, clip_dim=512, clip_weights=str(tmp / "clip"), text_encoder=str(tmp / "roberta"))
    write_head(tmp / "head", head_from_config(config).state_dict(), config)
    return PolosScorer(str(tmp / "head"), device=device, batch_size=batch_size, dtype=dtype)


def pascal50s_workload(samples: int, *, shared: bool):
    """Pascal-50S shape (``shared``): pairs of candidates for one image, both judged against the same 5 references.
    Unshared: the same sizes with every image and reference distinct, i.e. what must be encoded without
    de-duplication."""
    rng = np.random.default_rng(0)
    owners = samples // 2 if shared else samples
    images = [Image.fromarray(rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)) for _ in range(owners)]
    refs = [[f"reference {j} of image {i}: a person is walking a dog in the park" for j in range(5)]
            for i in range(owners)]
    owner = [i // 2 if shared else i for i in range(samples)]
    preds = [f"candidate {i}: a man with a dog outside on a sunny day" for i in range(samples)]
    return preds, [images[o] for o in owner], [refs[o] for o in owner]


def timed(scorer, preds, images, refs) -> float:
    sync = torch.cuda.synchronize if scorer.device.type == "cuda" else (lambda: None)
    scorer.reset_caches()
    sync()
    start = time.perf_counter()
    scorer.score(preds, images, refs)
    sync()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        scorer = build(Path(tmp), args.device, args.batch_size, args.dtype)
        scorer.score(*pascal50s_workload(8, shared=False))  # warm-up
        report = {"device": str(scorer.device), "dtype": args.dtype, "batch_size": args.batch_size,
                  "samples": args.samples, "refs_per_sample": 5}
        for name, shared in (("pascal50s_shaped", True), ("all_distinct", False)):
            preds, images, refs = pascal50s_workload(args.samples, shared=shared)
            seconds = timed(scorer, preds, images, refs)
            report[name] = {"seconds": seconds, "samples_per_s": args.samples / seconds,
                            "images_encoded": len(scorer.clip.image_cache),
                            "clip_texts_encoded": len(scorer.clip.text_cache),
                            "simcse_texts_encoded": len(scorer.text_cache)}
        report["deduplication_saving"] = 1 - report["pascal50s_shaped"]["seconds"] / report["all_distinct"]["seconds"]
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
