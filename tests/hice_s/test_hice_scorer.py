"""HICE-S / RefHICE-S end to end with tiny Alpha-CLIP and SAM (offline hub cache) on the real example images."""

import numpy as np
import pytest
import torch

from capeval import InputError
from capeval.backbones.alpha_clip import encode_image_with_alpha
from capeval.core.scoring import load_scorer

SETTINGS = {"points_per_side": 4, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0, "max_regions": 4}
PREFIX = "A photo depicts "


class TablePhrases:
    """A stand-in parser with known output: the listed phrases of each caption (none for unknown captions)."""

    TABLE = {"a dog on the grass": ["dog", "grass", "dog on grass"], "two cats sleeping": ["two cats"],
             "a cat": ["cat"], "cats on a blanket": ["cats", "blanket"], "nothing to parse": []}

    def __init__(self):
        self.calls = []

    def extract(self, captions):
        self.calls.append(list(captions))
        return [list(self.TABLE.get(c, [])) for c in captions]


def make_scorer(**options):
    """A tiny-model scorer whose image and text towers share a projection and an output bias, so that
    image–text cosines are positive (a random tiny CLIP's are mostly negative, which the clipping zeroes)."""
    scorer = load_scorer("hice_s", phrase_parser=TablePhrases(), region_settings=SETTINGS, device="cpu", **options)
    model = scorer.backbone.model
    with torch.no_grad():
        model.text_projection.copy_(model.visual.proj)
        model.visual.ln_post.bias.fill_(1.0)
        model.ln_final.bias.fill_(1.0)
    return scorer


@pytest.fixture(scope="module")
def scorer(tiny_hub):
    return make_scorer(batch_size=3)


@pytest.fixture(scope="module")
def images(shared_data):
    root = shared_data / "images" / "pacscore"
    return [str(root / "image1.jpg"), str(root / "image2.jpg")]


