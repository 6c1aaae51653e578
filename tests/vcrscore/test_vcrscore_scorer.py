"""VCRScore on tiny random models loaded offline through the hub cache: each feature against an independent
computation (transformers' ViLT/DETR/YOLOS run one image at a time, open_clip for MCIP, word sets by hand), the
regressor on those features, batching/order invariance, deduplication, options and bad input."""

import json
import random

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError
from capeval.core.hub import resolve
from capeval.core.scoring import load_scorer

OFFICIAL_REFS = ["a large piece of blueberry cake on a plate", "a plate of food attractively arranged on a table",
                 "a plate of blueberry coffee cake with butter and an orange slice on a table with breakfast foods"]
OFFICIAL_CAPTION = "a bluebery cake is on a plate and is topped with butter"
DARKNET = {"motorcycle": "motorbike", "airplane": "aeroplane", "couch": "sofa", "potted plant": "pottedplant",
           "dining table": "diningtable", "tv": "tvmonitor"}
LONG = "a man playing tennis on a red court " * 6  # well over 39 BERT tokens


def _images(seed=0):
    """Sizes on both sides of the official 333 px rule, two sharing a size, plus grayscale and RGBA images."""
    rng = np.random.default_rng(seed)
    sizes = [(400, 340), (120, 90), (400, 340), (336, 500), (200, 400)]
    images = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for w, h in sizes]
    images.append(Image.fromarray(rng.integers(0, 256, (350, 360), dtype=np.uint8)))  # "L"
    images.append(Image.fromarray(rng.integers(0, 256, (100, 150, 4), dtype=np.uint8)))  # "RGBA"
    return images


CAPTIONS = ["a dog on the grass", "a red car", LONG, "two people and a cat", "a plate with cake", "a woman",
            "a table"]
REFERENCES = [["a dog runs", "grass and a dog"], ["a car"], ["a man playing tennis", "tennis court", "a player"],
              ["people with a cat"], ["cake on a plate", "blueberry cake"], ["a woman standing"],
              ["a black table", "food on a table", "a table", "a kitchen table"]]


@pytest.fixture(scope="module")
def scorer(tiny_hub):
    return load_scorer("vcrscore", device="cpu", batch_size=3)


def _official_resize(image):
    """The official ViLT/DETR rule, written out: a side < 333 → 500×500 with PIL's default filter, then RGB."""
    if image.size[0] < 333 or image.size[1] < 333:
        image = image.resize((500, 500))
    return image.convert("RGB")


def independent_vilt(images, captions, sizes=None, directory=None, seed=None):
    """One pair at a time, as the official code. ``sizes[i]`` (height, width): resize the image to that size with
    PIL's bicubic filter (the processor's) and let the processor only normalise; ``seed``: draw the patches right
    after ``torch.manual_seed(seed)`` (the caller's RNG state is restored)."""
    from transformers import BertTokenizer, ViltForImageAndTextRetrieval
    from transformers.models.vilt.image_processing_pil_vilt import ViltImageProcessorPil

    directory = directory or resolve("vilt-b32-finetuned-coco")
    model = ViltForImageAndTextRetrieval.from_pretrained(str(directory)).eval()
    tokenizer = BertTokenizer.from_pretrained(str(directory))
    processor = ViltImageProcessorPil.from_pretrained(str(directory))
    out = []
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        for i, (image, caption) in enumerate(zip(images, captions)):
            text = tokenizer(caption, max_length=39, truncation=True, return_tensors="pt")
            image = _official_resize(image)
            size = sizes[i] if sizes else None
            if size is None:
                pixels = processor(images=image, return_tensors="pt")
            else:
                pixels = processor(images=image.resize(size[::-1], Image.BICUBIC), do_resize=False,
                                   return_tensors="pt")
            if seed is not None:
                torch.manual_seed(seed)
            out.append(model(**text, **pixels).logits[0, 0].item())
    return out


