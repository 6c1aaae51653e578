"""Image round-trip end to end offline: tiny random SD-Turbo-layout pipeline and tiny image encoders from the
hub cache; deterministic, cached, equal to an independent computation from the encoders' own outputs."""

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError
from capeval.core.inputs import SUPPORTED_MODES
from capeval.core.scoring import load_scorer

REPO = Path(__file__).resolve().parents[2]
TINY = {"device": "cpu", "steps": 1, "height": 32, "width": 32}


def _images():
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)),
            Image.fromarray(rng.integers(0, 256, (64, 30), dtype=np.uint8)),
            Image.new("RGBA", (20, 20), (0, 128, 255, 100))]


CAPTIONS = ["a dog runs on the grass", "a black and white photo", "a blue square"]


def test_end_to_end_is_deterministic_and_second_run_hits_the_image_cache(tiny_hub, tmp_path):
    first = load_scorer("image_roundtrip", image_cache_dir=tmp_path, images_per_caption=2, **TINY)
    result = first.score(CAPTIONS, _images())
    assert first.generator.images_generated == 6 and first.generator.pipeline_calls == 2  # batches of 4
    second = load_scorer("image_roundtrip", image_cache_dir=tmp_path, images_per_caption=2, **TINY)
    again = second.score(CAPTIONS, _images())
    assert second.generator.pipeline_calls == 0
    assert again == result
    reordered = second.score(list(reversed(CAPTIONS)), list(reversed(_images())))
    assert reordered["image_roundtrip_per_sample"] == \
        pytest.approx(list(reversed(result["image_roundtrip_per_sample"])), abs=1e-6)
    assert len(list(tmp_path.rglob("*.png"))) == 6


def test_score_equals_independent_cosine_of_clip_image_features(tiny_hub, tmp_path):
    scorer = load_scorer("image_roundtrip", image_cache_dir=tmp_path, images_per_caption=2, **TINY)
    images = _images()
    result = scorer.score(CAPTIONS, images, return_images=True)
    backbone = scorer.extractor.backbone

    def features(image):  # one image at a time, straight through the CLIP image tower
        with torch.no_grad():
            return backbone.model.encode_image(backbone.preprocess(image)[None])[0].double().numpy()

    expected = []
    for image, generated in zip(images, result["generated_images"]):
        assert len(generated) == 2 and generated[0].size == (32, 32)
        o = features(image)
        cosines = [o @ g / (np.linalg.norm(o) * np.linalg.norm(g)) for g in map(features, generated)]
        expected.append(np.mean(cosines))
    np.testing.assert_allclose(result["image_roundtrip_per_sample"], expected, atol=1e-5)
    assert result["image_roundtrip"] == pytest.approx(np.mean(expected), abs=1e-6)


def test_dinov2_features_and_negative_l2(tiny_hub, tmp_path):
    scorer = load_scorer("image_roundtrip", image_cache_dir=tmp_path, features="dinov2", similarity="negative_l2",
                         **TINY)
    images = _images()
    result = scorer.score(CAPTIONS, images, return_images=True)
    extractor = scorer.extractor

    def features(image):  # the CLS token after the final layer norm, layer by layer
        model = extractor.model
        with torch.no_grad():
            hidden = model.embeddings(extractor.preprocess(image)[None])
            for layer in model.encoder.layer:
                hidden = layer(hidden)
                hidden = hidden[0] if isinstance(hidden, tuple) else hidden
            return model.layernorm(hidden)[0, 0].double().numpy()

    expected = [-np.linalg.norm(features(image) - features(generated[0]))
                for image, generated in zip(images, result["generated_images"])]
    np.testing.assert_allclose(result["image_roundtrip_per_sample"], expected, rtol=1e-5)


