"""Caption seeds, the generated-image cache and the diffusers generator (tiny random SD-Turbo layout)."""

import numpy as np
import pytest
from PIL import Image

from capeval.image_roundtrip.pipeline import DiffusersGenerator, GeneratedImageCache, TextToImageGenerator, caption_seed, render


class SeedImages:
    """A plugged-in generator: a 4x4 image whose pixels are a function of (prompt, seed); counts its calls."""

    identity = "test/seed-images@1"
    settings = {"size": 4}
    batch_size = 2

    def __init__(self):
        self.calls = []

    def generate(self, prompts, seeds):
        self.calls.append(list(prompts))
        return [Image.fromarray(np.full((4, 4, 3), (len(p) * 7 + s) % 256, dtype=np.uint8)) for p, s in zip(prompts, seeds)]


def test_plugged_generator_satisfies_the_protocol():
    assert isinstance(SeedImages(), TextToImageGenerator)


def test_caption_seed_depends_on_caption_seed_and_index_only():
    assert caption_seed("a dog", 0, 0) == caption_seed("a dog", 0, 0)
    assert len({caption_seed("a dog", 0, 0), caption_seed("a dog", 1, 0), caption_seed("a dog", 0, 1),
                caption_seed("a cat", 0, 0)}) == 4
    assert 0 <= caption_seed("x", 5, 3) < 2**63


def test_render_generates_each_distinct_image_once_and_reads_the_cache(tmp_path):
    generator = SeedImages()
    cache = GeneratedImageCache(tmp_path)
    captions = ["a dog", "a cat", "a dog"]
    first = render(generator, captions, images_per_caption=2, cache=cache)
    assert sum(len(call) for call in generator.calls) == 4  # two distinct captions x two images
    assert all(len(call) <= generator.batch_size for call in generator.calls)
    for caption, row in zip(captions, first):
        expected = [(len(caption) * 7 + caption_seed(caption, 0, j)) % 256 for j in range(2)]
        assert [image.getpixel((0, 0))[0] for image in row] == expected
    again = render(generator, list(reversed(captions)), images_per_caption=2, cache=cache)
    assert sum(len(call) for call in generator.calls) == 4  # all from disk
    assert [[np.asarray(i).tolist() for i in row] for row in again] == \
        [[np.asarray(i).tolist() for i in row] for row in reversed(first)]
    assert not list(tmp_path.rglob("*.tmp"))
    key = GeneratedImageCache.key(generator.identity, generator.settings, "a dog", caption_seed("a dog", 0, 0))
    with Image.open(cache.path(key)) as stored:
        assert stored.text["caption"] == "a dog"


def test_cache_key_covers_generator_settings_caption_and_seed():
    base = GeneratedImageCache.key("g@1", {"steps": 1}, "a dog", 3)
    assert len({base, GeneratedImageCache.key("g@2", {"steps": 1}, "a dog", 3),
                GeneratedImageCache.key("g@1", {"steps": 2}, "a dog", 3),
                GeneratedImageCache.key("g@1", {"steps": 1}, "a cat", 3),
                GeneratedImageCache.key("g@1", {"steps": 1}, "a dog", 4)}) == 5


def test_diffusers_generator_images_do_not_depend_on_the_batch(tiny_hub):
    generator = DiffusersGenerator("sd-turbo", steps=2, height=32, width=32, device="cpu", batch_size=3)
    assert '"stabilityai/sd-turbo@' in generator.cache_namespace.description
    assert generator.identity == str(generator.cache_namespace)
    together = generator.generate(["a dog on grass", "a red car", "two cats"], [1, 2, 3])
    alone = generator.generate(["a red car"], [2])
    assert generator.pipeline_calls == 2 and generator.images_generated == 4
    assert together[0].size == (32, 32) and together[0].mode == "RGB"
    np.testing.assert_array_equal(np.asarray(together[1]), np.asarray(alone[0]))
    assert np.asarray(together[0]).std() > 0
    assert not np.array_equal(np.asarray(together[0]), np.asarray(together[2]))


def test_diffusers_generator_rejects_bad_settings(tiny_hub):
    with pytest.raises(ValueError, match="steps"):
        DiffusersGenerator("sd-turbo", steps=0, device="cpu")
