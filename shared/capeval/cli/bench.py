"""``capeval bench``: CLIP-S throughput on a full-size random CLIP vs a naive per-sample loop."""

from __future__ import annotations

import json

from capeval.cli.options import positive_int


def configure(parser) -> None:
    parser.add_argument("--arch", default="ViT-B-32", help="open_clip architecture (random weights)")
    parser.add_argument("--images", type=positive_int, default=20, help="distinct images")
    parser.add_argument("--captions", type=positive_int, default=200, help="(image, caption) pairs")
    parser.add_argument("--naive-samples", type=positive_int, default=50, help="pairs timed in the naive loop")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--dtype", default="float32")


def run(args) -> int:
    from capeval.bench import run_clip_bench

    print(json.dumps(run_clip_bench(arch=args.arch, n_images=args.images, n_captions=args.captions,
                                    device=args.device, batch_size=args.batch_size, dtype=args.dtype,
                                    naive_samples=args.naive_samples), indent=2))
    return 0