def independent_detections(name, images, threshold, official_resize, rename=None, sizes=None):
    """Class softmax without the no-object class, best class per query, kept when its score > threshold.
    ``sizes[i]`` (height, width): resize to that size with PIL's bilinear filter (the processor's), then only
    normalise."""
    from transformers import DetrForObjectDetection, YolosForObjectDetection
    from transformers.models.detr.image_processing_pil_detr import DetrImageProcessorPil
    from transformers.models.yolos.image_processing_pil_yolos import YolosImageProcessorPil

    directory = resolve(name)
    model_class, processor_class = ((DetrForObjectDetection, DetrImageProcessorPil) if "detr" in name
                                    else (YolosForObjectDetection, YolosImageProcessorPil))
    model = model_class.from_pretrained(str(directory)).eval()
    processor = processor_class.from_pretrained(str(directory))
    found = []
    with torch.no_grad():
        for i, image in enumerate(images):
            image = _official_resize(image) if official_resize else image.convert("RGB")
            size = sizes[i] if sizes else None
            if size is None:
                pixel_values = processor(images=image, return_tensors="pt")["pixel_values"]
            else:
                pixel_values = processor(images=image.resize(size[::-1], Image.BILINEAR), do_resize=False,
                                         return_tensors="pt")["pixel_values"]
            logits = model(pixel_values=pixel_values).logits[0]
            scores, labels = logits.softmax(-1)[:, :-1].max(-1)
            names = [model.config.id2label[int(i)] for s, i in zip(scores, labels) if s > threshold]
            found.append([(rename or {}).get(n, n) for n in names])
    return found


def independent_mcip(images, captions, references):
    """open_clip's own model class, eval transform and tokenizer on the converted tiny MCIP weights."""
    import open_clip
    from open_clip.transform import image_transform
    from safetensors.torch import load_file

    directory = resolve("mcip-vit-l-14-336")
    config = json.loads((directory / "open_clip_config.json").read_text())
    model = open_clip.model.CLIP(**config["model_cfg"])
    model.load_state_dict({k: v for k, v in load_file(str(directory / "open_clip_model.safetensors")).items()
                           if k != "attn_mask"}, strict=False)
    model.eval()
    transform = image_transform(336, is_train=False, mean=(0.48145466, 0.4578275, 0.40821073),
                                std=(0.26862954, 0.26130258, 0.27577711))
    out = []
    with torch.no_grad():
        for image, caption, refs in zip(images, captions, references):
            v = model.encode_image(transform(image).unsqueeze(0))[0].numpy().astype(np.float64)
            t = model.encode_text(open_clip.tokenize([caption] + refs)).numpy().astype(np.float64)
            v, t = v / np.linalg.norm(v), t / np.linalg.norm(t, axis=1, keepdims=True)
            c = 2.5 * max(float(v @ t[0]), 0.0)
            r = max(0.0, float(np.max(t[1:] @ t[0])))
            out.append(0.0 if c + r == 0 else 2 * c * r / (c + r))
    return out


def hand_word_precision(caption, refs, *detected):
    words = set(caption.split())
    pool = {w for text in list(refs) + [n for names in detected for n in names] for w in text.split()}
    return 100.0 * len(words & pool) / len(words)


def test_vilt_logits_equal_transformers_one_pair_at_a_time(scorer):
    images = _images()
    with pytest.warns(UserWarning, match="exceed 39 ViLT tokens"):
        result = scorer.score(CAPTIONS, images, REFERENCES)
    expected = independent_vilt(images, CAPTIONS)
    np.testing.assert_allclose(result["vilt_logit_per_sample"], expected, atol=1e-5)
    assert np.ptp(expected) > 1e-2  # the tiny model tells the pairs apart
    assert result["truncated_texts"] == 1


def test_detections_equal_transformers_one_image_at_a_time(scorer):
    images = _images()
    detr, yolo = scorer.detect(images)
    assert detr == independent_detections("detr-resnet-50", images, 0.9, official_resize=True)
    assert yolo == independent_detections("yolos-small", images, 0.6, official_resize=False, rename=DARKNET)
    assert sum(map(len, detr)) > 0 and sum(map(len, yolo)) > 0  # the tiny detectors do report objects


def test_yolo_names_are_spelled_as_darknet_unless_asked_for_coco(tiny_hub):
    images = _images(seed=3)
    coco = load_scorer("vcrscore", device="cpu", detr=None, yolo_label_names="coco").detect(images)[1]
    darknet = load_scorer("vcrscore", device="cpu", detr=None).detect(images)[1]
    assert darknet == [[DARKNET.get(n, n) for n in names] for names in coco]
    with pytest.raises(ValueError, match="yolo_label_names"):
        load_scorer("vcrscore", device="cpu", yolo_label_names="voc")


def test_mcip_refclip_s_equals_open_clip(scorer):
    images = _images()
    with pytest.warns(UserWarning):
        result = scorer.score(CAPTIONS, images, REFERENCES)
    expected = independent_mcip(images, CAPTIONS, REFERENCES)
    np.testing.assert_allclose(result["mcip_refclip_s_per_sample"], expected, atol=1e-5)
    assert sum(v > 0 for v in expected) >= 2


