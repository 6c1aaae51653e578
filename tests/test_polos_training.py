"""M²LHF on synthetic judgments with a learnable signal: validation MSE falls, Pearson rises, and the saved head
reloads and scores exactly as the trained one; the data reader; the batch-statistics training path."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError
from capeval.cli import main
from capeval.polos_training import FeatureBank, Recipe, head_scores, read_judgments
from capeval.scoring import load_scorer

WORDS = ["dog", "cat", "car", "tree", "boat", "bird", "house", "road"]


def _rows(n, seed):
    r = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        good = bool(r.integers(0, 2))
        word = WORDS[r.integers(0, 8)]
        out.append({"image": f"{r.integers(0, 4)}.png", "candidate": f"a {'good' if good else 'bad'} photo of a {word}",
                    "references": [f"a photo of a {word}", "a picture"][: 1 + int(r.integers(0, 2))],
                    "score": 0.9 if good else 0.1})
    return out


@pytest.fixture
def judgments(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    for name, n, seed in (("train", 1024, 1), ("val", 32, 2)):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(json.dumps(r) for r in _rows(n, seed)))
    return tmp_path


def test_training_learns_and_the_artifact_reloads(tiny_hub, judgments, capsys):
    tmp_path = judgments
    code = main(["train", "polos", "--train", str(tmp_path / "train.jsonl"), "--val", str(tmp_path / "val.jsonl"),
                 "--images", str(tmp_path), "--out", str(tmp_path / "head"), "--lr", "3e-3", "--max-epochs", "8",
                 "--hidden", "64,32", "--device", "cpu"])
    assert code == 0
    history = json.loads((tmp_path / "head" / "training.json").read_text())["history"]
    best = max(history, key=lambda h: h["pearson"])
    assert best["pearson"] > history[0]["pearson"] + 0.3
    assert best["mse"] < history[0]["mse"] * 0.9
    card = (tmp_path / "head" / "README.md").read_text()
    assert "library_name: capeval" in card and f"{best['pearson']:.4f}" in card
    assert "validation MSE" in capsys.readouterr().out  # the logged validation correlation, per epoch

    val = read_judgments(tmp_path / "val.jsonl", tmp_path)
    trained = load_scorer("polos", weights=str(tmp_path / "head"), device="cpu")
    scores = trained.score([r["candidate"] for r in val], [r["image"] for r in val],
                           [r["references"] for r in val])["polos_per_sample"]
    gold = np.array([r["score"] for r in val])
    assert np.corrcoef(scores, gold)[0, 1] == pytest.approx(best["pearson"], abs=1e-4)  # the best epoch was saved
    bank = FeatureBank(trained).build(val)
    with torch.no_grad():
        training_path = head_scores(trained.head, bank, torch.arange(len(val))).numpy()
    np.testing.assert_allclose(scores, training_path, atol=1e-5)


def test_batch_statistics_training_path_matches_the_official_scoring(tiny_hub, judgments):
    """Pooling per-sentence moments (training) equals the batch-wide statistics computed from the tokens (scoring)."""
    rows = read_judgments(judgments / "val.jsonl", judgments)[:8]
    scorer = load_scorer("polos", device="cpu", batch_size=8, statistics="batch")
    scored = scorer.score([r["candidate"] for r in rows], [r["image"] for r in rows],
                          [r["references"] for r in rows])["polos_per_sample"]
    bank = FeatureBank(scorer).build(rows)
    with torch.no_grad():
        pooled = head_scores(scorer.head, bank, torch.arange(8), statistics="batch").numpy()
        per_sentence = head_scores(scorer.head, bank, torch.arange(8)).numpy()
    np.testing.assert_allclose(pooled, scored, atol=1e-5)
    assert np.abs(pooled - per_sentence).max() > 1e-6


def test_scalar_mix_dropout_is_training_only(tiny_hub, judgments):
    rows = read_judgments(judgments / "val.jsonl", judgments)[:4]
    scorer = load_scorer("polos", device="cpu")
    bank = FeatureBank(scorer).build(rows)
    with torch.no_grad():
        clean = head_scores(scorer.head, bank, torch.arange(4))
        torch.manual_seed(0)
        dropped = head_scores(scorer.head, bank, torch.arange(4), layer_dropout=0.5)
    assert not torch.allclose(clean, dropped)
    assert Recipe().scalar_mix_dropout == 0.1


def test_reader_accepts_the_official_polaris_csv(tmp_path):
    (tmp_path / "polaris.csv").write_text('mt,refs,score,imgid\n"a dog","[\'a dog running\', \'a puppy\']",0.75,1.jpg\n')
    rows = read_judgments(tmp_path / "polaris.csv", "imgs")
    assert rows == [{"image": "imgs/1.jpg", "candidate": "a dog", "references": ["a dog running", "a puppy"],
                     "score": 0.75}]


@pytest.mark.parametrize("row, message", [
    ({"image": "a.png", "candidate": "a dog", "references": ["x"]}, "lacks 'score'"),
    ({"image": "a.png", "candidate": "a dog", "references": [], "score": 0.5}, "empty reference list"),
    ({"image": "a.png", "candidate": " ", "references": ["x"], "score": 0.5}, "empty candidate"),
    ({"image": "a.png", "candidate": "a dog", "references": ["x"], "score": 4}, "outside"),
])
def test_reader_rejects_bad_rows(tmp_path, row, message):
    (tmp_path / "bad.jsonl").write_text(json.dumps(row))
    with pytest.raises(InputError, match=message):
        read_judgments(tmp_path / "bad.jsonl")
