"""Text encoders run length-bucketed batches padded to their longest member; on FULL-SIZE random weights the features
equal those of the full-padding path (77 CLIP tokens, 32 BLIP-2 tokens, 512 SimCSE tokens, 384 MPNet tokens) to
≤ 1e-5, whatever the batch size and order. Expected values come from the models' own forwards on fully padded
tokens, never from the trimmed path. Polos' official batch-statistics mode keeps the official batches."""

import json
import random

import numpy as np
import pytest
import torch

from capeval.core.errors import TruncationWarning
from capeval.core.caches import EmbeddingCache

TEXTS = [
    "A photo depicts a dog.",
    "A photo depicts a man riding a brown horse along the beach at sunset while two friends watch from the dunes",
    "A photo depicts two cats",
    "A photo depicts a red bus on a street <|endoftext|> in the rain",  # the literal is EOT mid-text (official)
    "A photo depicts " + "a very long caption " * 25,  # over 77 CLIP tokens: truncated, EOT kept
    "A photo depicts a child playing with a ball in a park near a lake.",
    "A photo depicts a bowl of fruit",
]
HF_TEXTS = [t.replace("A photo depicts ", "") for t in TEXTS if "<|" not in t][:5]


def cpu_text_rows(width):
    """Rows of a CPU text forward ``width`` tokens wide: the most of 24, 16, 8, 4, 2, 1 within 256 tokens."""
    return next((rows for rows in (24, 16, 8, 4, 2) if rows * width <= 256), 1)


def _shuffled(items, seed=0):
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    return order


def _invariance(encode, texts, expected, set_batch_size, alone=None):
    """Features at batch size 64 in order and at batch size 3 in a shuffled order all equal ``expected`` (≤ 1e-5),
    and a text's feature is bitwise the same alone (``alone[text]`` when given: encoded alone on an empty cache),
    among the others and in any order. (On CPU, batch sizes 1, 3 and 64 are all rounded up to whole forwards of every
    width, ``shapes.text_batch_size``: 48, 48 and 96 texts, so these few texts in order ran the very same forwards at
    each; a text alone is batch size 1's forward.)"""
    set_batch_size(64)
    together = encode(texts)
    np.testing.assert_allclose(together.numpy(), expected, atol=1e-5, rtol=0)
    order = _shuffled(texts)
    set_batch_size(3)
    shuffled = encode([texts[i] for i in order])
    np.testing.assert_allclose(shuffled.numpy(), expected[order], atol=1e-5, rtol=0)
    assert torch.equal(shuffled, together[order])
    for i, text in enumerate(texts):
        if alone is None:
            set_batch_size(64)  # and an empty cache
            single = encode([text])[0]
        else:
            single = alone[text]
        assert torch.equal(single, together[i]), text


@pytest.fixture(scope="module")
def clip(full_size_clip_dir):  # open_clip.create_model("ViT-B-32", pretrained=None), written once per session
    from capeval.backbones.clip import ClipBackbone

    return ClipBackbone(str(full_size_clip_dir), device="cpu")


@pytest.fixture(scope="module")
def clip_alone(clip):
    """Each of TEXTS and HF_TEXTS encoded alone, on an empty cache (the reference of the bitwise tests below)."""
    alone = {}
    for text in TEXTS + HF_TEXTS:
        clip.reset_caches()
        alone[text] = clip.encode_texts([text], show_progress=False)[0]
    return alone


def _clip_full_padding(backbone, texts):
    tokens = backbone.tokenize(texts)  # the official 77-token tokens
    assert tokens.shape[1] == 77
    with torch.inference_mode():
        return backbone.model.encode_text(tokens).float().numpy()  # open_clip's own forward


def _set(backbone, reset):
    def set_batch_size(batch_size):
        backbone.batch_size = batch_size
        reset()
    return set_batch_size


def test_clip_trimmed_text_features_equal_the_77_token_path(clip, clip_alone):
    """Prompted texts (after the prompt's states) and plain ones, mixed."""
    texts = TEXTS + HF_TEXTS
    expected = _clip_full_padding(clip, texts)
    _invariance(lambda texts: clip.encode_texts(texts, show_progress=False), texts, expected,
                _set(clip, clip.reset_caches), alone=clip_alone)