def cos(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a @ b / (np.linalg.norm(a) * np.linalg.norm(b))


def hmean(*xs):
    return 0.0 if min(xs) <= 0 else len(xs) / sum(1 / x for x in xs)


def expected_scores(scorer, image_path, caption, refs):
    """Independent recomputation from raw model outputs (no capeval formula code)."""
    from PIL import Image

    backbone = scorer.backbone
    image = Image.open(image_path)
    masks = scorer.regions.masks(image)
    pixels = backbone.preprocess(image)[None].repeat(len(masks) + 1, 1, 1, 1)
    alpha = torch.stack([backbone.preprocess_mask(np.ones((image.height, image.width), bool), image.size)]
                        + [backbone.preprocess_mask(m, image.size) for m in masks])
    with torch.no_grad():
        visual = encode_image_with_alpha(backbone.model, pixels, alpha).numpy()
        texts = [PREFIX + caption] + [PREFIX + r for r in refs]
        phrases = TablePhrases.TABLE[caption]
        ref_phrases = list(dict.fromkeys(p for r in refs for p in TablePhrases.TABLE[r]))
        tokens = backbone.tokenize(texts + phrases + ref_phrases)
        text = backbone.model.encode_text(tokens).numpy()
    cap, ref_emb = text[0], text[1:len(texts)]
    ph = text[len(texts):len(texts) + len(phrases)]
    rph = text[len(texts) + len(phrases):]
    g_itc = 2.5 * max(cos(visual[0], cap), 0)
    sim = np.array([[2.5 * max(cos(p, r), 0) for r in visual[1:]] for p in ph])
    p, r = sim.max(1).mean(), sim.max(0).mean()
    l_itc = hmean(p, r)
    g_ttc = max(max(cos(cap, e), 0) for e in ref_emb)
    tsim = np.array([[max(cos(a, b), 0) for b in rph] for a in ph])
    tp, tr = tsim.max(1).mean(), tsim.max(0).mean()
    l_ttc = hmean(tp, tr)
    return {"global_itc": g_itc, "local_itc": l_itc, "hice_s": hmean(g_itc, l_itc),
            "global_ttc": g_ttc, "local_ttc": l_ttc,
            "refhice_s": hmean(g_itc, l_itc, g_ttc, l_ttc),
            "precision": sim.max(1), "recall": sim.max(0)}


def test_scores_match_an_independent_computation(scorer, images):
    captions = ["a dog on the grass", "two cats sleeping"]
    refs = [["a cat", "cats on a blanket"], ["cats on a blanket"]]
    result = scorer.score(captions, images, refs, return_report=True)
    for i in range(2):
        expected = expected_scores(scorer, images[i], captions[i], refs[i])
        for key in ("global_itc", "local_itc", "hice_s", "global_ttc", "local_ttc", "refhice_s"):
            assert result[f"{key}_per_sample"][i] == pytest.approx(expected[key], rel=1e-4, abs=1e-6), key
        report = result["reports"][i]
        np.testing.assert_allclose([p["precision"] for p in report["phrases"]], expected["precision"], rtol=1e-4)
        np.testing.assert_allclose([r["recall"] for r in report["regions"]], expected["recall"], rtol=1e-4)
        assert report["wrong_phrases"] == [p for p, v in zip(TablePhrases.TABLE[captions[i]], expected["precision"])
                                           if v < 0.5]
        assert report["unmentioned_regions"] == [m for m, v in enumerate(expected["recall"]) if v < 0.5]
    assert result["hice_s"] == pytest.approx(np.mean(result["hice_s_per_sample"]))
    assert min(result["hice_s_per_sample"]) > 0 and min(result["refhice_s_per_sample"]) > 0
    assert set(result["timings"]) == {"segmentation", "parsing", "encoding", "scoring"}


def test_batch_size_and_order_do_not_change_scores(tiny_hub, scorer, images):
    captions = ["a dog on the grass", "two cats sleeping", "a cat"]
    imgs = [images[0], images[1], images[1]]
    first = scorer.score(captions, imgs)["hice_s_per_sample"]
    other = make_scorer(batch_size=1)
    reordered = other.score(captions[::-1], imgs[::-1])["hice_s_per_sample"]
    np.testing.assert_allclose(first, reordered[::-1], rtol=1e-5)


def test_caption_without_phrases_follows_the_documented_policy(tiny_hub, scorer, images):
    result = scorer.score(["nothing to parse"], images[:1])
    assert result["no_phrase_captions"] == 1
    assert result["hice_s"] == pytest.approx(result["global_itc"]) and result["hice_s"] > 0  # "global" policy
    assert np.isnan(result["local_itc_per_sample"][0])
    zero = make_scorer(empty_phrases="zero")
    assert zero.score(["nothing to parse"], images[:1])["hice_s"] == 0.0


def test_bad_inputs_raise_clear_errors(scorer, images):
    with pytest.raises(InputError, match="mismatched lengths"):
        scorer.score(["a cat"], images)
    with pytest.raises(InputError, match="empty caption"):
        scorer.score([" "], images[:1])
    with pytest.raises(InputError, match="empty reference list"):
        scorer.score(["a cat"], images[:1], [[]])
    with pytest.raises(InputError):
        scorer.score(["a cat"], ["/nonexistent/image.jpg"])


def test_visualize_outlines_regions_and_lists_phrases(scorer, images):
    from PIL import Image

    picture = scorer.visualize(images[0], "a dog on the grass")
    original = Image.open(images[0])
    assert picture.mode == "RGB" and picture.width == original.width and picture.height > original.height
    report = scorer.score(["a dog on the grass"], images[:1], return_report=True)["reports"][0]
    colours = {tuple(c) for c in np.asarray(picture).reshape(-1, 3)[::7]}
    status_colours = {(220, 50, 50) if not r["mentioned"] else (40, 180, 80) for r in report["regions"]}
    assert status_colours <= colours  # outlines in the status colours
    panel = np.asarray(picture)[original.height:]
    assert (panel < 128).any()  # the text panel is written


def test_default_factual_parser_end_to_end_on_real_images(tiny_hub, images):
    """Tiny Alpha-CLIP, SAM and FACTUAL T5 from the offline hub cache, the scorer's default parser."""
    scorer = load_scorer("hice_s", region_settings=SETTINGS, device="cpu")
    result = scorer.score(["two cats sleeping", "a dog on the grass"], images, [["a cat"], ["a dog", "grass"]],
                          return_report=True)
    assert type(scorer.phrases).__name__ == "FactualParser"
    for key in ("hice_s", "refhice_s", "global_itc", "global_ttc"):
        values = result[f"{key}_per_sample"]
        assert len(values) == 2 and all(np.isfinite(v) and 0 <= v <= 2.5 for v in values), key
    assert 0 <= result["no_phrase_captions"] <= 2
    assert all(len(r["regions"]) >= 1 for r in result["reports"])


def test_bounded_mask_cache_keeps_scores_bitwise_and_segments_an_evicted_image_once_more(tiny_hub):
    from unittest import mock

    from PIL import Image

    rng = np.random.default_rng(3)
    images = [Image.fromarray(rng.integers(0, 255, (40 + 4 * i, 56, 3), dtype=np.uint8)) for i in range(5)]
    captions = ["a dog on the grass", "two cats sleeping", "a cat", "cats on a blanket", "a dog on the grass"]
    reference = make_scorer()
    expected = [reference.score([c], [im], return_report=True) for c, im in zip(captions, images)]

    budget = 2 * 4 * 56 * 56  # bytes of two images' masks at most (≤ 4 regions of ≤ 56×56 each)
    scorer = make_scorer(max_cached_images=2, max_cached_masks_bytes=budget)
    generator = scorer.regions.generator
    with mock.patch.object(generator, "generate", wraps=generator.generate) as spy:
        first = [scorer.score([c], [im], return_report=True) for c, im in zip(captions, images)]
        cache = scorer.regions.cache
        assert len(spy.call_args_list) == 5 and 1 <= len(cache) <= 2 and 0 < cache.nbytes <= budget
        spy.reset_mock()
        again = scorer.score([captions[0]], [images[0]], return_report=True)  # evicted by now
        assert [call.args[0].shape for call in spy.call_args_list] == [(40, 56, 3)]
        spy.reset_mock()
        scorer.score([captions[0]], [images[0]])  # just cached
        assert spy.call_args_list == []
        spy.reset_mock()
        both = scorer.score(captions[1:3] * 2, images[1:3] * 2)  # both evicted; each segmented once in the call
        assert sorted(call.args[0].shape[0] for call in spy.call_args_list) == [44, 48]
        assert len(cache) <= 2 and cache.nbytes <= budget
    keys = ("hice_s_per_sample", "global_itc_per_sample", "local_itc_per_sample", "reports")
    for got, want in zip([*first, again], [*expected, expected[0]]):
        assert all(got[k] == want[k] for k in keys)  # bitwise: exact float equality
    assert both["hice_s_per_sample"] == [r["hice_s_per_sample"][0] for r in expected[1:3]] * 2


def _random_images(count, seed=5):
    from PIL import Image

    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 255, (40, 48 + 4 * i, 3), dtype=np.uint8)) for i in range(count)]


