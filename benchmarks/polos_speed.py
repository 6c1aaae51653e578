"""Polos throughput on full-size random encoders (CLIP ViT-B/32 + RoBERTa-base), 5 references per sample,
and what de-duplication saves on a Pascal-50S-shaped workload (pairs of candidates sharing image and refs).

    python benchmarks/polos_speed.py --samples 64 --device cpu
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image


def build(tmp: Path, device: str, batch_size: int, dtype: str):
    from transformers import RobertaConfig, RobertaModel

    from capeval.bench import random_clip_dir
    from capeval.models.polos import _tiny_roberta, write_head
    from capeval.scorers.polos import PolosHead, PolosScorer

    random_clip_dir("ViT-B-32", tmp / "clip")
    _tiny_roberta(tmp / "roberta")  # tokenizer files; the model is replaced by a full-size RoBERTa-base
    config = RobertaConfig(vocab_size=len(json.loads((tmp / "roberta" / "vocab.json").read_text())),
                           max_position_embeddings=600, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    model = RobertaModel(config)
    model.save_pretrained(str(tmp / "roberta"))
    (tmp / "roberta" / "pytorch_model.bin").unlink(missing_ok=True)
    head = PolosHead(6144)
    write_head(tmp / "head", head.state_dict(), text_dim=768, clip_dim=512, hidden=(2304, 1152),
               clip_weights=str(tmp / "clip"), text_encoder=str(tmp / "roberta"))
    return PolosScorer(str(tmp / "head"), device=device, batch_size=batch_size, dtype=dtype)


def workload(samples: int, share: bool):
    """Pascal-50S shape: two candidates per image, both judged against the same 5 references."""
    rng = np.random.default_rng(0)
    n_images = samples // 2 if share else samples
    images = [Image.fromarray(rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)) for _ in range(n_images)]
    refs = [[f"reference {j} of image {i}: a person is walking a dog in the park" for j in range(5)]
            for i in range(n_images)]
    owner = [i // 2 if share else i for i in range(samples)]
    preds = [f"candidate {i}: a man with a dog outside on a sunny day" for i in range(samples)]
    return preds, [images[o] for o in owner], [refs[o] for o in owner]


def main():
    import os

    from capeval.scorers import polos as polos_module

    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as tmp:
        scorer = build(Path(tmp), args.device, args.batch_size, args.dtype)
        report = {"device": str(scorer.device), "dtype": args.dtype, "samples": args.samples, "refs_per_sample": 5}
        for name, share in (("distinct", False), ("pascal50s_shaped", True)):
            preds, images, refs = workload(args.samples, share)
            scorer.clip.reset_caches()
            scorer.text_cache = type(scorer.text_cache)(scorer.text_cache.namespace + name)
            polos_module.PolosScorer.score(scorer, preds[:2], images[:2], refs[:2])  # warm-up
            scorer.clip.reset_caches()
            scorer.text_cache = type(scorer.text_cache)(scorer.text_cache.namespace + name + "run")
            start = time.perf_counter()
            scorer.score(preds, images, refs)
            if scorer.device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            report[name] = {"samples_per_s": args.samples / seconds, "seconds": seconds,
                            "images_encoded": len(scorer.clip.image_cache),
                            "clip_texts_encoded": len(scorer.clip.text_cache),
                            "simcse_texts_encoded": len(scorer.text_cache)}
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
