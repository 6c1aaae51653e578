"""M²LHF on synthetic judgments with a learnable signal: validation MSE falls, Pearson rises, and the saved head
reloads and scores exactly as the trained one."""

import json

import numpy as np
import pytest
from PIL import Image

from capeval.cli import main
from capeval.scoring import load_scorer


def _write(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows))


def test_training_learns_and_the_artifact_reloads(tiny_hub, tmp_path, capsys):
    rng = np.random.default_rng(0)
    for i in range(4):
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    words = ["dog", "cat", "car", "tree", "boat", "bird", "house", "road"]

    def rows(n, seed):
        r = np.random.default_rng(seed)
        out = []
        for _ in range(n):
            good = bool(r.integers(0, 2))
            word = words[r.integers(0, 8)]
            caption = f"a {'good' if good else 'bad'} photo of a {word}"
            out.append({"image": f"{r.integers(0, 4)}.png", "candidate": caption,
                        "references": [f"a photo of a {word}", "a picture"], "score": 0.9 if good else 0.1})
        return out

    _write(tmp_path / "train.jsonl", rows(96, 1))
    _write(tmp_path / "val.jsonl", rows(32, 2))
    code = main(["train", "polos", "--train", str(tmp_path / "train.jsonl"), "--val", str(tmp_path / "val.jsonl"),
                 "--images", str(tmp_path), "--out", str(tmp_path / "head"), "--lr", "3e-3", "--max-epochs", "8",
                 "--device", "cpu"])
    assert code == 0
    history = json.loads((tmp_path / "head" / "training.json").read_text())["history"]
    best = max(history, key=lambda h: h["pearson"])
    assert best["pearson"] > history[0]["pearson"] + 0.2
    assert best["mse"] < history[0]["mse"]
    assert (tmp_path / "head" / "README.md").exists()

    val = [json.loads(x) for x in (tmp_path / "val.jsonl").read_text().splitlines()]
    trained = load_scorer("polos", weights=str(tmp_path / "head"), device="cpu")
    scores = trained.score([r["candidate"] for r in val], [str(tmp_path / r["image"]) for r in val],
                           [r["references"] for r in val])["polos_per_sample"]
    gold = np.array([r["score"] for r in val])
    assert np.corrcoef(scores, gold)[0, 1] == pytest.approx(best["pearson"], abs=1e-4)  # the best epoch was saved

    # the reloaded artifact scores exactly as the training path computes with the saved head
    import torch

    from capeval.polos_training import FeatureBank, head_scores, read_judgments

    bank = FeatureBank(trained).build(read_judgments(tmp_path / "val.jsonl", tmp_path))
    with torch.no_grad():
        training_path = head_scores(trained.head.eval(), bank, torch.arange(len(val))).numpy()
    np.testing.assert_allclose(scores, training_path, atol=1e-5)