def _truncation_warnings(call):
    import warnings

    from capeval.core.errors import TruncationWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    return out, [w for w in caught if issubclass(w.category, UserWarning)], TruncationWarning


def test_factual_truncation_is_in_the_result_and_in_the_one_warning_of_each_call(tiny_hub):
    """``parser_truncated_texts``: the captions and references (every occurrence) whose prompted FACTUAL input is over
    64 tokens, counted here with the parser's tokenizer; one TruncationWarning per call names it with the CLIP count,
    whatever the caches hold; a second identical call counts and warns again."""
    from capeval.hice_s.phrases import FACTUAL_PROMPT

    scorer = load_scorer("hice_s", region_settings=SETTINGS, device="cpu", phrase_options={"max_output_length": 16})
    long_caption = "a man riding a horse on a sandy beach near the sea " * 8
    captions = [long_caption, "a cat", long_caption]
    refs = [[long_caption, "a dog"], ["grass"], ["a dog", f"  {long_caption}"]]
    tokenizer = scorer.phrases.parser.tokenizer
    parsed = [*captions, *(r for sample in refs for r in sample)]
    expected = sum(len(tokenizer(FACTUAL_PROMPT + t.strip())["input_ids"]) > 64 for t in parsed)
    assert expected == 4
    images = _random_images(3)
    for _ in range(2):  # the second call finds every graph and embedding cached
        result, caught, truncation_warning = _truncation_warnings(lambda: scorer.score(captions, images, refs))
        assert result["parser_truncated_texts"] == expected
        assert result["truncated_texts"] >= 4  # the long caption is over 77 CLIP tokens too
        assert len(caught) == 1 and caught[0].category is truncation_warning
        message = str(caught[0].message)
        assert f"{expected} of {len(parsed)} captions and references exceed the phrase parser's 64 input tokens" \
            in message and "77 CLIP tokens" in message
    # no reference: only the captions are parsed; nothing over the limits: no warning, counts 0
    result, caught, _ = _truncation_warnings(lambda: scorer.score(captions, images))
    assert result["parser_truncated_texts"] == 2 and len(caught) == 1
    result, caught, _ = _truncation_warnings(lambda: scorer.score(["a cat"], images[:1], [["a dog"]]))
    assert result["parser_truncated_texts"] == 0 and result["truncated_texts"] == 0 and caught == []


