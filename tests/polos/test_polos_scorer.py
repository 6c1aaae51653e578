"""Polos against a hand computation from the component outputs (tiny random encoders from the hub cache); batch
semantics; input errors."""

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError
from capeval.core.scoring import load_scorer


def _samples():
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (20 + i, 30, 3), dtype=np.uint8)) for i in range(3)]
    images[1] = images[1].convert("P")  # official data loading converts to RGB before the CLIP transform
    preds = ["a dog runs on the grass", "two cats sleep", "a red car parked outside"]
    refs = [["a dog running", "an animal on a lawn", "dog"], ["cats sleeping together"], ["a car", "a parked car"]]
    return preds, images, refs


def _pixels(image):
    """Official Polos image path: RGB first, then Resize(224, bicubic) -> CenterCrop -> ToTensor -> Normalize."""
    from torchvision.transforms import functional as F

    image = F.center_crop(F.resize(image.convert("RGB"), 224, interpolation=F.InterpolationMode.BICUBIC), 224)
    return F.normalize(F.to_tensor(image), (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))


def _clip_image(scorer, image):
    with torch.no_grad():
        return scorer.clip.model.encode_image(_pixels(image)[None])[0].numpy().astype(np.float64)


def _clip_text(scorer, text):
    import open_clip

    with torch.no_grad():
        return scorer.clip.model.encode_text(open_clip.tokenize(["A photo depicts " + text]))[0].numpy().astype(np.float64)


def _hidden(scorer, texts):
    """Hidden states (float64 numpy, one list of (T, D) arrays per text) of each text encoded on its own."""
    out = []
    for text in texts:
        ids = scorer.encoder.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            states = scorer.encoder.model(**ids, output_hidden_states=True).hidden_states
        out.append([h[0].numpy().astype(np.float64) for h in states])
    return out


def _mix(scorer, group_states):
    """Scalar mix of the first position; layer-norm statistics over all tokens of the texts in the group."""
    head = scorer.head
    w = np.exp(head.scalar_parameters.detach().numpy().astype(np.float64))
    w /= w.sum()
    gamma = float(head.gamma.detach()[0])
    out = []
    for states in group_states:
        mixed = 0
        for k, wk in enumerate(w):
            pooled = np.concatenate([other[k].ravel() for other in group_states])
            mixed = mixed + wk * (states[k][0] - pooled.mean()) / np.sqrt(pooled.var() + 1e-12)
        out.append(gamma * mixed)
    return out


def _mlp(scorer, x):
    linears = [m for m in scorer.head.mlp if isinstance(m, torch.nn.Linear)]
    (w1, b1), (w2, b2), (w3, b3) = [(m.weight.detach().double().numpy(), m.bias.detach().double().numpy())
                                    for m in linears]
    h = np.tanh(w2 @ np.tanh(w1 @ x + b1) + b2)
    return 1 / (1 + np.exp(-(w3 @ h + b3)[0]))


def _hand_polos(scorer, preds, images, refs, cand_se, ref_se):
    out = []
    for i, (pred, image, rs) in enumerate(zip(preds, images, refs)):
        img, c_clip, c_se = _clip_image(scorer, image), _clip_text(scorer, pred), cand_se[i]
        per_ref = []
        for j, r in enumerate(rs):
            r_clip, r_se = _clip_text(scorer, r), ref_se[i][j]
            x = np.concatenate([r_se, c_se, np.abs(c_se - r_se), c_se * r_se, img, c_clip, np.abs(img - c_clip),
                                img * c_clip, np.abs(r_clip - c_clip), r_clip * c_clip])
            assert x.shape == (4 * 16 + 6 * 32,)
            per_ref.append(_mlp(scorer, x))
        out.append(max(per_ref))
    return np.array(out)


def test_polos_equals_hand_computation(tiny_hub):
    scorer = load_scorer("polos", device="cpu")
    preds, images, refs = _samples()
    result = scorer.score(preds, images, refs)
    cand_se = [_mix(scorer, [h])[0] for h in _hidden(scorer, preds)]
    ref_se = [[_mix(scorer, [h])[0] for h in _hidden(scorer, rs)] for rs in refs]
    expected = _hand_polos(scorer, preds, images, refs, cand_se, ref_se)
    np.testing.assert_allclose(result["polos_per_sample"], expected, atol=1e-5)
    assert result["polos"] == pytest.approx(expected.mean(), abs=1e-6)
    assert result["truncated_texts"] == 0


def test_official_batch_statistics_equal_hand_computation(tiny_hub):
    """statistics="batch": candidates of a chunk pooled together; the j-th references of its samples pooled."""
    scorer = load_scorer("polos", device="cpu", batch_size=3, statistics="batch")
    preds, images, refs = _samples()
    refs = [["a dog running", "dog"], ["cats sleeping together", "two cats"], ["a car", "a parked car outside"]]
    result = scorer.score(preds, images, refs)["polos_per_sample"]
    cand_se = _mix(scorer, _hidden(scorer, preds))
    by_position = [_mix(scorer, _hidden(scorer, [rs[j] for rs in refs])) for j in range(2)]
    ref_se = [[by_position[j][i] for j in range(2)] for i in range(3)]
    np.testing.assert_allclose(result, _hand_polos(scorer, preds, images, refs, cand_se, ref_se), atol=1e-5)
    cand, ref = scorer.official_batch_embeddings(preds, refs)
    np.testing.assert_allclose(cand.numpy(), np.array(cand_se), atol=1e-5)
    np.testing.assert_allclose(ref.numpy(), np.array([v for vs in ref_se for v in vs]), atol=1e-5)
    per_sentence = load_scorer("polos", device="cpu").encoder.encode_texts(preds)
    assert (cand - per_sentence).abs().max() > 1e-3  # the official batch dependence is real