def test_word_precision_uses_references_and_both_detectors(scorer):
    images = _images()
    with pytest.warns(UserWarning):
        result = scorer.score(CAPTIONS, images, REFERENCES, return_features=True)
    objects = result["detected_objects"]
    expected = [hand_word_precision(c, r, o["detr"], o["yolo"]) for c, r, o in zip(CAPTIONS, REFERENCES, objects)]
    assert result["word_precision_per_sample"] == pytest.approx(expected, abs=1e-12)
    # captions that use the detected names get credit for them
    named = [f"{o['yolo'][0]} {o['detr'][0] if o['detr'] else 'zzz'} qqq" for o in objects if o["yolo"]]
    with_names = scorer.score(named, [im for im, o in zip(images, objects) if o["yolo"]],
                              [["unrelated words"]] * len(named), return_features=True)
    for caption, value, o in zip(named, with_names["word_precision_per_sample"], with_names["detected_objects"]):
        assert value == pytest.approx(hand_word_precision(caption, ["unrelated words"], o["detr"], o["yolo"]))
        assert value > 0


def test_end_to_end_on_the_real_images_with_the_official_regressor(shared_data, tiny_hub, tmp_path):
    from capeval.cli import main
    from capeval.vcrscore.gradient_boosting import load_json, predict

    assert main(["convert", "vcrscore-gbr", str(shared_data.parent / "reference" / "vcrscore" /
                                                "model_GBR_VCR.pickle"), "--output", str(tmp_path / "gbr")]) == 0
    root = shared_data / "images"
    candidates = json.loads((root / "caption_evaluation" / "candidates.json").read_text())
    refs = json.loads((root / "caption_evaluation" / "references.json").read_text())
    images = [root / "vcrscore" / "coco_val2017_000000184384_from_notebook.png"]
    captions, references = [OFFICIAL_CAPTION], [OFFICIAL_REFS]
    for key in sorted(candidates):
        images.append(root / "caption_evaluation" / f"{key}.jpg")
        captions.append(candidates[key])
        references.append(refs[key])
    clip_refs = json.loads((root / "clipscore" / "refs.json").read_text())
    clip_good = json.loads((root / "clipscore" / "good_captions.json").read_text())
    for key in sorted(clip_good):
        images.append(root / "clipscore" / f"{key}.jpg")
        captions.append(clip_good[key])
        references.append(clip_refs[key])
    scorer = load_scorer("vcrscore", device="cpu", weights=str(tmp_path / "gbr"), batch_size=2)
    result = scorer.score(captions, [str(p) for p in images], references, return_features=True)

    pil = [Image.open(p) for p in images]
    detr = independent_detections("detr-resnet-50", pil, 0.9, official_resize=True)
    yolo = independent_detections("yolos-small", pil, 0.6, official_resize=False, rename=DARKNET)
    features = np.column_stack([
        [hand_word_precision(c, r, d, y) for c, r, d, y in zip(captions, references, detr, yolo)],
        independent_vilt(pil, captions),
        independent_mcip(pil, captions, references),
    ])
    assert features[0, 0] == 70.0  # the official notebook's feature (1)
    np.testing.assert_allclose(result["features"], features, atol=1e-5)
    expected = predict(load_json(tmp_path / "gbr" / "vcrscore_gbr.json"), features)
    np.testing.assert_allclose(result["vcrscore_per_sample"], expected, atol=1e-9)
    assert result["vcrscore"] == pytest.approx(float(np.mean(expected)))
    assert len(set(np.round(expected, 9))) > 1  # the official trees separate these samples


