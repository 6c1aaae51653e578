"""Segment-everything regions: filtering, the safe SAM converter, cached tiny-SAM segmentation."""

import numpy as np
import pytest
import torch

from capeval.core.convert import convert
from capeval.backbones.sam import (SAM_ARCHITECTURES, RegionSettings, SegmentEverything, build_sam, load_sam,
                             select_regions)


def record(area, iou, x):
    mask = np.zeros((10, 10), bool)
    mask.flat[x:x + area] = True
    return {"area": area, "predicted_iou": iou, "bbox": [x, 0, 1, 1], "segmentation": mask}


def test_select_regions_filters_by_area_caps_and_orders_largest_first():
    found = [record(5, 0.9, 0), record(30, 0.8, 1), record(30, 0.95, 2), record(1, 0.99, 3), record(60, 0.1, 4)]
    kept = select_regions(found, 100, RegionSettings(min_area=0.05, max_regions=3))
    assert [int(m.sum()) for m in kept] == [60, 30, 30]
    all_kept = select_regions(found, 100, RegionSettings())
    assert [int(m.sum()) for m in all_kept] == [60, 30, 30, 5, 1]
    # among equal areas, the higher predicted IoU comes first
    by_iou = select_regions([record(30, 0.8, 1), record(30, 0.95, 2)], 100, RegionSettings())
    assert [int(np.flatnonzero(r)[0]) for r in by_iou] == [2, 1]
    assert select_regions([], 100, RegionSettings()) == []


def test_official_sam_checkpoint_converts_with_weights_only(tmp_path):
    torch.manual_seed(0)
    sam = build_sam(SAM_ARCHITECTURES["vit_b"])
    state = sam.state_dict()
    torch.save(state, tmp_path / "sam_vit_b_01ec64.pth")
    out = convert("sam", tmp_path / "sam_vit_b_01ec64.pth", tmp_path / "sam-vit-b")
    loaded, _ = load_sam(str(out))
    for key in ("image_encoder.patch_embed.proj.weight", "mask_decoder.iou_prediction_head.layers.2.weight"):
        torch.testing.assert_close(loaded.state_dict()[key], state[key])
    import json

    config = json.loads((out / "sam_config.json").read_text())
    assert config["encoder_global_attn_indexes"] == [2, 5, 8, 11] and config["encoder_embed_dim"] == 768


def test_sam_converter_refuses_code_execution(tmp_path):
    import os
    import pickle

    class Exploit:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    (tmp_path / "evil.pth").write_bytes(pickle.dumps({"x": Exploit()}))
    with pytest.raises(Exception):
        convert("sam", tmp_path / "evil.pth", tmp_path / "out")
    assert not (tmp_path / "pwned").exists()


def test_tiny_sam_segments_each_distinct_image_once(tiny_hub, segments_each_image_once):
    settings = RegionSettings(points_per_side=4, pred_iou_thresh=0.0, stability_score_thresh=0.0, max_regions=5)
    regions = SegmentEverything("sam-vit-b", settings=settings, device="cpu")
    segments_each_image_once(regions)
