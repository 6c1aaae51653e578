"""HICE-S speed on this machine with full-size random weights (Alpha-CLIP ViT-L/14 + a SAM segmenter).

Usage: python benchmarks/hice_speed.py IMAGE [IMAGE ...] [--segmenter vit_b|vit_l|vit_h|mobile_sam]
       [--points-per-side 32] [--max-regions 32] [--encoder-only]
Random SAM weights pass no quality threshold, so the thresholds are set to 0 and ``--max-regions`` caps the
regions; the timing split (segmentation / parsing / encoding / scoring) is printed per image, with the part of
segmentation spent in the SAM image encoder (``segmentation_image_encoder``; ViT-B/L/H or MobileSAM's TinyViT)
and the rest (prompt decoding of the point grid, mask post-processing, NMS) as ``segmentation_decoding``.
``--encoder-only`` times only the SAM image encoder forward on each image (1024-px input) and skips Alpha-CLIP.
Wall seconds are printed with the process CPU seconds (``cpu_*``, summed over threads), which other jobs on a
shared machine disturb less.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch


def write_random_weights(root: Path, segmenter: str = "vit_b", alpha_clip: bool = True):
    from capeval.backbones.sam import SAM_ARCHITECTURES, build_sam, save_sam

    torch.manual_seed(0)
    if alpha_clip:
        import open_clip

        from capeval.backbones.alpha_clip import add_alpha_channel
        from capeval.backbones.clip import save_open_clip
        from capeval.clip_s.registration import OPENAI_PREPROCESS

        model = add_alpha_channel(open_clip.create_model("ViT-L-14-quickgelu", pretrained=None))
        cfg = open_clip.get_model_config("ViT-L-14-quickgelu")
        save_open_clip(root / "alpha", model.state_dict(), {**cfg, "quick_gelu": True}, OPENAI_PREPROCESS)
    config = SAM_ARCHITECTURES[segmenter]
    save_sam(root / "sam", build_sam(config).state_dict(), config)


def time_image_encoder(sam_model, wall: dict, cpu: dict):
    """Accumulate the wall and CPU seconds spent in ``sam_model.image_encoder`` under ``"image_encoder"``."""
    encoder = sam_model.image_encoder
    forward = encoder.forward

    def timed(*args, **kwargs):
        start, cpu_start = time.perf_counter(), time.process_time()
        try:
            return forward(*args, **kwargs)
        finally:
            wall["image_encoder"] = wall.get("image_encoder", 0.0) + time.perf_counter() - start
            cpu["image_encoder"] = cpu.get("image_encoder", 0.0) + time.process_time() - cpu_start

    encoder.forward = timed


def time_stages_cpu(scorer, cpu: dict):
    """Also record the process CPU seconds (all threads) of each scorer stage: less sensitive than wall time to
    other jobs on a shared machine."""
    timed = scorer._timed

    def with_cpu(stage, fn, *args):
        start = time.process_time()
        try:
            return timed(stage, fn, *args)
        finally:
            cpu[stage] = cpu.get(stage, 0.0) + time.process_time() - start

    scorer._timed = with_cpu


def encoder_only(args, root: Path):
    import numpy as np
    from PIL import Image
    from segment_anything import SamPredictor

    from capeval.backbones.sam import load_sam

    sam, _ = load_sam(str(root / "sam"))
    predictor = SamPredictor(sam)
    rows = []
    for image in args.images:
        array = np.asarray(Image.open(image).convert("RGB"))
        start, cpu_start = time.perf_counter(), time.process_time()
        with torch.inference_mode():
            predictor.set_image(array)
        rows.append({"image": Path(image).name, "encoder_seconds": time.perf_counter() - start,
                     "encoder_cpu_seconds": time.process_time() - cpu_start,
                     "embedding": "x".join(map(str, predictor.features.shape))})
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("images", nargs="+")
    parser.add_argument("--segmenter", default="vit_b", choices=["vit_b", "vit_l", "vit_h", "mobile_sam"])
    parser.add_argument("--points-per-side", type=int, default=32)
    parser.add_argument("--max-regions", type=int, default=32)
    parser.add_argument("--phrase-parser", default="spacy")
    parser.add_argument("--encoder-only", action="store_true")
    args = parser.parse_args()
    from capeval.hice_s.scorer import HiceScorer

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_random_weights(root, args.segmenter, alpha_clip=not args.encoder_only)
        info = {"segmenter": args.segmenter, "threads": torch.get_num_threads()}
        if args.encoder_only:
            print(json.dumps({**info, "per_image": encoder_only(args, root)}, indent=1))
            return
        start = time.perf_counter()
        scorer = HiceScorer(str(root / "alpha"), sam=str(root / "sam"), phrase_parser=args.phrase_parser,
                            device="cpu", batch_size=32,
                            region_settings={"points_per_side": args.points_per_side, "pred_iou_thresh": 0.0,
                                             "stability_score_thresh": 0.0, "max_regions": args.max_regions})
        load = time.perf_counter() - start
        sam_wall, cpu = {}, {}
        time_image_encoder(scorer.regions.generator.predictor.model, sam_wall, cpu)
        time_stages_cpu(scorer, cpu)
        rows = []
        for image in args.images:
            sam_wall.clear()
            cpu.clear()
            start, cpu_start = time.perf_counter(), time.process_time()
            result = scorer.score(["a cat sleeping on a blanket next to another cat"], [image])
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
            timings = dict(result["timings"])
            timings["segmentation_image_encoder"] = sam_wall.get("image_encoder", 0.0)
            timings["segmentation_decoding"] = timings["segmentation"] - timings["segmentation_image_encoder"]
            cpu["segmentation_image_encoder"] = cpu.pop("image_encoder", 0.0)
            cpu["segmentation_decoding"] = cpu.get("segmentation", 0.0) - cpu["segmentation_image_encoder"]
            rows.append({"image": Path(image).name, "seconds": seconds, "cpu_seconds": cpu_seconds,
                         "regions": len(scorer.regions.masks(scorer_image(image))), "timings": timings,
                         "cpu_timings": dict(cpu)})
        print(json.dumps({**info, "load_seconds": load, "per_image": rows}, indent=1))


def scorer_image(path):
    from capeval.core.inputs import load_images

    return load_images([path])[0]


if __name__ == "__main__":
    main()
