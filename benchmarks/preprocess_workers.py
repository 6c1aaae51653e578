"""Image preprocessing throughput of ``ClipBackbone.encode_images`` with the official CLIP preprocessing run by
in-process threads (the default) or by ``preprocess_workers`` processes, on 640×480 JPEG files decoded once.

The model is a tiny random CLIP (224-pixel input, one layer per tower) so the figures are those of hashing,
preprocessing and batching, not of a model; each setting must give the same features as the default (checked).
On CUDA, ``preprocess_workers`` also pins each batch and copies it on a side stream while the previous one is encoded.

    python benchmarks/preprocess_workers.py --images 128 --workers 1 2 4
"""

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image


def jpeg_files(tmp: Path, count: int):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        small = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
        path = tmp / f"{i}.jpg"
        Image.fromarray(small).resize((640, 480), Image.BICUBIC).save(path, quality=90)
        paths.append(path)
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4], help="process counts to time")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    from capeval.backbones.clip import ClipBackbone
    from capeval.core.inputs import load_images
    from capeval.testing.tiny_clip import tiny_clip_factory

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tiny_clip_factory()(tmp / "clip")
        paths = jpeg_files(tmp, args.images)
        start = time.perf_counter()
        images = load_images(paths)  # decoding: capeval's input validation, in this process
        decode_seconds = time.perf_counter() - start
        settings = {"threads (default)": 0, **{f"{n} processes": n for n in args.workers}}
        backbones = {name: ClipBackbone(str(tmp / "clip"), device=args.device, preprocess_workers=n)
                     for name, n in settings.items()}
        expected = None
        for backbone in backbones.values():  # warm-up (starts the worker processes) and the equality check
            features = backbone.encode_images(images, show_progress=False)
            expected = features if expected is None else expected
            assert torch.allclose(features, expected, atol=1e-6, rtol=0), "preprocess_workers changed the features"
        seconds = {name: [] for name in backbones}
        for _ in range(args.repeats):  # interleaved
            for name, backbone in backbones.items():
                backbone.reset_caches()
                start = time.perf_counter()
                backbone.encode_images(images, show_progress=False)
                seconds[name].append(time.perf_counter() - start)
        report = {"images": args.images, "size": "640x480 JPEG", "device": args.device, "cpus": os.cpu_count(),
                  "torch_threads": torch.get_num_threads(),
                  "decode_images_per_s": args.images / decode_seconds,
                  "preprocess_images_per_s": {name: args.images / statistics.median(values)
                                              for name, values in seconds.items()},
                  "seconds_all": seconds}
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
