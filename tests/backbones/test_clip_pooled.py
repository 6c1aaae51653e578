"""``capeval.backbones.clip_pooled`` against open_clip's own forwards on small random multi-layer models of the variants
its guards let through (LayerScale, a Linear text projection, eos pooling, LayerNorm after pooling), and the guards
and the backbone's prompt choice for models it must leave to open_clip. Full-size equality: test_text_trimming.py."""

import numpy as np
import pytest
import torch

from capeval.backbones.clip_pooled import (
    encode_image_pooled,
    encode_text_pooled,
    image_prunable,
    prompt_states,
    text_prunable,
)

SOT, EOT = 49406, 49407
PROMPT = [SOT, 320, 1125, 23008]  # SOT + 3 word ids


def _model(text=None, vision=None, seed=0):
    from open_clip.model import CLIP

    torch.manual_seed(seed)
    model = CLIP(embed_dim=32, vision_cfg={"image_size": 32, "patch_size": 8, "width": 64, "layers": 3,
                                           "head_width": 16, **(vision or {})},
                 text_cfg={"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 4, "layers": 3,
                           **(text or {})}).eval()
    for parameter in model.parameters():  # LayerScale and zero-initialised weights would hide a skipped term
        torch.nn.init.normal_(parameter, std=0.05)
    return model


def _tokens(rows, prompt):
    generator = torch.Generator().manual_seed(1)
    tokens = torch.zeros(len(rows), max(rows) + len(PROMPT) + 1, dtype=torch.long)
    for i, length in enumerate(rows):
        body = torch.randint(300, 40000, (length,), generator=generator)
        ids = torch.cat([torch.tensor(PROMPT if prompt else [SOT]), body, torch.tensor([EOT])])
        tokens[i, :len(ids)] = ids
    return tokens


@pytest.mark.parametrize("text", [{}, {"ls_init_value": 0.5}, {"proj_bias": True}, {"pool_type": "eos", "eos_id": EOT}],
                         ids=["plain", "layer-scale", "linear-projection", "eos"])
@pytest.mark.parametrize("prompted", [False, True])
def test_text_features_equal_open_clip_with_and_without_the_prompt_states(text, prompted):
    model = _model(text=text)
    assert text_prunable(model)
    tokens = _tokens([3, 11, 7, 1], prompted)
    with torch.inference_mode():
        expected = model.encode_text(torch.nn.functional.pad(tokens, (0, 77 - tokens.shape[1])))
        prompt = prompt_states(model, PROMPT) if prompted else None
        got = encode_text_pooled(model, tokens, prompt)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5, rtol=0)
    assert not torch.equal(expected[0], expected[1])  # distinct texts: the comparison can fail


@pytest.mark.parametrize("vision", [{}, {"ls_init_value": 0.5}, {"final_ln_after_pool": True}],
                         ids=["plain", "layer-scale", "ln-after-pool"])
def test_image_features_equal_open_clip(vision):
    model = _model(vision=vision)
    assert image_prunable(model)
    pixels = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        np.testing.assert_allclose(encode_image_pooled(model, pixels).numpy(), model.encode_image(pixels).numpy(),
                                   atol=1e-5, rtol=0)


def test_towers_the_pooled_forwards_do_not_cover_get_open_clips_own_forward():
    from capeval.backbones.clip import to_openai_fp16

    assert not image_prunable(_model(vision={"attentional_pool": True}))
    assert not image_prunable(_model(vision={"pool_type": "avg"}))
    assert not text_prunable(_model(text={"pool_type": "first"}))
    sequence_first = to_openai_fp16(_model())
    assert not text_prunable(sequence_first) and not image_prunable(sequence_first)
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    avg = _model(vision={"pool_type": "avg"})
    with torch.inference_mode():
        assert torch.equal(encode_image_pooled(avg, pixels), avg.encode_image(pixels))


def test_prompt_states_are_used_only_where_the_pooled_token_is_the_clip_end_of_text(tmp_path):
    """An eos-pooled model whose end-of-text id is not CLIP's would pool inside the prompt: no prompt states there."""
    from capeval.backbones.clip import ClipBackbone, save_open_clip

    def backbone(text):
        config = {"embed_dim": 32, "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 64, "layers": 3,
                                                  "head_width": 16},
                  "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 4, "layers": 3, **text},
                  "quick_gelu": False}  # as _model's CLIP: a local folder must say its activation
        directory = tmp_path / str(len(list(tmp_path.iterdir())))
        save_open_clip(directory, _model(text=text).state_dict(), config, {})
        return ClipBackbone(str(directory), device="cpu")

    caption = "A photo depicts a dog"
    for text, prompted in (({}, True), ({"pool_type": "eos", "eos_id": EOT}, True),
                           ({"pool_type": "eos", "eos_id": 1}, False)):
        clip = backbone(text)
        assert clip.prompted(clip.text_ids(caption)) is prompted, text
