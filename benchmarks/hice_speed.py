"""HICE-S speed on this machine with full-size random weights (Alpha-CLIP ViT-L/14 + SAM ViT-B).

Usage: python benchmarks/hice_speed.py IMAGE [IMAGE ...] [--points-per-side 32] [--max-regions 32]
Random SAM weights pass no quality threshold, so the thresholds are set to 0 and ``--max-regions`` caps the
regions; the timing split (segmentation / parsing / encoding / scoring) is printed per image.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch


def write_random_weights(root: Path):
    import open_clip

    from capeval.alpha_clip import add_alpha_channel
    from capeval.clip import save_open_clip
    from capeval.models.clip import OPENAI_PREPROCESS
    from capeval.regions import SAM_ARCHITECTURES, build_sam, save_sam

    torch.manual_seed(0)
    model = add_alpha_channel(open_clip.create_model("ViT-L-14-quickgelu", pretrained=None))
    cfg = open_clip.get_model_config("ViT-L-14-quickgelu")
    save_open_clip(root / "alpha", model.state_dict(), {**cfg, "quick_gelu": True}, OPENAI_PREPROCESS)
    save_sam(root / "sam", build_sam(SAM_ARCHITECTURES["vit_b"]).state_dict(), SAM_ARCHITECTURES["vit_b"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("images", nargs="+")
    parser.add_argument("--points-per-side", type=int, default=32)
    parser.add_argument("--max-regions", type=int, default=32)
    parser.add_argument("--phrase-parser", default="spacy")
    args = parser.parse_args()
    from capeval.scorers.hice import HiceScorer

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_random_weights(root)
        start = time.perf_counter()
        scorer = HiceScorer(str(root / "alpha"), sam=str(root / "sam"), phrase_parser=args.phrase_parser,
                            device="cpu", batch_size=32,
                            region_settings={"points_per_side": args.points_per_side, "pred_iou_thresh": 0.0,
                                             "stability_score_thresh": 0.0, "max_regions": args.max_regions})
        load = time.perf_counter() - start
        rows = []
        for image in args.images:
            start = time.perf_counter()
            result = scorer.score(["a cat sleeping on a blanket next to another cat"], [image])
            rows.append({"image": Path(image).name, "seconds": time.perf_counter() - start,
                         "timings": result["timings"]})
        print(json.dumps({"load_seconds": load, "threads": torch.get_num_threads(), "per_image": rows}, indent=1))


if __name__ == "__main__":
    main()
