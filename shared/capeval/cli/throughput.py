"""``capeval throughput``: CLIP-S throughput on a full-size random CLIP vs a naive
per-sample loop. Not ``capeval benchmark``, which measures how well a metric agrees with human judgments."""

from __future__ import annotations

from capeval.cli.arguments import add_json, print_result
from capeval.cli.options import device, dtype, positive_int


def configure(parser) -> None:
    parser.add_argument("--arch", default="ViT-B-32", help="open_clip architecture (random weights; default: "
                                                           "ViT-B-32)")
    parser.add_argument("--images", type=positive_int, default=20, help="distinct images (default: 20)")
    parser.add_argument("--captions", type=positive_int, default=200, help="(image, caption) pairs (default: 200)")
    parser.add_argument("--naive-samples", type=positive_int, default=50,
                        help="pairs timed in the naive loop (default: 50)")
    parser.add_argument("--device", type=device, default="auto",
                        help="auto (a GPU when there is one), cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="pairs per batch (default: 64)")
    parser.add_argument("--dtype", type=dtype, default="float32", help="model dtype: float32 (default), float16 or "
                                                                       "bfloat16")
    add_json(parser, "the timings")


def run(args) -> int:
    from capeval.bench import run_clip_bench

    print_result(args, run_clip_bench(arch=args.arch, n_images=args.images, n_captions=args.captions,
                                      device=args.device, batch_size=args.batch_size, dtype=args.dtype,
                                      naive_samples=args.naive_samples))
    return 0
