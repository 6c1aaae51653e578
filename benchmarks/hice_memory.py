"""HICE-S memory on a long run: the in-memory caches stay within their bounds while distinct images stream by.

Usage: python benchmarks/hice_memory.py [--images 100] [--chunk 25] [--width 640] [--height 480]
       [--points-per-side 4] [--max-regions 16] [--box-nms-thresh 1.0] [--max-cached-images N]
       [--max-cached-masks-mb MB]
       [--phrase-parser spacy|factual] [--max-cached-captions N]
Runs on the CPU with the tiny random models of :func:`capeval.testing.populate_tiny_hub_cache` (written to a
temporary hub cache, offline). SAM's quality thresholds are set to 0 and its box NMS off so the random segmenter
keeps ``--max-regions`` regions per image, each a 640×480 boolean mask (300 KiB). On a 2-core CPU an image takes
~3 s (mostly SAM's mask post-processing), so 100 images take ~5 minutes. After each chunk of distinct random images
(one distinct caption each) it prints the SAM mask cache (images, MiB, evictions, against its bounds), the phrase
cache of the FACTUAL parser (the spaCy parser keeps none), the Alpha-CLIP embedding caches (entries) and the process
RSS (current and peak). ``all_masks_MiB`` is the size of every mask SAM produced so far, what an unbounded cache
would hold. ``--max-cached-masks-mb`` / ``--max-cached-images`` default to the library defaults
(``MAX_CACHED_MASKS_BYTES``, ``MAX_CACHED_IMAGES``); a huge value shows the unbounded growth for comparison.
"""

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time


def rss_mib() -> float:
    """Current resident set size of this process, MiB."""
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2 ** 20
    except ImportError:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def peak_rss_mib() -> float:
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return kib / 2 ** 20 if sys.platform == "darwin" else kib / 2 ** 10


NOUNS = ["dog", "cat", "man", "woman", "horse", "car", "bird", "boat", "tree", "child", "bench", "kite"]
COLOURS = ["red", "brown", "white", "black", "green", "small", "large", "old"]
PLACES = ["grass", "beach", "street", "field", "table", "snow", "water", "road"]


def caption(i: int) -> str:
    """A distinct caption for each ``i`` below 6144: noun, colour, place and count picked from ``i``'s digits."""
    noun, colour, place = NOUNS[i % len(NOUNS)], COLOURS[(i // 12) % 8], PLACES[(i // 96) % 8]
    return f"{i // 768 + 1} {colour} {noun}s on the {place}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--chunk", type=int, default=25)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--points-per-side", type=int, default=4)
    parser.add_argument("--max-regions", type=int, default=16)
    parser.add_argument("--box-nms-thresh", type=float, default=1.0,
                        help="1.0 keeps every mask (the random segmenter's masks overlap; SAM's 0.7 keeps ~1)")
    parser.add_argument("--max-cached-images", type=int, default=None)
    parser.add_argument("--max-cached-masks-mb", type=float, default=None)
    parser.add_argument("--phrase-parser", default="spacy", choices=["spacy", "factual"])
    parser.add_argument("--max-cached-captions", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()

    hub = tempfile.mkdtemp(prefix="capeval-tiny-hub-")
    try:
        run(args, hub)
    finally:
        shutil.rmtree(hub, ignore_errors=True)


def run(args, hub: str) -> None:
    os.environ.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=hub, TRANSFORMERS_OFFLINE="1",
                      TOKENIZERS_PARALLELISM="false")
    import numpy as np
    import torch
    from PIL import Image

    from capeval.core.scoring import load_scorer
    from capeval.testing import populate_tiny_hub_cache

    if args.threads:
        torch.set_num_threads(args.threads)
    populate_tiny_hub_cache(hub)
    options = {}
    if args.max_cached_images is not None:
        options["max_cached_images"] = args.max_cached_images
    if args.max_cached_masks_mb is not None:
        options["max_cached_masks_bytes"] = int(args.max_cached_masks_mb * 2 ** 20)
    if args.max_cached_captions is not None:
        options["phrase_options"] = {"max_cached_captions": args.max_cached_captions}
    scorer = load_scorer("hice_s", device="cpu", phrase_parser=args.phrase_parser,
                         region_settings={"points_per_side": args.points_per_side, "pred_iou_thresh": 0.0,
                                          "stability_score_thresh": 0.0, "box_nms_thresh": args.box_nms_thresh,
                                          "max_regions": args.max_regions},
                         **options)
    masks, graphs = scorer.regions.cache, getattr(getattr(scorer.phrases, "parser", None), "memory", None)  # spaCy: no cache
    segmented = {"images": 0, "regions": 0, "bytes": 0}  # everything SAM produced: what an unbounded cache holds
    segment = scorer.regions._segment

    def counted(image):
        found = segment(image)
        segmented["images"] += 1
        segmented["regions"] += len(found)
        segmented["bytes"] += sum(int(m.nbytes) for m in found)
        return found

    scorer.regions._segment = counted
    backbone = scorer.backbone
    print(f"images {args.images} of {args.width}x{args.height}, chunks of {args.chunk}, parser "
          f"{args.phrase_parser}, torch threads {torch.get_num_threads()}")
    print(f"mask cache bound: {masks.max_entries} images, {masks.max_bytes / 2 ** 20:.0f} MiB; phrase cache bound: "
          + (f"{graphs.max_entries} captions" if graphs is not None else "none kept (spaCy parses on each call)"))
    print(f"after loading: rss {rss_mib():.0f} MiB (peak {peak_rss_mib():.0f} MiB)")
    header = ("scored", "segmented", "regions", "all_masks_MiB", "cached_imgs", "cached_MiB", "evicted", "phrases",
              "img_emb", "region_emb", "text_emb", "rss_MiB", "peak_MiB", "seconds")
    print(" ".join(f"{h:>13}" for h in header))
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for first in range(0, args.images, args.chunk):
        indices = range(first, min(first + args.chunk, args.images))
        images = [Image.fromarray(rng.integers(0, 256, (args.height, args.width, 3), dtype=np.uint8))
                  for _ in indices]
        result = scorer.score([caption(i) for i in indices], images)
        assert len(result["hice_s_per_sample"]) == len(images)
        del images, result
        row = (indices[-1] + 1, segmented["images"], segmented["regions"], f"{segmented['bytes'] / 2 ** 20:.1f}",
               len(masks), f"{masks.nbytes / 2 ** 20:.1f}", masks.evictions,
               len(graphs) if graphs is not None else "-", len(backbone.image_cache), len(backbone.region_cache),
               len(backbone.text_cache), f"{rss_mib():.0f}", f"{peak_rss_mib():.0f}",
               f"{time.perf_counter() - start:.0f}")
        print(" ".join(f"{str(v):>13}" for v in row), flush=True)
        assert len(masks) <= masks.max_entries and masks.nbytes <= masks.max_bytes
        assert graphs is None or len(graphs) <= graphs.max_entries


if __name__ == "__main__":
    main()