def test_per_sentence_mode_is_batch_and_order_invariant(tiny_hub):
    preds, images, refs = _samples()
    base = load_scorer("polos", device="cpu", batch_size=64).score(preds, images, refs)["polos_per_sample"]
    small = load_scorer("polos", device="cpu", batch_size=1).score(preds, images, refs)["polos_per_sample"]
    order = [2, 0, 1, 2]
    shuffled = load_scorer("polos", device="cpu", batch_size=2).score(
        [preds[i] for i in order], [images[i] for i in order], [refs[i][::-1] for i in order])["polos_per_sample"]
    np.testing.assert_allclose(small, base, atol=1e-6)
    np.testing.assert_allclose(shuffled, [base[i] for i in order], atol=1e-6)


def test_batch_statistics_equal_per_sentence_at_batch_size_one(tiny_hub):
    preds, images, refs = _samples()
    per_sentence = load_scorer("polos", device="cpu").score(preds, images, refs)["polos_per_sample"]
    official = load_scorer("polos", device="cpu", batch_size=1, statistics="batch").score(
        preds, images, refs)["polos_per_sample"]
    np.testing.assert_allclose(official, per_sentence, atol=1e-6)


def test_long_texts_are_counted_and_warned(tiny_hub):
    scorer = load_scorer("polos", device="cpu")
    long_reference = "a " * 400  # the tiny byte-level vocabulary: one token per character
    with pytest.warns(UserWarning, match="exceed 512 SimCSE tokens"):
        result = scorer.score(["a dog"], [Image.new("RGB", (8, 8))], [["a dog", long_reference]])
    assert result["truncated_texts"] == 1
    assert result["clip_truncated_texts"] == 1


@pytest.mark.parametrize("kwargs, message", [
    ({"references": None}, "needs references"),
    ({"references": [[]]}, "empty reference list"),
    ({"references": [["a dog", " "]]}, "empty caption"),
    ({"predictions": [""]}, "empty caption"),
    ({"images": []}, "mismatched lengths"),
    ({"images": ["/nonexistent/image.png"]}, "not found"),
    ({"references": [["a"], ["b"]]}, "1 predictions but 2 reference entries"),
])
def test_input_errors(tiny_hub, kwargs, message):
    scorer = load_scorer("polos", device="cpu")
    inputs = {"predictions": ["a dog"], "images": [Image.new("RGB", (8, 8))], "references": [["a dog"]], **kwargs}
    with pytest.raises(InputError, match=message):
        scorer.score(**inputs)


def test_unknown_statistics_option_is_rejected(tiny_hub):
    with pytest.raises(ValueError, match="statistics must be one of"):
        load_scorer("polos", device="cpu", statistics="corpus")


def _openai_clip_emulation():
    """The independent emulation of OpenAI's CUDA CLIP written in tests/clip_s/test_official_precision.py."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[1] / "clip_s" / "test_official_precision.py"
    spec = importlib.util.spec_from_file_location("openai_clip_emulation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_official_precision_equals_polos_0_1_3_numerics(tiny_hub):
    """polos 0.1.3 on CUDA: clip.load(device="cuda") gives fp16 CLIP features, whose |a−b| and a⊙b are fp16;
    torch.cat with the fp32 SimCSE vectors promotes to fp32; SimCSE and the head run in fp32."""
    import open_clip

    from capeval.core.hub import resolve

    emulation = _openai_clip_emulation()
    scorer = load_scorer("polos", device="cpu", precision="official")
    assert scorer.encoder.model.dtype == torch.float32 and scorer.head.mlp[0].weight.dtype == torch.float32
    preds, images, refs = _samples()
    result = scorer.score(preds, images, refs)["polos_per_sample"]
    clip = emulation.OpenAIClip(resolve(scorer.config["clip_weights"]), half=True)

    def text(t):
        return clip.encode_text(open_clip.tokenize(["A photo depicts " + t]))[0]

    cand_se, expected = scorer.encoder.encode_texts(preds), []  # SimCSE vectors: a component output
    for i, (pred, image, rs) in enumerate(zip(preds, images, refs)):
        img = clip.encode_image(_pixels(image)[None])[0]
        c_clip, per_ref = text(pred), []
        for r_se, r in zip(scorer.encoder.encode_texts(rs), rs):
            r_clip, c_se = text(r), cand_se[i]
            x = torch.cat((r_se, c_se, (c_se - r_se).abs(), c_se * r_se, img, c_clip, (img - c_clip).abs(),
                           img * c_clip, (r_clip - c_clip).abs(), r_clip * c_clip))
            assert x.dtype == torch.float32
            with torch.no_grad():
                per_ref.append(float(scorer.head.mlp(x[None])[0, 0]))
        expected.append(max(per_ref))
    np.testing.assert_allclose(result, expected, rtol=0, atol=1e-6)
    default = load_scorer("polos", device="cpu").score(preds, images, refs)["polos_per_sample"]
    assert np.abs(np.array(default) - expected).max() > 1e-5  # fp32 CLIP is a different computation
