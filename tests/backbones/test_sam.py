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


def test_lru_cache_bounds_entries_and_bytes_least_recently_used_first():
    from capeval.core.caches import LruCache

    cache = LruCache(3, max_bytes=10, sizeof=len)
    for key in "abc":
        cache.put(key, "xx")
    assert cache.get("a") == "xx"  # "a" becomes the most recently used
    cache.put("d", "xx")  # 4 entries > 3: "b" leaves
    assert [k for k in "abcd" if k in cache] == ["a", "c", "d"] and cache.nbytes == 6
    cache.put("e", "x" * 7)  # 4 entries: "c" leaves; then 11 bytes > 10: "a" leaves
    assert [k for k in "acde" if k in cache] == ["d", "e"] and cache.nbytes == 9 and len(cache) == 2
    cache.put("d", "x")  # replacing a value updates the size
    assert cache.nbytes == 8 and cache.get("d") == "x"
    cache.put("big", "x" * 11)  # larger than the whole budget: not kept, nothing else evicted
    assert "big" not in cache and len(cache) == 2 and cache.get("big") is None
    assert cache.evictions == 3
    off = LruCache(0)
    off.put("a", 1)
    assert len(off) == 0 and off.get("a", "missing") == "missing"
    with pytest.raises(ValueError):
        LruCache(-1)
    with pytest.raises(ValueError):
        LruCache(3, max_bytes=10)  # a byte bound without sizeof


TINY_SETTINGS = RegionSettings(points_per_side=4, pred_iou_thresh=0.0, stability_score_thresh=0.0, max_regions=5)


def distinct_images(count, width=64):
    """Random images, told apart by their height (48, 50, 52, ...)."""
    from PIL import Image

    rng = np.random.default_rng(7)
    return [Image.fromarray(rng.integers(0, 255, (48 + 2 * i, width, 3), dtype=np.uint8)) for i in range(count)]


def count_generate_calls(regions):
    """A context manager spying on the real SAM generator's ``generate`` (its behaviour unchanged)."""
    from unittest import mock

    return mock.patch.object(regions.generator, "generate", wraps=regions.generator.generate)


def heights(spy):
    """The height of the image of each call, in call order (our test images differ by height)."""
    return [call.args[0].shape[0] for call in spy.call_args_list]


def test_mask_cache_is_bounded_by_images_and_evicted_images_are_segmented_again(tiny_hub):
    images = distinct_images(5)
    unbounded = SegmentEverything("sam-vit-b", settings=TINY_SETTINGS, device="cpu")
    reference = [unbounded.masks(im) for im in images]
    assert all(reference) and len(unbounded.cache) == 5

    regions = SegmentEverything("sam-vit-b", settings=TINY_SETTINGS, device="cpu", max_cached_images=2)
    with count_generate_calls(regions) as spy:
        first = [regions.masks(im) for im in images]
        assert heights(spy) == [48, 50, 52, 54, 56]
        assert len(regions.cache) == 2  # the last two images
        assert regions.cache.nbytes == sum(m.nbytes for masks in first[3:] for m in masks)
        spy.reset_mock()
        again = regions.masks(images[0].copy())  # evicted: segmented again, exactly once
        assert heights(spy) == [48]
        assert regions.masks(images[4]) is first[4] and regions.masks(images[0]) is again  # cached: no call
        assert heights(spy) == [48]
    for masks, expected in zip([*first, again], [*reference, reference[0]]):
        assert len(masks) == len(expected)
        for mask, other in zip(masks, expected):
            assert mask.dtype == other.dtype == bool and np.array_equal(mask, other)


def test_mask_cache_is_bounded_by_bytes(tiny_hub):
    images = distinct_images(6)
    regions = SegmentEverything("sam-vit-b", settings=TINY_SETTINGS, device="cpu", max_cached_images=100,
                                max_cached_masks_bytes=10_000)
    sizes = []
    with count_generate_calls(regions) as spy:
        for image in images:
            sizes.append(sum(m.nbytes for m in regions.masks(image)))
            assert regions.cache.nbytes <= 10_000 and len(regions.cache) <= 100
        assert len(heights(spy)) == 6
        assert 10_000 < sum(sizes)  # the byte bound, not the entry bound, evicted images
        # least recently used first: the cache holds the longest run of the latest images that fits in the bound
        expected = max(k for k in range(7) if sum(sizes[len(sizes) - k:]) <= 10_000)
        assert 1 <= expected < 6
        assert len(regions.cache) == expected and regions.cache.nbytes == sum(sizes[len(sizes) - expected:])
        spy.reset_mock()
        regions.masks(images[0])  # evicted → segmented again
        regions.masks(images[-1])  # still cached
        assert heights(spy) == [48]
    # masks larger than the whole budget are returned, never kept
    tiny_budget = SegmentEverything("sam-vit-b", settings=TINY_SETTINGS, device="cpu", max_cached_masks_bytes=100)
    assert tiny_budget.masks(images[0]) and len(tiny_budget.cache) == 0 and tiny_budget.cache.nbytes == 0


def test_repeated_image_in_one_call_is_segmented_once_even_with_a_tiny_cache(tiny_hub):
    a, b = distinct_images(2)
    regions = SegmentEverything("sam-vit-b", settings=TINY_SETTINGS, device="cpu", max_cached_images=1)
    with count_generate_calls(regions) as spy:
        found = regions.masks_of([a, b, a.copy(), b])
    assert heights(spy) == [48, 50] and found[0] is found[2] and found[1] is found[3]
    assert len(regions.cache) == 1
