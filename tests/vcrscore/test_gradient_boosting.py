import io
import os
import pickle

import numpy as np
import pytest

from capeval.vcrscore.gradient_boosting import RestrictedUnpickler, gbr_to_json, load_json, predict, read_sklearn_pickle, save_json


def test_official_vcrscore_regressor_reproduces_the_published_check(shared_data, tmp_path):
    official = shared_data.parent / "reference" / "vcrscore" / "model_GBR_VCR.pickle"
    model = gbr_to_json(read_sklearn_pickle(official))
    assert len(model["trees"]) == 100 and model["learning_rate"] == 0.1
    assert model["init"] == pytest.approx(0.721139607599497, abs=1e-15)
    save_json(model, tmp_path / "gbr.json")
    value = predict(load_json(tmp_path / "gbr.json"), [70.0, 0.44036316871643066, 0.6823944449424744])[0]
    assert abs(value - 0.7892486441901005) <= 1e-12


@pytest.mark.parametrize("through_pickle", [False, True])
def test_matches_sklearn_predict_on_1000_random_vectors(tmp_path, through_pickle):
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(0, 100, 2000), rng.normal(0, 3, 2000), rng.uniform(0, 1, 2000)])
    y = 0.01 * x[:, 0] + np.tanh(x[:, 1]) + x[:, 2] ** 2 + rng.normal(0, 0.1, 2000)
    fitted = GradientBoostingRegressor(random_state=0).fit(x, y)
    source = RestrictedUnpickler(io.BytesIO(pickle.dumps(fitted))).load() if through_pickle else fitted
    model = gbr_to_json(source)
    probe = np.column_stack([rng.uniform(-10, 110, 1000), rng.normal(0, 4, 1000), rng.uniform(-0.2, 1.2, 1000)])
    probe[:5] = x[:5]  # values on the training grid hit thresholds exactly
    np.testing.assert_array_equal(predict(model, probe), fitted.predict(probe))


def test_pickle_that_executes_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps({"estimators_": Exploit()}))
    with pytest.raises(pickle.UnpicklingError, match="refusing to load"):
        read_sklearn_pickle(path)
    assert not marker.exists()


def test_convert_score_from_features_and_retrain(shared_data, tmp_path, capsys):
    import json

    from capeval.cli import main

    official = shared_data.parent / "reference" / "vcrscore" / "model_GBR_VCR.pickle"
    assert main(["convert", "vcrscore-gbr", str(official), str(tmp_path / "gbr")]) == 0
    rows = [[70.0, 0.44036316871643066, 0.6823944449424744], [10.0, -2.0, 0.1]]
    (tmp_path / "f.jsonl").write_text("\n".join(json.dumps({"features": r}) for r in rows))
    capsys.readouterr()
    assert main(["score", "vcrscore", "--from-features", str(tmp_path / "f.jsonl"), "--model", str(tmp_path / "gbr"),
                 "--output", str(tmp_path / "s.jsonl")]) == 0
    scored = [json.loads(x)["scores"]["vcrscore"] for x in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert abs(scored[0] - 0.7892486441901005) <= 1e-12
    assert scored[1] == predict(load_json(tmp_path / "gbr" / "vcrscore_gbr.json"), rows[1])[0]
    (tmp_path / "bad.jsonl").write_text(json.dumps({"features": [1, 2]}))
    assert main(["score", "vcrscore", "--from-features", str(tmp_path / "bad.jsonl")]) == 2
    assert "list of 3 numbers" in capsys.readouterr().err

    # retraining recovers a known monotone relation and reloads from JSON
    rng = np.random.default_rng(1)
    feats = np.column_stack([rng.uniform(0, 100, 600), rng.normal(0, 1, 600), rng.uniform(0, 1, 600)])
    human = np.round(1 + 4 * (0.6 * feats[:, 0] / 100 + 0.4 * feats[:, 2]))  # 1..5 ratings
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps({"features": f.tolist(), "score": float(h)})
                                                   for f, h in zip(feats, human)))
    assert main(["train", "vcrscore", "--data", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "re")]) == 0
    report = json.loads((tmp_path / "re" / "training.json").read_text())
    assert report["held_out_spearman"] > 0.9
    retrained = load_json(tmp_path / "re" / "vcrscore_gbr.json")
    low, high = predict(retrained, [[5.0, 0.0, 0.05], [95.0, 0.0, 0.95]])
    assert low < 0.2 < 0.8 < high  # monotone: normalised scores rise with both informative features


def test_default_regressor_loads_through_the_hub_cache(tiny_hub):
    from capeval.vcrscore.regressor import load_regressor

    model = load_regressor()
    assert model["n_features"] == 3 and model["trees"]
