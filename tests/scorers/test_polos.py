"""Polos against a hand computation from the component outputs; batch semantics; official-checkpoint conversion."""

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError
from capeval.scoring import load_scorer


def _samples():
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (20 + i, 30, 3), dtype=np.uint8)) for i in range(3)]
    preds = ["a dog runs on the grass", "two cats sleep", "a red car parked outside"]
    refs = [["a dog running", "an animal on a lawn", "dog"], ["cats sleeping together"], ["a car", "a parked car"]]
    return preds, images, refs


def _hand_polos(scorer, preds, images, refs):
    """numpy re-derivation: per-sentence layer norm, softmax mix, CLS, feature order, MLP, max over refs."""
    tok, enc, head = scorer.tokenizer, scorer.encoder, scorer.head
    w = torch.softmax(head.scalar_parameters.detach(), 0).numpy()
    gamma = head.gamma.detach().numpy()[0]

    def sentence(text):
        ids = tok(text, return_tensors="pt")
        with torch.no_grad():
            hidden = [h[0].numpy().astype(np.float64) for h in enc(**ids, output_hidden_states=True).hidden_states]
        mix = sum(wk * (h - h.mean()) / np.sqrt(h.var() + 1e-12) for wk, h in zip(w, hidden))
        return gamma * mix[0]

    layers = [m for m in head.mlp if isinstance(m, torch.nn.Linear)]
    mats = [(l.weight.detach().numpy().astype(np.float64), l.bias.detach().numpy().astype(np.float64)) for l in layers]

    def mlp(x):
        x = np.tanh(mats[0][0] @ x + mats[0][1])
        x = np.tanh(mats[1][0] @ x + mats[1][1])
        return 1 / (1 + np.exp(-(mats[2][0] @ x + mats[2][1])[0]))

    clip = scorer.clip
    out = []
    for pred, image, rs in zip(preds, images, refs):
        img = clip.encode_images([image])[0].numpy()
        c_clip = clip.encode_texts(["A photo depicts " + pred])[0].numpy()
        c_se = sentence(pred)
        per_ref = []
        for r in rs:
            r_clip = clip.encode_texts(["A photo depicts " + r])[0].numpy()
            r_se = sentence(r)
            feats = np.concatenate([r_se, c_se, np.abs(c_se - r_se), c_se * r_se, img, c_clip, np.abs(img - c_clip),
                                    img * c_clip, np.abs(r_clip - c_clip), r_clip * c_clip])
            per_ref.append(mlp(feats))
        out.append(max(per_ref))
    return np.array(out)


def test_polos_equals_hand_computation(tiny_hub):
    scorer = load_scorer("polos", device="cpu")
    preds, images, refs = _samples()
    result = scorer.score(preds, images, refs)
    np.testing.assert_allclose(result["polos_per_sample"], _hand_polos(scorer, preds, images, refs), atol=1e-5)
    assert result["polos"] == pytest.approx(np.mean(result["polos_per_sample"]))


def test_per_sentence_mode_is_batch_and_order_invariant(tiny_hub):
    preds, images, refs = _samples()
    base = load_scorer("polos", device="cpu", batch_size=64).score(preds, images, refs)["polos_per_sample"]
    small = load_scorer("polos", device="cpu", batch_size=1).score(preds, images, refs)["polos_per_sample"]
    order = [2, 0, 1]
    shuffled = load_scorer("polos", device="cpu", batch_size=2).score(
        [preds[i] for i in order], [images[i] for i in order], [refs[i] for i in order])["polos_per_sample"]
    np.testing.assert_allclose(small, base, atol=1e-5)
    np.testing.assert_allclose(shuffled, [base[i] for i in order], atol=1e-5)


def test_batch_statistics_equal_per_sentence_at_batch_size_one(tiny_hub):
    preds, images, refs = _samples()
    single_refs = [r[:1] for r in refs]  # at batch size 1 the official batch holds one sentence
    per_sentence = load_scorer("polos", device="cpu").score(preds, images, single_refs)["polos_per_sample"]
    official = load_scorer("polos", device="cpu", batch_size=1, statistics="batch").score(
        preds, images, single_refs)["polos_per_sample"]
    np.testing.assert_allclose(official, per_sentence, atol=1e-5)
    batched = load_scorer("polos", device="cpu", batch_size=3, statistics="batch").score(
        preds, images, single_refs)["polos_per_sample"]
    assert not np.allclose(batched, per_sentence, atol=1e-7)  # the official batch dependence is real


def test_official_checkpoint_converts(tiny_hub, tmp_path):
    from capeval.cli import main
    from capeval.scorers.polos import load_head

    torch.manual_seed(0)
    feature_dim, h1, h2 = 4 * 768 + 6 * 512, 2304, 1152
    state = {f"scalar_mix.scalar_parameters.{i}": torch.randn(1) for i in range(13)}
    state["scalar_mix.gamma"] = torch.randn(1)
    for i, (o, n) in enumerate(((h1, feature_dim), (h2, h1), (1, h2)), 1):
        state[f"ff.0.ff.linear_{i}.weight"] = torch.randn(o, n) * 0.01
        state[f"ff.0.ff.linear_{i}.bias"] = torch.randn(o)
    state["encoder.model.embeddings.word_embeddings.weight"] = torch.randn(4, 3)  # ignored
    torch.save({"state_dict": state, "epoch": 1}, tmp_path / "reprod.ckpt")
    assert main(["convert", "polos", str(tmp_path / "reprod.ckpt"), str(tmp_path / "out")]) == 0
    head, config = load_head(str(tmp_path / "out"))
    assert config["feature_dim"] == 6144 and config["hidden"] == [2304, 1152]
    assert torch.equal(head.mlp[3].weight, state["ff.0.ff.linear_2.weight"])
    assert torch.equal(head.scalar_parameters, torch.cat([state[f"scalar_mix.scalar_parameters.{i}"] for i in range(13)]))
    direct, direct_config = load_head(str(tmp_path / "reprod.ckpt"))  # the official file loads directly too
    assert direct_config == config
    for key, value in head.state_dict().items():
        assert torch.equal(direct.state_dict()[key], value), key
    torch.save({"state_dict": {"unrelated": torch.zeros(1)}}, tmp_path / "other.ckpt")
    with pytest.raises(ValueError, match="not an official Polos checkpoint"):
        main(["convert", "polos", str(tmp_path / "other.ckpt"), str(tmp_path / "out2")])


def test_polos_needs_references(tiny_hub):
    scorer = load_scorer("polos", device="cpu")
    with pytest.raises(InputError, match="needs references"):
        scorer.score(["a dog"], [Image.new("RGB", (8, 8))])
    with pytest.raises(InputError, match="empty reference list"):
        scorer.score(["a dog"], [Image.new("RGB", (8, 8))], [[]])