def test_clip_text_forwards_hold_one_rounded_width_and_fixed_rows(tmp_path):
    """Each text runs at its length rounded up to a multiple of 4 in forwards of the most of 24, 16, 8, 4, 2 or 1 rows
    within 256 tokens on CPU; batches never mix widths, so a width's forwards are all full but its last (batch size 30
    becomes 48 texts: whole forwards). Texts that begin with the CLIP-S prompt (SOT + 3 words) never mix with the
    others and embed only their tokens after it: the prompt runs once per backbone, in a forward of its own. (Shapes
    only: a narrow random CLIP with OpenAI's tokenizer and 77 positions runs the same code as ViT-B/32.)"""
    from capeval.backbones.clip import ClipBackbone, build_clip, save_open_clip
    from capeval.core.constants import OPENAI_PREPROCESS

    config = {"embed_dim": 32, "quick_gelu": True,
              "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 64, "layers": 2, "head_width": 16},
              "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 4, "layers": 2}}
    torch.manual_seed(0)
    save_open_clip(tmp_path, build_clip(config).state_dict(), config, OPENAI_PREPROCESS)
    clip = ClipBackbone(str(tmp_path), device="cpu")
    shapes = []
    original = clip.model.token_embedding.forward

    def recording(tokens):
        shapes.append(tuple(tokens.shape))
        return original(tokens)

    words = "dog man horse beach sunset friends street rain child ball park lake".split()
    prompted = TEXTS + [f"A photo depicts {' '.join(words[:1 + i % len(words)])} {i}" for i in range(70)]
    plain = HF_TEXTS + [f"{' '.join(words[:1 + i % len(words)])} {i}" for i in range(70)]
    clip.model.token_embedding.forward = recording
    clip.batch_size = 30
    clip.encode_texts(prompted + plain, show_progress=False)
    clip.reset_caches()
    clip.encode_texts(prompted[:5], show_progress=False)
    del clip.model.token_embedding.forward

    def forwards(texts, prompt):
        widths = [min(-(-min(len(clip.text_ids(t)), 77) // 4) * 4, 77) for t in texts]
        count = {w: widths.count(w) for w in sorted(set(widths))}
        rows = {w: cpu_text_rows(w) for w in count}
        assert len(texts) < 24 or max(count.values()) > 24  # some width fills a forward
        return [(rows[w], w - prompt) for w, n in count.items() for _ in range(-(-n // rows[w]))]

    assert shapes == [*forwards(plain, 0), (1, 4), *forwards(prompted, 4), *forwards(prompted[:5], 4)]
    assert all(clip.text_ids(t)[:4] == clip.text_ids("A photo depicts")[:4] for t in prompted)
    assert min(len(clip.text_ids(t)) for t in prompted) < 12 and max(len(clip.text_ids(t)) for t in prompted) > 77


def test_clip_s_scores_equal_the_77_token_path_on_full_size_weights(clip):
    from PIL import Image

    from capeval.clip_s.scorer import ClipScorer

    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (40, 60, 3), dtype=np.uint8)) for _ in range(3)]
    preds = [t.replace("A photo depicts ", "") for t in TEXTS[:3]]
    refs = [[t.replace("A photo depicts ", "") for t in TEXTS[3:]]] * 3
    clip.batch_size = 2
    clip.reset_caches()
    with pytest.warns(TruncationWarning, match="exceed 77 CLIP tokens"):  # the long reference, as officially
        result = ClipScorer(None, clip_backbone=clip).score(preds, images, refs)
    with torch.inference_mode():
        image = clip.model.encode_image(torch.stack([clip.preprocess(im) for im in images])).numpy()
    cand = _clip_full_padding(clip, TEXTS[:3])
    ref = _clip_full_padding(clip, TEXTS[3:])
    unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    clip_s = 2.5 * np.maximum((unit(image) * unit(cand)).sum(-1), 0)
    ref_sim = np.maximum((unit(cand) @ unit(ref).T).max(-1), 0)
    np.testing.assert_allclose(result["clip_s_per_sample"], clip_s, atol=1e-5)
    np.testing.assert_allclose(result["refclip_s_per_sample"], 2 * clip_s * ref_sim / (clip_s + ref_sim), atol=1e-5)


def test_alpha_clip_text_path_is_trimmed_and_equal(full_size_clip_dir, tmp_path):
    from capeval.backbones.alpha_clip import AlphaClip, build_alpha_clip
    from capeval.backbones.clip import save_open_clip

    config = json.loads((full_size_clip_dir / "open_clip_config.json").read_text())
    torch.manual_seed(1)
    save_open_clip(tmp_path, build_alpha_clip(config["model_cfg"]).state_dict(), config["model_cfg"],
                   config["preprocess_cfg"])
    alpha = AlphaClip(str(tmp_path), device="cpu")
    expected = _clip_full_padding(alpha, TEXTS)
    _invariance(lambda texts: alpha.encode_texts(texts, show_progress=False), TEXTS, expected,
                _set(alpha, alpha.reset_caches))
    with pytest.raises(ValueError, match="preprocess_workers"):
        AlphaClip(str(tmp_path), device="cpu", preprocess_workers=2)


def test_blip2_text_path_equals_max_length_padding_on_a_full_size_qformer(full_size_qformer_blip2_dir):
    from capeval.blip2.scorer import MAX_TEXT_TOKENS, Blip2Backbone, lavis_clean_caption

    backbone = Blip2Backbone(str(full_size_qformer_blip2_dir), device="cpu")  # a BERT-base-size Q-Former
    assert backbone.model.config.qformer_config.hidden_size == 768
    assert backbone.model.config.qformer_config.num_hidden_layers == 12
    texts = [t.replace("A photo depicts ", "") for t in TEXTS]
    tokens = backbone.tokenizer([lavis_clean_caption(t) for t in texts], padding="max_length",
                                max_length=MAX_TEXT_TOKENS, truncation=True, return_tensors="pt")
    with torch.inference_mode():  # transformers' own ITC forward (normalised text embeddings), fully padded
        out = backbone.model(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"],
                             pixel_values=torch.zeros(len(texts), 3, 224, 224), use_image_text_matching_head=False)
    expected = out.text_embeds.float().numpy()

    def encode(batch):
        return torch.nn.functional.normalize(backbone.encode_texts(batch, show_progress=False), dim=-1)

    def set_batch_size(batch_size):
        backbone.batch_size = batch_size
        backbone.text_cache = EmbeddingCache(backbone.text_cache.namespace)

    _invariance(encode, texts, expected, set_batch_size)


def _assert_full_size(model):
    assert model.config.hidden_size == 768 and model.config.num_hidden_layers == 12


def test_simcse_per_sentence_path_equals_512_token_padding_on_full_size_roberta(full_size_clip_dir,
                                                                              full_size_roberta_dir):
    from capeval.functional.polos import scalar_mix
    from capeval.polos.checkpoint import head_config
    from capeval.polos.scorer import PolosScorer, head_from_config

    config = head_config(text_dim=768, clip_dim=512, clip_weights=str(full_size_clip_dir),
                         text_encoder=str(full_size_roberta_dir))
    torch.manual_seed(4)
    head = head_from_config(config)
    with torch.no_grad():
        head.scalar_parameters.normal_()
    scorer = PolosScorer(None, head=head, config=config, device="cpu")
    encoder = scorer.encoder
    _assert_full_size(encoder.model)
    with torch.inference_mode():
        batch = encoder.tokenizer(HF_TEXTS, padding="max_length", max_length=512, truncation=True,
                                  return_tensors="pt")
        states = encoder.model(**batch, output_hidden_states=True).hidden_states
        expected = scalar_mix([h.float() for h in states], batch["attention_mask"], head.scalar_parameters,
                              head.gamma, per_sentence=True)[:, 0].numpy()

    def set_batch_size(batch_size):
        encoder.batch_size = batch_size
        scorer.reset_caches()

    _invariance(encoder.encode_texts, HF_TEXTS, expected, set_batch_size)


def test_mpnet_path_equals_384_token_padding_on_full_size_mpnet(full_size_mpnet_dir):
    from capeval.text.mpnet import MPNetScorer

    encoder = MPNetScorer(str(full_size_mpnet_dir), device="cpu").encoder
    _assert_full_size(encoder.model)
    with torch.inference_mode():
        batch = encoder.tokenizer(HF_TEXTS, padding="max_length", max_length=384, truncation=True, return_tensors="pt")
        hidden = encoder.model(**batch).last_hidden_state.double()
    mask = batch["attention_mask"].unsqueeze(-1).double()
    expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).float().numpy()

    def set_batch_size(batch_size):
        encoder.batch_size = batch_size
        encoder.text_cache = EmbeddingCache(encoder.text_cache.namespace)

    _invariance(encoder.encode_texts, HF_TEXTS, expected, set_batch_size)


def test_polos_official_batch_mode_keeps_the_official_batches(tiny_hub):
    from capeval.core.scoring import load_scorer

    scorer = load_scorer("polos", device="cpu", batch_size=2, statistics="batch")
    preds = ["a much longer candidate caption about a dog", "a cat", "two birds on a wire"]
    refs = [["a dog", "a big brown dog running fast"], ["a cat sleeping on the sofa", "cat"], ["birds", "b"]]
    seen = []
    original = scorer.encoder.hidden_states

    def recording(texts):
        seen.append(list(texts))
        return original(texts)

    scorer.encoder.hidden_states = recording
    scorer.score(preds, [np.zeros((8, 8, 3), np.uint8)] * 3, refs)
    # official: chunks of batch_size samples in input order; candidates, then the j-th references of the chunk
    assert seen == [preds[:2], [refs[0][0], refs[1][0]], [refs[0][1], refs[1][1]],
                    preds[2:], [refs[2][0]], [refs[2][1]]]


def test_a_text_feature_is_bitwise_the_same_in_any_batch(clip, clip_alone):
    """Widths are the text's own (rounded) and every forward has the same number of rows: a text's feature does not
    depend on the texts it is batched with, the batch size or the order, bit for bit."""
    alone = clip_alone  # each text encoded alone, on an empty cache
    for batch_size, order in ((1, TEXTS), (3, TEXTS[::-1]), (64, TEXTS[1::2] + TEXTS[::2])):
        clip.batch_size = batch_size
        clip.reset_caches()
        together = clip.encode_texts(order, show_progress=False)
        for text, feature in zip(order, together):
            assert torch.equal(feature, alone[text]), (batch_size, text)


def test_an_image_feature_is_bitwise_the_same_in_any_batch(clip):
    """Image forwards have a fixed number of images (padded): a feature does not depend on the images it is batched
    with or the batch size, bit for bit — and equals the model's own forward of the official pixels."""
    from PIL import Image

    rng = np.random.default_rng(0)
    # 4 images: at batch size 3 a forward of 3 and one of 1, at 64 one forward of 4 (8 rows, ViT-B/32 on CPU)
    images = [Image.fromarray(rng.integers(0, 256, (40 + 7 * i, 60, 3), dtype=np.uint8)) for i in range(4)]
    clip.reset_caches()
    alone = [clip.encode_images([image], show_progress=False)[0] for image in images]
    for batch_size, order in ((1, [0, 1, 2, 3]), (3, [3, 2, 1, 0]), (64, [1, 3, 0, 2])):
        clip.batch_size = batch_size
        clip.reset_caches()
        together = clip.encode_images([images[i] for i in order], show_progress=False)
        for i, feature in zip(order, together):
            assert torch.equal(feature, alone[i]), (batch_size, i)
    with torch.inference_mode():
        direct = clip.model.encode_image(torch.stack([clip.preprocess(image) for image in images])).float()
    np.testing.assert_allclose(torch.stack(alone).numpy(), direct.numpy(), atol=1e-5, rtol=0)


def test_the_last_blocks_run_queries_and_mlp_at_the_pooled_position_only(clip, monkeypatch):
    """The last block of each tower runs its attention queries (and so its output projection) and its MLP at the class
    token (image) or end-of-text token (text) only, with keys and values from every position: the other positions'
    outputs are never read (the features equal open_clip's own forwards: tests above)."""
    from PIL import Image

    from capeval.backbones import clip_pooled

    seen = {}
    towers = {"image": clip.model.visual.transformer, "text": clip.model.transformer}
    tower_of = {id(tower.resblocks[-1].attn): name for name, tower in towers.items()}

    def spy(name, module):
        original = module.forward

        def recording(x, *args, **kwargs):
            seen.setdefault(name, []).append(tuple(x.shape))
            return original(x, *args, **kwargs)
        return recording

    def attention(attn, queries, keys, *args):
        seen.setdefault(f"{tower_of[id(attn)]} attention", []).append((tuple(queries.shape), tuple(keys.shape)))
        return one_query(attn, queries, keys, *args)

    one_query = clip_pooled.attention_at_one_query
    monkeypatch.setattr(clip_pooled, "attention_at_one_query", attention)
    for name, tower in towers.items():
        tower.resblocks[-1].mlp.forward = spy(name, tower.resblocks[-1].mlp)
    try:
        clip.reset_caches()
        clip.encode_images([Image.new("RGB", (50, 40), (200, 10, 10))], show_progress=False)
        clip.encode_texts(TEXTS[:2] + HF_TEXTS[:1], show_progress=False)  # 2 prompted, 1 plain: 2 forwards
    finally:
        for tower in towers.values():
            del tower.resblocks[-1].mlp.forward
    widths = sorted({(kind, -(-len(clip.text_ids(t)) // 4) * 4) for kind, t in
                     ((False, HF_TEXTS[0]), (True, TEXTS[0]), (True, TEXTS[1]))})  # plain first, then by width
    assert len(widths) == 3
    assert seen == {
        "image": [(8, 1, 768)], "image attention": [((8, 1, 768), (8, 50, 768))],  # 8 ViT-B/32 images per CPU forward
        "text": [(cpu_text_rows(width), 1, 512) for _, width in widths],
        # queries at the EOT only; keys over the whole width (prompted: the prompt's 4 states and the text's own)
        "text attention": [((cpu_text_rows(width), 1, 512), (cpu_text_rows(width), width, 512))
                           for _, width in widths],
    }