@pytest.mark.parametrize("features", ["clip", "dinov2"])
def test_images_of_any_mode_and_size_score(tiny_hub, tmp_path, features):
    scorer = load_scorer("image_roundtrip", image_cache_dir=tmp_path, features=features, **TINY)
    images = [Image.new(mode, (13 + i, 7 + 3 * i)) for i, mode in enumerate(SUPPORTED_MODES)]
    images += [np.zeros((5, 300), dtype=np.uint8), torch.rand(3, 9, 4)]
    result = scorer.score(["a photo"] * len(images), images)
    assert np.isfinite(result["image_roundtrip_per_sample"]).all()
    assert scorer.generator.images_generated == 1  # one distinct caption


def test_bad_inputs_raise_input_errors(tiny_hub, tmp_path):
    scorer = load_scorer("image_roundtrip", image_cache_dir=tmp_path, **TINY)
    image = Image.new("RGB", (8, 8))
    with pytest.raises(InputError, match="mismatched lengths"):
        scorer.score(["a", "b"], [image])
    with pytest.raises(InputError, match="empty caption"):
        scorer.score([" "], [image])
    with pytest.raises(InputError, match="needs one image per caption"):
        scorer.score(["a"], None)
    with pytest.raises(InputError, match="not found"):
        scorer.score(["a"], [str(tmp_path / "missing.png")])
    with pytest.raises(ValueError, match=r"similarity must be one of \('cosine', 'negative_l2'\), not 'dot'"):
        load_scorer("image_roundtrip", image_cache_dir=tmp_path, similarity="dot", **TINY)


def test_evaluate_module_scores_offline(tiny_hub, tmp_path):
    import evaluate

    module = evaluate.load(str(REPO / "metrics" / "image_roundtrip"), device="cpu",
                           scorer_options={"height": 32, "width": 32, "image_cache_dir": str(tmp_path)})
    result = module.compute(predictions=CAPTIONS[:2], images=_images()[:2])
    assert set(result) == {"image_roundtrip", "image_roundtrip_per_sample", "truncated_texts", "provenance",
                           "hashcode"}
    direct = load_scorer("image_roundtrip", image_cache_dir=tmp_path, **TINY).score(CAPTIONS[:2], _images()[:2])
    assert result["image_roundtrip_per_sample"] == pytest.approx(direct["image_roundtrip_per_sample"], abs=1e-6)
    assert result["hashcode"] == module.scorer.hashcode


def test_dinov2_preprocessing_matches_the_repository_image_processor(tiny_hub):
    from transformers import AutoImageProcessor

    from capeval.core.hub import resolve
    from capeval.backbones.image_features import DINOV2_FILES, Dinov2ImageFeatures

    directory = resolve("dinov2-small", DINOV2_FILES)
    processor = AutoImageProcessor.from_pretrained(str(directory))
    extractor = Dinov2ImageFeatures("dinov2-small", device="cpu")
    image = Image.fromarray(np.random.default_rng(1).integers(0, 256, (300, 451, 3), dtype=np.uint8))
    expected = processor(images=image, return_tensors="pt").pixel_values[0]
    # the processor resizes through float arrays: at most one 8-bit step (1/255/std) apart
    torch.testing.assert_close(extractor.preprocess(image), expected, atol=1 / 255 / 0.224 + 1e-6, rtol=0)


