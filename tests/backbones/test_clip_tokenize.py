"""CLIP tokenisation as OpenAI's ``clip.tokenize`` (CLIPScore, PAC-S): the literal ``<|startoftext|>`` /
``<|endoftext|>`` in a caption are SOT / EOT, open_clip's ``<start_of_text>`` / ``<end_of_text>`` are ordinary text,
texts without them keep open_clip's ids; lengths counted for truncation are those of the ids used.

Expected ids are built here from open_clip's ``SimpleTokenizer.encode`` on pieces of the text, never from capeval."""

import re

import numpy as np
import pytest
import torch
from PIL import Image

from capeval.backbones.clip import ClipBackbone
from capeval.core.scoring import load_scorer

SOT, EOT = 49406, 49407
CONTEXT = 77
PREFIX = "A photo depicts "
_OFFICIAL_LITERALS = re.compile(r"(<\|startoftext\|>|<\|endoftext\|>)")


@pytest.fixture(scope="module")
def tokenizer():
    from open_clip.tokenizer import SimpleTokenizer

    return SimpleTokenizer()


@pytest.fixture(scope="module")
def backbone(tiny_hub):
    return ClipBackbone("openai-clip-vit-b-32", device="cpu")


def _cleaned(text):
    from open_clip.tokenizer import basic_clean, whitespace_clean

    return whitespace_clean(basic_clean(text)).lower()  # the official cleaning, done before the byte-pair regex


def split_on_literals(tokenizer, text):
    """SOT + ids + EOT with each official literal as SOT/EOT and the pieces between encoded as plain text.

    Valid where no literal directly follows punctuation (there the official punctuation run takes ``<|``)."""
    ids = [SOT]
    for piece in _OFFICIAL_LITERALS.split(_cleaned(text)):
        if piece == "<|startoftext|>":
            ids.append(SOT)
        elif piece == "<|endoftext|>":
            ids.append(EOT)
        elif piece.strip():
            ids.extend(tokenizer.encode(piece))
    return ids + [EOT]


def spelled_out(tokenizer, text):
    """open_clip's special spellings as the official tokenizer reads them: ``<``, ``end``, ``_``, ``of``, ``_``,
    ``text``, ``>`` (each a pre-token of its own, so spacing them out changes no id)."""
    text = _cleaned(text)
    for word in ("start", "end"):
        text = text.replace(f"<{word}_of_text>", f" < {word} _ of _ text > ")
    return [SOT, *tokenizer.encode(text), EOT]


def rows(ids_list):
    out = torch.zeros(len(ids_list), CONTEXT, dtype=torch.long)
    for i, ids in enumerate(ids_list):
        if len(ids) > CONTEXT:
            ids = ids[: CONTEXT - 1] + [EOT]
        out[i, : len(ids)] = torch.tensor(ids)
    return out


LITERAL_CAPTIONS = [
    "<|endoftext|> a dog on a couch",                      # start
    "a dog <|endoftext|> on a couch",                      # middle
    "a dog on a couch <|endoftext|>",                      # end
    "<|endoftext|><|endoftext|> a <|endoftext|> dog <|endoftext|>",  # repeated
    "dog<|endoftext|>cat",                                 # adjacent to words
    "2<|endoftext|>3 dogs",                                # adjacent to digits
    "A DOG <|ENDOFTEXT|> ON A COUCH",                      # upper case: lower-cased first, so special
    "a dog <|EndOfText|>'s bone <|endoftext|>.",           # mixed case; contraction and punctuation after
    "<|startoftext|> a dog",
    "a dog<|startoftext|>cat <|StartOfText|><|endoftext|>",
    "a dog\n\t <|endoftext|>    on a couch ",              # whitespace cleaned first
    "a dog &lt;|endoftext|&gt; on a couch",                # html-unescaped first (official basic_clean)
    "un chien sur le canapé 😀 <|endoftext|> “quoted”",
]


@pytest.mark.parametrize("caption", LITERAL_CAPTIONS)
def test_official_literals_are_sot_and_eot(backbone, tokenizer, caption):
    expected = split_on_literals(tokenizer, caption)
    assert backbone.text_ids(caption) == expected
    assert backbone.tokenize([caption]).tolist() == rows([expected]).tolist()
    assert EOT in expected[1:-1] or SOT in expected[1:-1]