def test_batch_size_order_and_each_distinct_input_run_once(tiny_hub):
    images = _images(seed=5)[:4]
    order = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    preds = [CAPTIONS[i] for i in order]
    pairs = [images[i].copy() for i in order]
    refs = [REFERENCES[i] for i in order]
    preds[-1] = "a different caption"  # a new (image, caption) pair on a known image
    scorer = load_scorer("vcrscore", device="cpu", batch_size=4)
    seen = {"detr": 0, "yolo": 0, "vilt": 0}
    for name, model in (("detr", scorer.detr.model), ("yolo", scorer.yolo.model), ("vilt", scorer.vilt.model)):
        def counting(*args, _forward=model.forward, _name=name, **kwargs):
            seen[_name] += kwargs["pixel_values"].shape[0]
            return _forward(*args, **kwargs)
        model.forward = counting
    with pytest.warns(UserWarning):
        baseline = scorer.score(preds, pairs, refs)
    assert seen == {"detr": 4, "yolo": 4, "vilt": 5}
    shuffled = list(range(len(preds)))
    random.Random(0).shuffle(shuffled)
    one = load_scorer("vcrscore", device="cpu", batch_size=1)
    with pytest.warns(UserWarning):
        other = one.score([preds[i] for i in shuffled], [pairs[i] for i in shuffled], [refs[i] for i in shuffled])
    for key in ("vcrscore", "word_precision", "vilt_logit", "mcip_refclip_s"):
        np.testing.assert_allclose(other[f"{key}_per_sample"], [baseline[f"{key}_per_sample"][i] for i in shuffled],
                                   atol=1e-5, err_msg=key)
    with pytest.warns(UserWarning):
        again = scorer.score(preds, pairs, refs)  # cached: no model runs, same values
    assert seen == {"detr": 4, "yolo": 4, "vilt": 5}
    assert again["vcrscore_per_sample"] == baseline["vcrscore_per_sample"]


def test_max_references_and_switching_detectors_off(tiny_hub):
    images = _images(seed=2)[:3]
    caption = ["a plate with cake and a dog", "a red car on grass", "a dog and a cat"]
    refs = [["a plate", "some cake", "a dog", "a dog on grass"], ["a red car"], ["a cat", "x", "y", "a dog"]]
    only_refs = load_scorer("vcrscore", device="cpu", detr=None, yolo=None)
    assert only_refs.score(caption, images, refs)["word_precision_per_sample"] == pytest.approx(
        [hand_word_precision(c, r) for c, r in zip(caption, refs)])
    official = load_scorer("vcrscore", device="cpu", detr=None, yolo=None, max_references=3)
    result = official.score(caption, images, refs)
    assert result["word_precision_per_sample"] == pytest.approx(
        [hand_word_precision(c, r[:3]) for c, r in zip(caption, refs)])
    assert result["word_precision_per_sample"][2] < 100.0  # "dog" is only in the dropped fourth reference
    np.testing.assert_allclose(result["mcip_refclip_s_per_sample"],
                               independent_mcip(images, caption, [r[:3] for r in refs]), atol=1e-5)
    with pytest.raises(ValueError, match="max_references"):
        load_scorer("vcrscore", device="cpu", max_references=0)


