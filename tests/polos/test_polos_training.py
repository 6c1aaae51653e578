"""M²LHF on synthetic judgments with a learnable signal: validation MSE falls, Pearson rises, and the saved head
reloads and scores exactly as the trained one; early stopping and the kept head follow the official Lightning
callbacks; the data reader; the batch-statistics training path."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError
from capeval.cli import main
from capeval.polos import training
from capeval.polos.training import FeatureBank, Recipe, head_scores, new_scorer, read_judgments, train_head
from capeval.core.scoring import load_scorer

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


# The official trainer (keio-smilab24/Polos, pytorch-lightning 1.2.10) re-implemented from its documented rules, to
# check capeval's trainer against: EarlyStopping(monitor="pearson", mode="max", min_delta=0, patience=1) and
# ModelCheckpoint(save_top_k=2, mode="max"), both run after each epoch's validation (not on the sanity check), on the
# Pearson that Polos logs as a float32 tensor (NaN when undefined).

def _lightning_stop_epoch(pearsons, patience=1, min_delta=0.0):
    """The epoch (1-based) after whose validation EarlyStopping stops training, or None if it never does."""
    best, wait = torch.tensor(float("-inf")), 0
    for epoch, value in enumerate(pearsons, 1):
        current = torch.tensor(value, dtype=torch.float32)
        if bool(current - min_delta > best):  # improvement: strictly greater, NaN never
            best, wait = current, 0
        else:
            wait += 1
            if wait >= patience:
                return epoch
    return None


def _lightning_best_checkpoint(pearsons, top_k=2):
    """The epoch of ModelCheckpoint's ``best_model_path``: a top-k dict in insertion order; a new score enters while
    fewer than k are kept or when strictly above the worst kept one (which leaves); NaN is stored as -inf; the best
    is the first maximal entry."""
    kept = {}
    for epoch, value in enumerate(pearsons, 1):
        current = torch.tensor(value, dtype=torch.float32)
        if len(kept) == top_k:
            worst = min(kept, key=kept.get)
            if not bool(current > kept[worst]):
                continue
            del kept[worst]
        kept[epoch] = torch.tensor(float("-inf")) if torch.isnan(current) else current
    return max(kept, key=kept.get)


def test_training_learns_and_the_artifact_reloads(tiny_hub, judgments, capsys):
    tmp_path = judgments
    code = main(["train", "polos", "--train", str(tmp_path / "train.jsonl"), "--val", str(tmp_path / "val.jsonl"),
                 "--images", str(tmp_path), "--output", str(tmp_path / "head"), "--lr", "3e-3", "--max-epochs", "8",
                 "--hidden", "64,32", "--device", "cpu"])
    assert code == 0
    # formerly ``best = max(history)``, epoch 0 included: the old rule could keep the untrained head; the saved head is
    # now the official best checkpoint, a trained epoch's, recorded as ``best_epoch``
    report = json.loads((tmp_path / "head" / "training.json").read_text())
    history = report["history"]
    pearsons = [h["pearson"] for h in history[1:]]
    assert len(history) - 1 == (_lightning_stop_epoch(pearsons) or 8)
    best = history[_lightning_best_checkpoint(pearsons)]  # the saved head's epoch (never epoch 0)
    assert report["best_epoch"] == best["epoch"]
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


def _snapshots(patch, pearsons=None):
    """Record the head's weights at every validation (epoch 0 = before training); with ``pearsons``, the validation
    Pearson of epoch i is scripted as ``pearsons[i]``."""
    states, evaluate = [], training.evaluate_head

    def recording(head, bank, recipe):
        states.append({k: v.detach().clone() for k, v in head.state_dict().items()})
        metrics = evaluate(head, bank, recipe)
        return metrics if pearsons is None else {**metrics, "pearson": pearsons[len(states) - 1]}

    patch.setattr(training, "evaluate_head", recording)
    return states


def _same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_first_epoch_is_kept_even_when_worse_than_the_untrained_head(tiny_hub, judgments, monkeypatch):
    """Lightning's best score starts at -inf: the first epoch always improves, even when its validation Pearson is
    below the untrained head's. Crafted: the validation judgments are the untrained head's own scores (Pearson 1 before
    training). The old rule (best = the untrained head's Pearson, patience 1) stopped after epoch 1 and restored the
    untrained head; the official one keeps training while epochs improve and returns the best epoch's head."""
    train_rows = read_judgments(judgments / "train.jsonl", judgments)[:256]
    val_rows = read_judgments(judgments / "val.jsonl", judgments)
    scorer = new_scorer(init=None, clip_weights="openai-clip-vit-b-32", text_encoder="simcse-roberta-base",
                        hidden=(16, 8), seed=42, device="cpu")
    with torch.no_grad():
        own = head_scores(scorer.head.eval(), FeatureBank(scorer).build(val_rows), torch.arange(len(val_rows))).numpy()
    own = (own - own.min()) / (own.max() - own.min())
    val_rows = [{**row, "score": float(score)} for row, score in zip(val_rows, own)]
    states = _snapshots(monkeypatch)
    history = train_head(scorer, train_rows, val_rows, Recipe(lr=3e-3, max_epochs=6))

    assert history[0]["pearson"] == pytest.approx(1.0, abs=1e-6)
    assert history[1]["pearson"] < history[0]["pearson"]  # the case the old rule got wrong
    pearsons = [h["pearson"] for h in history[1:]]
    stop = _lightning_stop_epoch(pearsons)
    assert len(history) - 1 == (stop or 6) and len(states) == len(history)
    kept = _lightning_best_checkpoint(pearsons)
    assert kept >= 1 and kept == training.kept_epoch(history)
    final = scorer.head.state_dict()
    assert _same_weights(final, states[kept])
    assert not _same_weights(final, states[0])  # not the untrained head


@pytest.mark.parametrize("pearsons, patience, max_epochs, stop, kept", [
    ([0.9, 0.2, 0.1], 1, 5, 2, 1),  # the old rule: stop after epoch 1, keep the untrained head
    ([0.5, 0.1, 0.3, 0.3], 1, 5, 3, 2),  # a tie is no improvement; the earlier epoch is kept
    ([0.0, 0.3, 0.3 + 1e-9], 1, 5, 2, 1),  # compared as float32: equal
    ([0.5, 0.1, 0.3, 0.2, 0.35, 0.3, 0.3], 2, 8, 6, 4),  # patience counts consecutive epochs without improvement
    ([0.5, float("nan"), 0.4], 1, 5, 1, 1),  # NaN never improves, yet the only checkpoint is kept
    ([0.0, float("nan"), 0.4, 0.2, 0.1], 2, 6, 4, 2),  # a NaN epoch is replaced by the next real score
    ([0.0, 0.1, 0.2, 0.3], 1, 3, None, 3),  # max_epochs reached while improving
])
def test_early_stopping_and_the_kept_head_follow_lightning(tiny_hub, judgments, monkeypatch, pearsons, patience,
                                                            max_epochs, stop, kept):
    """Scripted validation Pearsons (epoch 0 first) over real training steps: the epochs run and the weights returned
    are those of the re-implemented Lightning callbacks (whose answers are also spelt out by hand)."""
    assert _lightning_stop_epoch(pearsons[1:], patience) == stop
    trained = (stop or max_epochs)
    assert _lightning_best_checkpoint(pearsons[1:trained + 1]) == kept
    scorer = new_scorer(init=None, clip_weights="openai-clip-vit-b-32", text_encoder="simcse-roberta-base",
                        hidden=(8, 8), seed=0, device="cpu")
    rows = read_judgments(judgments / "val.jsonl", judgments)
    states = _snapshots(monkeypatch, pearsons)
    history = train_head(scorer, rows, rows[:8], Recipe(lr=1e-2, batch_size=8, patience=patience,
                                                        max_epochs=max_epochs))
    np.testing.assert_array_equal([h["pearson"] for h in history], pearsons[:trained + 1])
    assert training.kept_epoch(history) == kept
    assert _same_weights(scorer.head.state_dict(), states[kept])
    assert not any(_same_weights(states[kept], states[e]) for e in range(len(states)) if e != kept)


def test_at_least_one_epoch_is_required(tiny_hub, judgments, capsys):
    """The kept head is a trained epoch's (never the head before training), so zero epochs is an input error."""
    assert main(["train", "polos", "--train", str(judgments / "val.jsonl"), "--val", str(judgments / "val.jsonl"),
                 "--images", str(judgments), "--output", str(judgments / "head"), "--max-epochs", "0", "--hidden", "8,8",
                 "--device", "cpu"]) == 2
    assert "max_epochs must be at least 1" in capsys.readouterr().err
    assert not (judgments / "head").exists()


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


def _same_bank(a, b, atol=1e-5):
    assert set(a) == set(b)
    for key in a:
        if a[key].is_floating_point():
            np.testing.assert_allclose(a[key].double().numpy(), b[key].double().numpy(), atol=atol, rtol=0,
                                       err_msg=key)
        else:
            assert torch.equal(a[key], b[key]), key


def test_sharded_features_merge_to_the_one_process_features_and_train_identically(tiny_hub, judgments, capsys):
    """``train polos-features --shard i/3`` ×3 + ``merge`` == the one-process bank; training reads the merged folder
    instead of encoding (the encoders are never called) and ends with the same weights and validation history."""
    from safetensors.torch import load_file

    from capeval.polos.training import load_features, new_scorer
    from capeval.polos.scorer import PolosScorer

    tmp_path = judgments
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()][:96]
    (tmp_path / "small.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    common = ["--images", str(tmp_path), "--device", "cpu", "--batch-size", "16"]
    for i in range(3):
        assert main(["train", "polos-features", "--data", str(tmp_path / "small.jsonl"), "--shard", f"{i}/3",
                     "--output", str(tmp_path / f"f{i}"), *common]) == 0
    for name in ("small", "val"):
        assert main(["train", "polos-features", "--data", str(tmp_path / f"{name}.jsonl"),
                     "--output", str(tmp_path / f"{name}-features"), *common]) == 0
    assert main(["merge", *(str(tmp_path / f"f{i}") for i in range(3)), "--output", str(tmp_path / "merged")]) == 0

    # independently: the one-process bank straight from the judgments, and the shards' own content
    reference_scorer = new_scorer(init=None, clip_weights="openai-clip-vit-b-32", text_encoder="simcse-roberta-base",
                                  hidden=(8, 8), seed=0, device="cpu")
    expected = FeatureBank(reference_scorer).build(read_judgments(tmp_path / "small.jsonl", tmp_path))
    merged = load_features(tmp_path / "merged")
    assert merged.rows == read_judgments(tmp_path / "small.jsonl", tmp_path)  # input order
    _same_bank(merged.bank, expected)
    _same_bank(load_features(tmp_path / "small-features").bank, expected)
    shard_rows = [json.loads((tmp_path / f"f{i}" / "polos_features.json").read_text())["indices"] for i in range(3)]
    assert shard_rows == [list(range(i, 96, 3)) for i in range(3)]
    assert all(len(load_file(str(tmp_path / f"f{i}" / "polos_features.safetensors"))["image"]) <= 4
               for i in range(3))  # each shard encodes only its own distinct items

    train = ["--lr", "3e-3", "--max-epochs", "3", "--hidden", "16,8", "--device", "cpu"]
    assert main(["train", "polos", "--train", str(tmp_path / "small.jsonl"), "--val", str(tmp_path / "val.jsonl"),
                 "--images", str(tmp_path), "--output", str(tmp_path / "scratch"), *train]) == 0
    calls = []
    with pytest.MonkeyPatch.context() as patch:  # training from features must not run the encoders
        patch.setattr(FeatureBank, "encode", lambda *a, **k: calls.append(1))
        assert main(["train", "polos", "--train", str(tmp_path / "merged"), "--val", str(tmp_path / "val-features"),
                     "--output", str(tmp_path / "from-features"), *train]) == 0
    assert calls == []
    histories = [json.loads((tmp_path / d / "training.json").read_text())["history"] for d in ("scratch",
                                                                                               "from-features")]
    assert len(histories[0]) == len(histories[1]) > 1
    for a, b in zip(*histories):
        assert a["epoch"] == b["epoch"]
        assert b["pearson"] == pytest.approx(a["pearson"], abs=1e-4) and b["mse"] == pytest.approx(a["mse"], abs=1e-6)
    heads = [load_file(str(tmp_path / d / "polos_head.safetensors")) for d in ("scratch", "from-features")]
    for key in heads[0]:
        np.testing.assert_allclose(heads[1][key].numpy(), heads[0][key].numpy(), atol=1e-5, err_msg=key)
    assert json.loads((tmp_path / "from-features" / "training.json").read_text())["train_rows"] == 96
    assert PolosScorer(str(tmp_path / "from-features"), device="cpu").config["clip_weights"] == "openai-clip-vit-b-32"


def test_feature_merge_and_training_refuse_incomplete_or_foreign_shards(tiny_hub, judgments, capsys):
    tmp_path = judgments
    common = ["--images", str(tmp_path), "--device", "cpu"]
    for i in range(3):
        assert main(["train", "polos-features", "--data", str(tmp_path / "val.jsonl"), "--shard", f"{i}/3",
                     "--output", str(tmp_path / f"f{i}"), *common]) == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "f0"), str(tmp_path / "f2"), "--output", str(tmp_path / "m")]) == 2
    assert "11 of 32 records are missing (first: [1, 4, 7, 10, 13])" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "f0"), str(tmp_path / "f1"), str(tmp_path / "f1"), str(tmp_path / "f2"),
                 "--output", str(tmp_path / "m")]) == 2
    assert "record 1 appears in more than one shard" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
    # a shard of other data (another file) is refused
    (tmp_path / "other.jsonl").write_text((tmp_path / "val.jsonl").read_text().replace("a picture", "an image"))
    assert main(["train", "polos-features", "--data", str(tmp_path / "other.jsonl"), "--shard", "1/3",
                 "--output", str(tmp_path / "g1"), *common]) == 0
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "f0"), str(tmp_path / "g1"), str(tmp_path / "f2"),
                 "--output", str(tmp_path / "m")]) == 2
    assert "data differ" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "f0"), str(tmp_path / "val.jsonl"), "--output", str(tmp_path / "m")]) == 2
    assert "not both" in capsys.readouterr().err
    # a lone shard is not a training set; features of other encoders do not fit the head
    train = ["--val", str(tmp_path / "val.jsonl"), "--images", str(tmp_path), "--hidden", "16,8", "--max-epochs", "1",
             "--device", "cpu"]
    assert main(["train", "polos", "--train", str(tmp_path / "f1"), "--output", str(tmp_path / "h"), *train]) == 2
    assert "holds shard 1/3 only (11 of 32 records)" in capsys.readouterr().err
    assert main(["merge", *(str(tmp_path / f"f{i}") for i in range(3)), "--output", str(tmp_path / "m")]) == 0
    meta = json.loads((tmp_path / "m" / "polos_features.json").read_text())
    meta["encoders"]["text_encoder"] = "some-other-simcse"
    (tmp_path / "m" / "polos_features.json").write_text(json.dumps(meta))
    assert main(["train", "polos", "--train", str(tmp_path / "m"), "--output", str(tmp_path / "h"), *train]) == 2
    assert "were computed with encoders" in capsys.readouterr().err
    assert main(["train", "polos-features", "--data", str(tmp_path / "val.jsonl"), "--shard", "3/3",
                 "--output", str(tmp_path / "x"), *common]) == 2
    assert "need 0 <= i < n" in capsys.readouterr().err


@pytest.mark.parametrize("hidden, message", [("a,b", "comma-separated positive integers"),
                                             ("64,,32", "comma-separated positive integers"),
                                             ("64.5", "comma-separated positive integers"),
                                             ("64,0", "must be positive")])
def test_bad_hidden_sizes_are_one_line_errors(judgments, capsys, hidden, message):
    tmp_path = judgments
    capsys.readouterr()
    assert main(["train", "polos", "--train", str(tmp_path / "train.jsonl"), "--val", str(tmp_path / "val.jsonl"),
                 "--images", str(tmp_path), "--output", str(tmp_path / "head"), "--hidden", hidden, "--device",
                 "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("capeval train: error: --hidden") and message in err, err
    assert not (tmp_path / "head").exists()