@pytest.mark.parametrize("caption", ["a dog.<|endoftext|>", "'<|endoftext|> dog", "a dog!!<|startoftext|>"])
def test_literal_after_punctuation_stays_text_as_officially(backbone, tokenizer, caption):
    # the official regex scans left to right: the punctuation run ``.<|`` is one pre-token, so nothing is special
    expected = [SOT, *tokenizer.encode(caption), EOT]
    assert backbone.text_ids(caption) == expected
    assert SOT not in expected[1:-1] and EOT not in expected[1:-1]


@pytest.mark.parametrize("caption", ["<end_of_text>", "a dog <end_of_text> on a couch", "dog<end_of_text>cat",
                                     "A DOG <END_OF_TEXT>", "<start_of_text> a dog <end_of_text>"])
def test_open_clip_spellings_are_ordinary_text(backbone, tokenizer, caption):
    expected = spelled_out(tokenizer, caption)
    assert SOT not in expected[1:-1] and EOT not in expected[1:-1]
    assert backbone.text_ids(caption) == expected
    assert backbone.tokenize([caption]).tolist() == rows([expected]).tolist()


ORDINARY = [
    "a dog runs across a field",
    "It's a dog's life; they're here, we've got 12,345 items!!",
    "  Mixed   CASE\twith\nnewlines  ",
    "naïve café — “quoted” ‘text’ … ñ ü ß 日本語のキャプション 中文 한국어",
    "emoji 😀🐶👍🏽 and flags 🇫🇷 and ZWJ 👩‍👩‍👧",
    "punctuation: (a) [b] {c} <d> | e & f @ g # h $ i % ^ * + = ~ ` / \\ ?",
    "html &amp; entities &lt;b&gt; and a broken <| pipe |> and endoftext words",
    "a " + "very long caption about many dogs and cats " * 20,
    "",
]


def test_ordinary_captions_keep_open_clip_ids(backbone, tokenizer):
    import open_clip

    assert backbone.tokenize(ORDINARY).tolist() == open_clip.tokenize(ORDINARY).tolist()
    for caption in ORDINARY:
        assert backbone.text_ids(caption) == [SOT, *tokenizer.encode(caption), EOT]
        assert backbone.truncation.length(caption) == len(tokenizer.encode(caption)) + 2


def test_truncation_counts_the_ids_used(backbone, tokenizer):
    fits = "dog <|endoftext|> " * 37 + "dog"           # 1 + 74 + 1 + 1 = 77 ids
    over = fits + " cat"                                  # 78 ids
    for text, n in ((fits, 77), (over, 78)):
        expected = split_on_literals(tokenizer, text)
        assert len(expected) == n and backbone.truncation.length(text) == n
        assert backbone.tokenize([text]).tolist() == rows([expected]).tolist()
    assert len(tokenizer.encode(fits)) + 2 > CONTEXT     # read as text it would have counted as truncated
    assert backbone.truncation.count([fits, over, fits]) == 1
    assert backbone.tokenize([over])[0, -1].item() == EOT


def test_clip_s_scores_literal_captions_like_hand_built_ids(tiny_hub, tokenizer):
    scorer = load_scorer("clip_s", device="cpu")
    model = scorer.backbone.model
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8))
    captions = ["a dog<|endoftext|>on a couch", "A DOG <|ENDOFTEXT|> ON A COUCH", "a dog <end_of_text> on a couch",
                "a dog", "<|startoftext|>a dog"]
    result = scorer.score(captions, [image] * len(captions))
    ids = [split_on_literals(tokenizer, PREFIX + c) for c in captions[:2]]
    ids += [spelled_out(tokenizer, PREFIX + captions[2])]
    ids += [split_on_literals(tokenizer, PREFIX + c) for c in captions[3:]]
    with torch.no_grad():
        text = model.encode_text(rows(ids)).float()
        img = model.encode_image(scorer.backbone.preprocess(image)[None]).float()
    cos = torch.nn.functional.cosine_similarity(text, img.expand_as(text), dim=-1)
    expected = 2.5 * cos.clamp(min=0)
    np.testing.assert_allclose(result["clip_s_per_sample"], expected.numpy(), atol=1e-6)
    # as officially, CLIP pools at the first EOT: what follows a literal <|endoftext|> does not count
    per_sample = result["clip_s_per_sample"]
    assert per_sample[0] == pytest.approx(per_sample[3], abs=1e-5)
    assert per_sample[1] == pytest.approx(per_sample[3], abs=1e-5)
    assert result["truncated_texts"] == 0