def test_feature_rows_feed_from_features_and_training(scorer, tmp_path, capsys):
    from capeval.cli import main
    from capeval.vcrscore.regressor import write_feature_rows
    from capeval.vcrscore.regressor import read_feature_rows

    images = _images(seed=4)[:3]
    preds, refs = CAPTIONS[:2] + CAPTIONS[3:4], REFERENCES[:2] + REFERENCES[3:4]
    rows = scorer.feature_rows(preds, images, refs, scores=[0.1, 0.5, 0.9])
    direct = scorer.score(preds, images, refs, return_features=True)
    assert [r["features"] for r in rows] == direct["features"] and [r["score"] for r in rows] == [0.1, 0.5, 0.9]
    path = write_feature_rows(tmp_path / "rows.jsonl", rows)
    assert read_feature_rows(path) == rows
    capsys.readouterr()
    assert main(["score", "vcrscore", "--from-features", str(path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["n"] == 3 and printed["vcrscore"] == pytest.approx(direct["vcrscore"], abs=1e-12)
    # `capeval score vcrscore --output` rows carry the features under "scores": readable as feature rows too
    cli_row = {"caption": "x", "score": 0.3, "scores": {"vcrscore": 0.5, "word_precision": 50.0, "vilt_logit": 1.0,
                                                        "mcip_refclip_s": 0.2}}
    (tmp_path / "scored.jsonl").write_text(json.dumps(cli_row) + "\n")
    assert read_feature_rows(tmp_path / "scored.jsonl")[0]["features"] == [50.0, 1.0, 0.2]


@pytest.mark.parametrize("kwargs, message", [
    ({"references": [[]]}, "empty reference list"),
    ({"references": None}, "needs references"),
    ({"references": [["a"], ["b"]]}, "got 1 predictions but 2"),
    ({"images": []}, "mismatched lengths"),
    ({"images": None}, "needs one image"),
    ({"images": ["/no/such/image.png"]}, "not found"),
    ({"predictions": [" "]}, "empty caption"),
])
def test_bad_inputs(scorer, kwargs, message):
    inputs = {"predictions": ["a dog"], "images": [Image.new("RGB", (40, 40))], "references": [["a dog"]]}
    inputs.update(kwargs)
    with pytest.raises(InputError, match=message):
        scorer.score(inputs["predictions"], inputs["images"], inputs["references"])


def test_evaluate_module_scores_like_the_scorer(tiny_hub, scorer):
    import evaluate

    from capeval.modules import module_dir

    module = evaluate.load(str(module_dir("vcrscore")), device="cpu", batch_size=2)
    images = _images(seed=6)[:3]
    preds, refs = CAPTIONS[:2] + CAPTIONS[4:5], [REFERENCES[0], ["a car"], REFERENCES[4]]
    result = module.compute(predictions=preds, images=images, references=refs, return_features=True)
    direct = scorer.score(preds, images, refs, return_features=True)
    for key in ("vcrscore", "word_precision", "vilt_logit", "mcip_refclip_s"):
        np.testing.assert_allclose(result[f"{key}_per_sample"], direct[f"{key}_per_sample"], atol=1e-5)
    assert len(result["features"]) == 3 and len(result["detected_objects"]) == 3
    with pytest.raises(InputError, match="needs references"):
        module.compute(predictions=preds[:1], images=images[:1])


def test_detr_repo_layout_with_a_timm_backbone_loads_offline(tmp_path):
    """facebook/detr-resnet-50's config names a timm ResNet (``use_timm_backbone``, ``use_pretrained_backbone``) and
    its checkpoint uses the legacy ``conv_encoder`` keys: that layout (with a small timm ResNet-18) loads offline,
    with every saved weight, through the detector's loading code."""
    pytest.importorskip("timm")
    from transformers import AutoConfig, DetrForObjectDetection

    from capeval.vcrscore.constants import COCO_LABELS
    from capeval.vcrscore.scorer import ObjectDetector

    config = {"architectures": ["DetrForObjectDetection"], "model_type": "detr", "backbone": "resnet18",
              "use_timm_backbone": True, "use_pretrained_backbone": True, "dilation": False, "num_channels": 3,
              "d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
              "decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "num_queries": 5,
              "id2label": {str(i): name for i, name in enumerate(COCO_LABELS)}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(
        {"do_normalize": True, "do_resize": True, "feature_extractor_type": "DetrFeatureExtractor",
         "format": "coco_detection", "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225],
         "max_size": 96, "size": 64}))
    torch.manual_seed(0)
    reference = DetrForObjectDetection(AutoConfig.from_pretrained(str(tmp_path))).eval()
    saved = reference.state_dict()
    torch.save({k.replace("model.backbone.model.", "model.backbone.conv_encoder.model."): v for k, v in saved.items()},
               tmp_path / "pytorch_model.bin")
    detector = ObjectDetector(str(tmp_path), threshold=0.0, device="cpu")
    loaded = detector.model.state_dict()
    assert set(loaded) == set(saved) and all(torch.equal(loaded[k], saved[k]) for k in saved)
    names = detector.detect([Image.new("RGB", (50, 40), "blue")])[0]
    assert len(names) == 5 and set(names) <= set(COCO_LABELS)  # threshold 0: one name per query


def test_hub_ids_load_like_registry_names_and_the_detection_cache_is_bounded(scorer):
    images = _images(seed=7)[:3]
    by_id = load_scorer("vcrscore", device="cpu", vilt="dandelin/vilt-b32-finetuned-coco",
                        detr="facebook/detr-resnet-50@main", yolo="hustvl/yolos-small")  # no safetensors: .bin
    with pytest.warns(UserWarning):
        a = by_id.score(CAPTIONS[:3], images, REFERENCES[:3], return_features=True)
    with pytest.warns(UserWarning):
        b = scorer.score(CAPTIONS[:3], images, REFERENCES[:3], return_features=True)
    np.testing.assert_allclose(a["features"], b["features"], atol=1e-5)
    assert a["detected_objects"] == b["detected_objects"]
    first = by_id.detect(images)
    by_id.detr.cache.clear()
    by_id.detr.cache.max_entries = 2
    assert by_id.detect(images) == first and len(by_id.detr.cache) == 2  # the oldest image left the cache


# (width, height) → the size the tiny ViLT (shorter side 384, longer ≤ int(1333/800·384) = 639, multiples of 32)
# and the tiny YOLOS (shortest 64, longest 96, multiples of 16) get, worked out by hand. 10000×20 and 20×10000 have
# a side under 333: ViLT and DETR see the official 500×500 resize. The official resizes give YOLOS (and ViLT, for
# 10000×400) a side of 0 px: e.g. YOLOS 10000×20 → raw short side 96·20/10000 = 0.19 → 0, long side 96; ViLT
# 10000×400 → 384×9600 → ×639/9600 → 25.6×639 → rounded 26, 639 → floored to 0, 608. That side is one unit.
EXTREME = {(10000, 20): {"vilt": None, "yolo": (16, 96)}, (20, 10000): {"vilt": None, "yolo": (96, 16)},
           (10000, 400): {"vilt": (32, 608), "yolo": (16, 96)}, (400, 10000): {"vilt": (608, 32), "yolo": (96, 16)}}


def _noise(width, height, seed):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8))


def test_resize_sizes_are_the_processors_own_and_zero_where_the_official_resize_fails(tiny_hub):
    """Our copies of the processors' size rules give the processors' output shapes on every size the processors
    take (so every such image is processed exactly as officially), and a 0-pixel side exactly where they fail."""
    from transformers.models.detr.image_processing_pil_detr import DetrImageProcessorPil
    from transformers.models.vilt.image_processing_pil_vilt import ViltImageProcessorPil
    from transformers.models.yolos.image_processing_pil_yolos import YolosImageProcessorPil

    from capeval.vcrscore.scorer import detection_resize_size, vilt_resize_size

    assert vilt_resize_size(400, 10000, 384) == (0, 608) and vilt_resize_size(10000, 400, 384) == (608, 0)
    assert detection_resize_size(20, 10000, 64, 96, mod=16) == (0, 96)
    assert detection_resize_size(10000, 20, 64, 96, mod=16) == (96, 0)
    assert detection_resize_size(400, 10000, 64, 96) == (4, 96)  # DETR: whole pixels, no zero
    rng = np.random.default_rng(0)
    sizes = [(int(w), int(h)) for w, h in zip(rng.integers(1, 700, 40), rng.integers(1, 700, 40))]
    sizes += [(700, 20), (20, 700), (700, 3), (3, 700), (1, 1), (500, 500), (640, 17), (17, 640), (700, 30)]
    processors = [
        ("vilt", ViltImageProcessorPil(), lambda h, w: vilt_resize_size(h, w, 384)),
        ("detr", DetrImageProcessorPil(size={"shortest_edge": 64, "longest_edge": 96}),
         lambda h, w: detection_resize_size(h, w, 64, 96)),
        ("yolos", YolosImageProcessorPil(size={"shortest_edge": 64, "longest_edge": 96}),
         lambda h, w: detection_resize_size(h, w, 64, 96, mod=16)),
        ("yolos-real", YolosImageProcessorPil(size={"shortest_edge": 800, "longest_edge": 1333}),
         lambda h, w: detection_resize_size(h, w, 800, 1333, mod=16)),
    ]
    for name, processor, ours in processors:
        failures = 0
        for width, height in sizes:
            image = Image.new("RGB", (width, height), "gray")
            expected = ours(height, width)
            if min(expected) == 0:
                failures += 1
                with pytest.raises(Exception):
                    processor(images=image, return_tensors="pt")
            else:
                shape = processor(images=image, return_tensors="pt")["pixel_values"].shape[-2:]
                assert tuple(shape) == expected, (name, width, height)
        assert failures > 0, name  # the grid does reach the sizes the official resize cannot take


def test_extreme_aspect_images_score_as_the_processors_at_one_unit(scorer):
    sizes = list(EXTREME)
    images = [_noise(w, h, seed) for seed, (w, h) in enumerate(sizes)]
    captions = ["a dog on the grass", "a red car", "a plate with cake", "a woman"]
    refs = [["a dog runs"], ["a car"], ["cake on a plate"], ["a woman standing"]]
    assert tuple(scorer.yolo.preprocess(images[0]).shape) == (3, 16, 96)
    assert tuple(scorer.vilt.preprocess(images[2]).shape) == (3, 32, 608)
    result = scorer.score(captions, images, refs, return_features=True)
    detr = independent_detections("detr-resnet-50", images, 0.9, official_resize=True)
    yolo = independent_detections("yolos-small", images, 0.6, official_resize=False, rename=DARKNET,
                                  sizes=[EXTREME[s]["yolo"] for s in sizes])
    assert [o["detr"] for o in result["detected_objects"]] == detr
    assert [o["yolo"] for o in result["detected_objects"]] == yolo
    features = np.column_stack([
        [hand_word_precision(c, r, d, y) for c, r, d, y in zip(captions, refs, detr, yolo)],
        independent_vilt(images, captions, sizes=[EXTREME[s]["vilt"] for s in sizes]),
        independent_mcip(images, captions, refs),
    ])
    np.testing.assert_allclose(result["features"], features, atol=1e-5)
    assert np.isfinite(result["vcrscore_per_sample"]).all()
    np.testing.assert_allclose(result["vcrscore_per_sample"], scorer.predict(features), atol=1e-9)


def _tiny_vilt_sampling(tmp_path, max_image_length):
    """The tiny ViLT with ``max_image_length`` set: more patches than that are a random subset (transformers)."""
    import shutil

    directory = tmp_path / f"vilt-max{max_image_length}"
    shutil.copytree(resolve("vilt-b32-finetuned-coco"), directory)  # copies the snapshot's files, not links
    config = json.loads((directory / "config.json").read_text())
    config["max_image_length"] = max_image_length
    (directory / "config.json").write_text(json.dumps(config))
    return directory


@pytest.mark.parametrize("max_image_length", [-1, 20])
def test_vilt_is_bitwise_reproducible_and_leaves_the_global_rng_alone(tiny_hub, tmp_path, max_image_length):
    """ViLT's patch selection (all patches in a random order for -1; a random 20 of 144-168 patches for 20) is
    each image's draw right after ``torch.manual_seed(0)``, whatever the batch and the caller's RNG state."""
    directory = _tiny_vilt_sampling(tmp_path, max_image_length)
    images = _images()[:4]  # two 400×340 images share a batch: the selection must not depend on the position
    captions = ["a dog on the grass", "a red car", "two people and a cat", "a plate with cake"]
    refs = [["a dog runs"], ["a car"], ["people with a cat"], ["cake on a plate"]]
    results = []
    for seed in (1, 2):
        scorer = load_scorer("vcrscore", device="cpu", vilt=str(directory), detr=None, yolo=None, batch_size=3)
        torch.manual_seed(seed)
        state = torch.get_rng_state()
        results.append(scorer.score(captions, images, refs))
        assert torch.equal(torch.get_rng_state(), state)  # the caller's generator did not move
        assert torch.rand(1).item() == torch.rand(1, generator=torch.Generator().manual_seed(seed)).item()
    assert results[0]["vilt_logit_per_sample"] == results[1]["vilt_logit_per_sample"]
    assert results[0]["vcrscore_per_sample"] == results[1]["vcrscore_per_sample"]
    expected = independent_vilt(images, captions, directory=directory, seed=0)
    np.testing.assert_allclose(results[0]["vilt_logit_per_sample"], expected, atol=1e-5)
    if max_image_length > 0:  # the subset matters: another seed's patches give other logits
        other = independent_vilt(images, captions, directory=directory, seed=1)
        assert np.max(np.abs(np.subtract(other, expected))) > 1e-3


def test_truncated_texts_are_counted_per_call_and_warned_once(tiny_hub):
    """``truncated_texts``: captions over 39 ViLT tokens; ``clip_truncated_texts``: captions and references over 77
    CLIP tokens; per occurrence, counted independently here with BERT's and CLIP's own tokenizers, the same on a
    second (cached) call, and one warning per call."""
    import warnings

    from open_clip.tokenizer import SimpleTokenizer
    from transformers import BertTokenizer

    bert = BertTokenizer.from_pretrained(str(resolve("vilt-b32-finetuned-coco")))
    clip = SimpleTokenizer()
    very_long = "a dog " * 60  # over 77 CLIP tokens and over 39 ViLT tokens
    captions = [LONG, "a dog", LONG, very_long, "a cat"]
    refs = [[very_long, "a dog runs"], ["a dog"], ["a man"], [very_long], ["a cat", LONG]]
    texts = captions + [r for sample in refs for r in sample]
    vilt_expected = sum(len(bert(c)["input_ids"]) > 39 for c in captions)
    clip_expected = sum(len(clip.encode(t)) + 2 > 77 for t in texts)
    assert (vilt_expected, clip_expected) == (3, 3)
    scorer = load_scorer("vcrscore", device="cpu", batch_size=2, detr=None, yolo=None)  # texts in several batches
    images = _images()[:5]
    for _ in range(2):  # the second call finds every text and pair in the caches
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = scorer.score(captions, images, refs)
        assert (result["truncated_texts"], result["clip_truncated_texts"]) == (vilt_expected, clip_expected)
        ours = [str(w.message) for w in caught if "exceed" in str(w.message)]
        assert len(ours) == 1, ours
        assert f"{vilt_expected} of 5 captions exceed 39 ViLT tokens" in ours[0]
        assert f"{clip_expected} of {len(texts)} MCIP texts (captions and references) exceed 77 CLIP tokens" in ours[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short = scorer.score(["a dog", "a cat"], images[:2], [["a dog"], ["a cat"]])
    assert (short["truncated_texts"], short["clip_truncated_texts"]) == (0, 0)
    assert not [w for w in caught if "exceed" in str(w.message)]


def test_more_distinct_pairs_than_the_cache_bound_score_as_unbounded(tiny_hub):
    """The ViLT pair cache (and the MCIP embedding caches) bounded below the number of distinct (image, caption)
    pairs of one call: the values of the call are kept for the call, so the scores equal an unbounded run's."""
    images = _images(seed=8)
    preds = CAPTIONS + CAPTIONS[:3]  # 7 distinct pairs and 3 repeated ones
    pairs, refs = images + images[:3], REFERENCES + REFERENCES[:3]
    unbounded = load_scorer("vcrscore", device="cpu", batch_size=2, detr=None, yolo=None)
    bounded = load_scorer("vcrscore", device="cpu", batch_size=2, detr=None, yolo=None)
    for cache in (bounded.vilt.cache, bounded.clip.image_cache, bounded.clip.text_cache):
        cache.max_items = 2
    with pytest.warns(UserWarning, match="exceed 39 ViLT tokens"):
        expected = unbounded.score(preds, pairs, refs)
    for _ in range(2):  # a second call: some pairs still cached, the evicted ones computed again
        with pytest.warns(UserWarning, match="exceed 39 ViLT tokens"):
            result = bounded.score(preds, pairs, refs)
        assert len(bounded.vilt.cache) == 2
        for key in ("vcrscore", "word_precision", "vilt_logit", "mcip_refclip_s"):
            np.testing.assert_allclose(result[f"{key}_per_sample"], expected[f"{key}_per_sample"], rtol=0, atol=1e-6,
                                       err_msg=key)
    np.testing.assert_allclose(result["vilt_logit_per_sample"], independent_vilt(pairs, preds), atol=1e-5)


class _CountingTokenizer:
    """Records each call of the wrapped tokenizer: its texts and whether it truncated them."""

    def __init__(self, tokenizer):
        self.tokenizer, self.measured, self.truncated = tokenizer, [], []

    def __call__(self, texts, **kwargs):
        (self.truncated if kwargs.get("truncation") else self.measured).extend(
            [texts] if isinstance(texts, str) else list(texts))
        return self.tokenizer(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def test_vilt_lengths_are_measured_once_per_distinct_caption_and_only_the_scorer_warns(tiny_hub):
    """The ViLT truncation count measures each distinct caption's length once (then remembers it: a second call
    measures nothing), ViLT tokenises only the pairs it runs, and ``ViltRetrieval.logits`` itself never warns: the
    scorer's one warning per call holds the counts."""
    import warnings

    scorer = load_scorer("vcrscore", device="cpu", batch_size=2, detr=None, yolo=None)
    counting = scorer.vilt.tokenizer = _CountingTokenizer(scorer.vilt.tokenizer)
    images = _images(seed=9)[:5]
    captions = [LONG, "a dog", LONG, "a dog", "a cat"]
    refs = [["a dog runs"], ["a dog"], ["a man"], ["a dog"], ["a cat"]]
    with pytest.warns(UserWarning, match="2 of 5 captions exceed 39 ViLT tokens") as caught:
        first = scorer.score(captions, images, refs)
    assert len([w for w in caught if "exceed" in str(w.message)]) == 1
    assert first["truncated_texts"] == 2
    assert sorted(counting.measured) == sorted(set(captions))
    assert sorted(counting.truncated) == sorted(set(captions))  # each distinct caption tokenised once for ViLT
    counting.measured.clear()
    counting.truncated.clear()
    with pytest.warns(UserWarning, match="2 of 5 captions exceed 39 ViLT tokens"):
        again = scorer.score(captions, images, refs)
    assert again["truncated_texts"] == 2 and again["vcrscore_per_sample"] == first["vcrscore_per_sample"]
    assert counting.measured == [] and counting.truncated == []  # lengths remembered, every pair cached
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logits = scorer.vilt.logits(images[:2], [LONG, "a bird"])
    assert logits.shape == (2,) and counting.truncated == ["a bird"]  # only the new pair's caption
    assert (scorer.vilt.truncation.limit, scorer.vilt.truncation.encoder) == (39, "ViLT")