def test_captions_over_the_generator_token_limit_are_counted_and_warned_once(tiny_hub, tmp_path):
    """``truncated_texts`` counts the captions the pipeline's CLIP tokenizer cuts to 77 tokens (start and end tokens
    included), counted here independently with the tokenizer of the pipeline's files; the images are those of the
    cut prompt; a second call whose images come from the cache counts them again."""
    import warnings

    from transformers import CLIPTokenizer

    from capeval.core.errors import TruncationWarning
    from capeval.core.hub import resolve
    from capeval.image_roundtrip.pipeline import DIFFUSERS_FILES

    tokenizer = CLIPTokenizer.from_pretrained(str(resolve("sd-turbo", DIFFUSERS_FILES) / "tokenizer"))
    limit = tokenizer.model_max_length
    assert limit == 77
    at_limit, over_limit = " ".join(["a"] * (limit - 2)), " ".join(["a"] * (limit - 1))
    long_sentence = "a small brown dog with a red collar runs across a wide green field of tall grass " * 3
    captions = ["a dog runs on the grass", at_limit, over_limit, long_sentence, "a blue square"]
    lengths = [len(tokenizer(caption).input_ids) for caption in captions]
    assert lengths[1] == limit and lengths[2] == limit + 1
    expected = sum(length > limit for length in lengths)
    assert expected == 2
    images = (_images() * 2)[: len(captions)]

    scorer = load_scorer("image_roundtrip", image_cache_dir=tmp_path, **TINY)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = scorer.score(captions, images)
    assert result["truncated_texts"] == expected
    ours = [str(w.message) for w in caught if "truncated" in str(w.message)]
    assert len(ours) == 1 and ours[0].startswith(f"{expected} of {len(captions)} captions") and "77" in ours[0]
    assert [w.category for w in caught if "truncated" in str(w.message)] == [TruncationWarning]
    assert scorer.generator.images_generated == len(captions)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = scorer.score(captions, images)  # images from the cache: the captions are still truncated
    assert again["truncated_texts"] == expected and scorer.generator.images_generated == len(captions)
    assert [w.category for w in caught if "truncated" in str(w.message)] == [TruncationWarning]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert scorer.score(CAPTIONS, _images())["truncated_texts"] == 0
    assert not [w for w in caught if "captions exceed" in str(w.message)]
    # what is counted is what the pipeline does: the over-limit caption renders exactly as its first 75 words
    seed = [123]
    cut = scorer.generator.generate([over_limit], seed)[0]
    assert np.array_equal(np.asarray(cut), np.asarray(scorer.generator.generate([at_limit], seed)[0]))
    assert not np.array_equal(np.asarray(scorer.generator.generate([" ".join(["a"] * 40)], seed)[0]),
                              np.asarray(cut))


class ColourGenerator:
    """A plugged-in text-to-image generator (the card's ``MyApiGenerator``): one plain image per (prompt, seed)."""

    identity = "test/colour-generator@1"
    settings = {"size": 16}
    batch_size = 2

    def __init__(self):
        self.prompts = []

    def generate(self, prompts, seeds):
        self.prompts += list(prompts)
        return [Image.new("RGB", (16, 16), ((len(p) * 37) % 256, seed % 256, 90)) for p, seed in zip(prompts, seeds)]


def test_card_example_of_a_plugged_in_generator_runs(tiny_hub, tmp_path, monkeypatch):
    """The metric card's Python example, executed as written with a plugged-in generator."""
    import re

    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    card = (REPO / "metrics" / "image_roundtrip" / "README.md").read_text()
    (example,) = [block for block in re.findall(r"```python\n(.*?)```", card, re.S) if "MyApiGenerator" in block]
    namespace = {"MyApiGenerator": ColourGenerator, "predictions": CAPTIONS, "images": _images()}
    exec(compile(example, "README.md", "exec"), namespace)
    scorer = namespace["scorer"]
    assert isinstance(scorer.generator, ColourGenerator) and scorer.generator.prompts == CAPTIONS
    result = scorer.score(CAPTIONS, _images())
    assert len(result["image_roundtrip_per_sample"]) == 3 and "truncated_texts" not in result  # it cannot tell


def test_without_the_image_cache_nothing_is_kept(tiny_hub, tmp_path, monkeypatch):
    """``use_image_cache=False``: no file is written and every call generates its images again."""
    from capeval.image_roundtrip.scorer import ImageRoundTripScorer

    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    generator = ColourGenerator()
    scorer = ImageRoundTripScorer(weights=generator, image_cache_dir=tmp_path / "images", use_image_cache=False,
                                  device="cpu")
    first = scorer.score(CAPTIONS, _images())
    again = scorer.score(CAPTIONS, _images())
    assert generator.prompts == CAPTIONS * 2 and again == first
    assert not list(tmp_path.rglob("*.png"))