def test_parser_count_with_spacy_and_a_plugged_in_parser(tiny_hub, scorer):
    image = _random_images(1)
    spacy_scorer = load_scorer("hice_s", phrase_parser="spacy", region_settings=SETTINGS, device="cpu")
    result = spacy_scorer.score(["a dog on the grass"], image, [["a dog"]])
    assert result["parser_truncated_texts"] == 0
    assert result["provenance"]["spacy_model"] == spacy_scorer.phrases.provenance_extras()["spacy_model"]
    assert "parser_truncated_texts" not in scorer.score(["a dog on the grass"], image)  # cannot tell
    assert "spacy_model" not in scorer.provenance  # a plugged-in parser records nothing


def test_cache_dir_reaches_the_factual_parser(tiny_hub, tmp_path, monkeypatch):
    """The scorer's ``cache_dir`` is the only place holding the tiny weights: the default hub cache is empty."""
    import shutil

    import huggingface_hub.constants as hub_constants

    from capeval.core.hub import registered_weights

    cache = tmp_path / "cache"
    for name in ("alpha-clip-vit-l-14", "sam-vit-b", "flan-t5-base-vg-factual-sg"):
        repo = "models--" + registered_weights()[name].repo_id.replace("/", "--")
        shutil.copytree(tiny_hub / repo, cache / repo, symlinks=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(empty))
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(empty))
    scorer = load_scorer("hice_s", region_settings=SETTINGS, device="cpu", cache_dir=str(cache))
    assert type(scorer.phrases).__name__ == "FactualParser"
    assert scorer.phrases.parser.model.name_or_path.startswith(str(cache))
    assert scorer.score(["a dog on the grass"], _random_images(1))["parser_truncated_texts"] == 0
    spacy_scorer = load_scorer("hice_s", phrase_parser="spacy", region_settings=SETTINGS, device="cpu",
                               cache_dir=str(cache))  # accepted and ignored by the spaCy parser
    assert type(spacy_scorer.phrases).__name__ == "SpacyParser"


def test_visualize_takes_a_bare_string_as_one_reference(scorer):
    image = _random_images(1)[0]
    scorer.phrases.calls.clear()
    one = np.asarray(scorer.visualize(image, "a dog on the grass", "cats on a blanket"))
    assert scorer.phrases.calls == [["a dog on the grass"], ["cats on a blanket"]]
    listed = np.asarray(scorer.visualize(image, "a dog on the grass", ["cats on a blanket"]))
    assert np.array_equal(one, listed)
    with pytest.raises(InputError, match="empty"):
        scorer.visualize(image, "a dog on the grass", ["cats on a blanket", " "])


def test_card_command_line_parses():
    """Every ``capeval score ...`` command of the metric card is accepted by the command-line parser."""
    import re
    import shlex
    from pathlib import Path

    from capeval.cli import build_parser

    card = (Path(__file__).resolve().parents[2] / "metrics" / "hice_s" / "README.md").read_text()
    commands = re.findall(r"`(capeval score [^`]+)`", card)
    assert commands
    for command in commands:
        args = build_parser("score").parse_args(shlex.split(command)[1:])
        assert args.metric == "hice_s" and args.input, command
