"""With several CPU threads, a feature's bits depend on the text or image alone: not on its row inside the fixed-row
forward, the texts or images it is batched with, the batch size or the order. Two threads, the production forwards
of a random ViT-B/16 CLIP at full width (its towers cut to two blocks each to keep the test fast): the kernels split
the same work across threads as in the full model, and a 197-token image forward is where the image side showed it."""

import random

import numpy as np
import pytest
import torch

WORDS = ("a man woman dog cat red blue horse beach street bus park riding playing with on in the of near two small "
         "big sitting standing table plate food").split()


def _captions(count, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 16))) for _ in range(count)]


def _shuffled(items, seed):
    items = list(items)
    random.Random(seed).shuffle(items)
    return items


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    import open_clip

    from capeval.backbones.clip import ClipBackbone, build_clip, save_open_clip
    from capeval.core.constants import OPENAI_PREPROCESS

    config = dict(open_clip.get_model_config("ViT-B-16"), quick_gelu=True)
    config["vision_cfg"] = dict(config["vision_cfg"], layers=2)
    config["text_cfg"] = dict(config["text_cfg"], layers=2)
    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("clip")
    save_open_clip(directory, build_clip(config).state_dict(), config, OPENAI_PREPROCESS)
    backbone = ClipBackbone(str(directory), device="cpu")
    assert backbone.image_rows == 4 and backbone.model.visual.grid_size == (14, 14)
    return backbone


def _encode(clip, texts, batch_size=64):
    clip.batch_size = batch_size
    clip.reset_caches()
    return dict(zip(texts, clip.encode_texts(texts, show_progress=False)))


def test_text_features_are_bitwise_independent_of_order_company_and_batch_size(clip, two_threads):
    from capeval.core.constants import CLIPSCORE_PREFIX

    texts = [CLIPSCORE_PREFIX + t for t in _captions(40, 0)] + _captions(24, 1)  # prompted and plain forwards
    base = _encode(clip, texts)
    extra = [CLIPSCORE_PREFIX + t for t in _captions(20, 2)] + _captions(10, 3)
    for batch_size, batch in ((64, _shuffled(texts, 0)), (3, _shuffled(texts, 1)),
                              (64, _shuffled(texts + extra, 2)), (48, extra[:5] + texts[::-1])):
        features = _encode(clip, batch, batch_size)
        changed = [t for t in texts if not torch.equal(features[t], base[t])]
        assert not changed, (batch_size, len(changed))
    for text in texts[::8]:
        assert torch.equal(_encode(clip, [text])[text], base[text]), text


def test_image_features_are_bitwise_independent_of_order_company_and_batch_size(clip, two_threads):
    from PIL import Image

    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (50 + 3 * i, 64, 3), dtype=np.uint8)) for i in range(20)]

    def encode(indices, batch_size=64):
        clip.batch_size = batch_size
        clip.reset_caches()
        return dict(zip(indices, clip.encode_images([images[i] for i in indices], show_progress=False)))

    base = encode(range(16))
    for batch_size, indices in ((64, _shuffled(range(16), 0)), (5, _shuffled(range(16), 1)),
                                (64, _shuffled(range(20), 2)), (64, [3, 11])):
        features = encode(indices, batch_size)
        changed = [i for i in indices if i < 16 and not torch.equal(features[i], base[i])]
        assert not changed, (batch_size, changed)


def test_clip_s_and_refclip_s_are_bitwise_independent_of_order_and_added_references(clip, two_threads):
    from PIL import Image

    from capeval.clip_s.scorer import ClipScorer

    rng = np.random.default_rng(1)
    images = [Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)) for _ in range(24)]
    preds, refs = _captions(24, 4), [_captions(2, 100 + i) for i in range(24)]
    scorer = ClipScorer(None, clip_backbone=clip)
    clip.batch_size = 64

    def score(order, references):
        clip.reset_caches()
        result = scorer.score([preds[i] for i in order], [images[i] for i in order], [references[i] for i in order])
        inverse = np.argsort(order)
        return {key: np.asarray(result[key])[inverse] for key in ("clip_s_per_sample", "refclip_s_per_sample")}

    base = score(list(range(24)), refs)
    shuffled = score(_shuffled(range(24), 0), refs)
    np.testing.assert_array_equal(shuffled["clip_s_per_sample"], base["clip_s_per_sample"])
    np.testing.assert_array_equal(shuffled["refclip_s_per_sample"], base["refclip_s_per_sample"])
    more = [r + _captions(3, 200 + i) for i, r in enumerate(refs)]  # CLIP-S reads no reference
    np.testing.assert_array_equal(score(list(range(24)), more)["clip_s_per_sample"], base["clip_s_per_sample"])
