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


def _fitted(**kwargs):
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(2)
    x = np.column_stack([rng.uniform(0, 100, 300), rng.normal(0, 3, 300), rng.uniform(0, 1, 300)])
    y = 0.01 * x[:, 0] + np.tanh(x[:, 1]) + x[:, 2] ** 2
    return GradientBoostingRegressor(n_estimators=10, **kwargs).fit(x, y), x


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _refusal_cases(tmp_path):
    from sklearn.linear_model import LinearRegression
    from sklearn.tree import DecisionTreeRegressor
    from sklearn.ensemble import GradientBoostingRegressor

    fitted, x = _fitted(random_state=0)
    good = pickle.dumps(fitted)
    return {
        "dict": (pickle.dumps({"estimators_": [1, 2], "init_": 0.5}),
                 "not a GradientBoostingRegressor pickle: it holds a dict"),
        "list": (pickle.dumps([fitted.init_, 3]), "it holds a list"),
        "array": (pickle.dumps(np.zeros(3)), "it holds a numpy.ndarray"),
        "unrelated sklearn": (pickle.dumps(LinearRegression().fit(x, x[:, 0])),
                              "refusing to load sklearn.linear_model._base.LinearRegression"),
        "allowed but wrong sklearn": (pickle.dumps(DecisionTreeRegressor(max_depth=2).fit(x, x[:, 0])),
                                      "it holds an sklearn DecisionTreeRegressor"),
        "unfitted": (pickle.dumps(GradientBoostingRegressor()), r"is not fitted \(it has no init_, estimators_\)"),
        "global not allowed": (pickle.dumps({"estimators_": _Exploit(tmp_path / "pwned")}),
                               r"refusing to load (posix|nt|os)\.system"),
        "empty": (b"", "the file is empty"),
        "truncated": (good[: len(good) // 3], "truncated or corrupt pickle"),
        "not a pickle": (b"GBR,model\n1,2,3\n", "not a GradientBoostingRegressor pickle"),
    }


@pytest.mark.parametrize("case", ["dict", "list", "array", "unrelated sklearn", "allowed but wrong sklearn",
                                  "unfitted", "global not allowed", "empty", "truncated", "not a pickle"])
def test_gbr_converter_refusals_are_one_clean_line(tmp_path, capsys, case):
    import re

    from capeval.cli import main

    data, expected = _refusal_cases(tmp_path)[case]
    path = tmp_path / "model.pickle"
    path.write_bytes(data)
    capsys.readouterr()
    assert main(["convert", "vcrscore-gbr", str(path), str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"capeval convert: error: {path}: cannot convert to 'vcrscore-gbr': "), lines[0]
    assert re.search(expected, lines[0]), lines[0]
    assert "NoneType" not in lines[0] and "Traceback" not in captured.err
    assert not (tmp_path / "out").exists()  # refused before anything is written
    assert not (tmp_path / "pwned").exists()  # nothing in the file ran


@pytest.mark.parametrize("kwargs", [{"random_state": None}, {"random_state": 0, "init": "zero"}])
def test_gbr_pickles_with_the_global_random_state_or_a_zero_init_convert(tmp_path, kwargs):
    """``random_state=None`` pickles the global RandomState's SeedSequence (inert stand-in, as every sklearn object);
    ``init="zero"`` starts the raw predictions at 0. Both predict as sklearn."""
    from capeval.cli import main

    fitted, x = _fitted(**kwargs)
    (tmp_path / "m.pickle").write_bytes(pickle.dumps(fitted))
    assert main(["convert", "vcrscore-gbr", str(tmp_path / "m.pickle"), str(tmp_path / "out")]) == 0
    model = load_json(tmp_path / "out" / "vcrscore_gbr.json")
    np.testing.assert_array_equal(predict(model, x[:50]), fitted.predict(x[:50]))


@pytest.mark.parametrize("damage, message", [
    (lambda t: t.update(left=[t["left"][0], 0] + t["left"][2:]), "not after its parent"),  # a loop back to the root
    (lambda t: t.update(feature=[7] * len(t["feature"])), "outside 0..2"),
    (lambda t: t.update(value=t["value"][:-1]), "of one length"),
])
def test_json_trees_that_predict_could_not_walk_are_refused(tmp_path, damage, message):
    fitted, _ = _fitted(random_state=0)
    model = gbr_to_json(fitted)
    assert len(model["trees"][3]["left"]) > 2 and model["trees"][3]["left"][0] != -1
    damage(model["trees"][3])
    save_json(model, tmp_path / "gbr.json")
    with pytest.raises(ValueError, match=message):
        load_json(tmp_path / "gbr.json")
