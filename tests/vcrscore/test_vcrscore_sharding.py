"""VCRScore's trained pipeline on the sharded path: ``capeval score vcrscore --shard i/3`` ×3 + ``capeval merge``
feed ``capeval train vcrscore --data``, which fits the regressor the one-process features give."""

import json

import numpy as np
import pytest
from PIL import Image

from capeval.cli import main
from capeval.vcrscore.regressor import FEATURE_NAMES, train_regressor
from capeval.core.scoring import load_scorer

WORDS = ["dog", "cat", "car", "person", "table", "cake", "plate", "grass", "road", "bird"]


def _records(tmp_path, n=15):
    rng = np.random.default_rng(11)
    for i in range(5):
        size = (120 + 60 * i, 340 + 10 * i)  # both sides of the official 333 px rule
        Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    records = []
    for i in range(n):
        a, b, c = rng.choice(WORDS, 3, replace=False)
        records.append({"image": f"{i % 5}.png", "caption": f"a {a} and a {b}",
                        "references": [f"a {a} near a {c}", f"the {b}"][: 1 + i % 2], "score": float(i % 4) / 3})
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return records


def test_sharded_vcrscore_features_merge_and_train_like_one_process(tiny_hub, tmp_path, capsys):
    records = _records(tmp_path)
    base = ["score", "vcrscore", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path), "--device", "cpu",
            "--batch-size", "4"]
    for i in range(3):
        assert main(base + ["--shard", f"{i}/3", "--chunk-size", "2", "--output", str(tmp_path / f"s{i}.jsonl")]) == 0
    shards = [str(tmp_path / f"s{i}.jsonl") for i in range(3)]
    capsys.readouterr()
    assert main(["train", "vcrscore", "--data", shards[1], "--output", str(tmp_path / "lone")]) == 2
    assert "a row of shard 1/3 only; join every shard with `capeval merge` first" in capsys.readouterr().err
    assert main(["merge", *shards, "--output", str(tmp_path / "merged.jsonl")]) == 0
    capsys.readouterr()
    assert main(["train", "vcrscore", "--data", str(tmp_path / "merged.jsonl"), "--output", str(tmp_path / "m")]) == 0

    # one process, independently: the scorer over every record at once, then the same regressor fit
    scorer = load_scorer("vcrscore", device="cpu")
    result = scorer.score([r["caption"] for r in records], [str(tmp_path / r["image"]) for r in records],
                          [r["references"] for r in records])
    features = np.column_stack([result[f"{name}_per_sample"] for name in FEATURE_NAMES])
    merged = [json.loads(line) for line in (tmp_path / "merged.jsonl").read_text().splitlines()]
    assert [r["caption"] for r in merged] == [r["caption"] for r in records]
    np.testing.assert_allclose([[row["scores"][name] for name in FEATURE_NAMES] for row in merged], features,
                               rtol=1e-6, atol=1e-5)
    model, spearman = train_regressor([{"features": f.tolist(), "score": r["score"]}
                                       for f, r in zip(features, records)])
    trained = json.loads((tmp_path / "m" / "vcrscore_gbr.json").read_text())
    assert json.loads((tmp_path / "m" / "training.json").read_text())["held_out_spearman"] == pytest.approx(
        spearman, abs=1e-9)
    probe = np.random.default_rng(0).uniform(features.min(0), features.max(0), (200, 3))
    from capeval.vcrscore.gradient_boosting import predict

    np.testing.assert_allclose(predict(trained, probe), predict(model, probe), atol=1e-6)
