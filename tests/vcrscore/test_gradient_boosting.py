import io
import json
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
    assert main(["convert", "vcrscore-gbr", str(official), "--output", str(tmp_path / "gbr")]) == 0
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
    assert main(["train", "vcrscore", "--data", str(tmp_path / "train.jsonl"), "--output", str(tmp_path / "re")]) == 0
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
    assert main(["convert", "vcrscore-gbr", str(path), "--output", str(tmp_path / "out")]) == 2
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
    assert main(["convert", "vcrscore-gbr", str(tmp_path / "m.pickle"), "--output", str(tmp_path / "out")]) == 0
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


def _feature_file_model(tmp_path):
    """A small fitted regressor written as a model folder, with its sklearn original."""
    fitted, _ = _fitted(random_state=0)
    (tmp_path / "model").mkdir()
    save_json(gbr_to_json(fitted), tmp_path / "model" / "vcrscore_gbr.json")
    return fitted, str(tmp_path / "model")


FEATURES = [[70.0, 0.44, 0.68], [10, -1, 0], [55.5, 2.5, 0.25]]


def test_feature_files_read_alike_as_jsonl_csv_and_parquet(tmp_path, capsys):
    """`capeval score vcrscore --from-features`: JSONL, CSV (features as a JSON list cell, as pandas writes them) and
    parquet give sklearn's predictions of the same rows, and the output rows are the rows read, each with its score."""
    import pandas as pd

    from capeval.cli import main
    from capeval.vcrscore.regressor import score_feature_file

    fitted, model = _feature_file_model(tmp_path)
    expected = fitted.predict(np.asarray(FEATURES, dtype=np.float64)).tolist()
    table = pd.DataFrame({"id": ["a", "b", "c"], "features": FEATURES})
    (tmp_path / "f.jsonl").write_text("".join(json.dumps(r) + "\n\n" for r in table.to_dict("records")))  # blank lines
    table.to_csv(tmp_path / "f.csv", index=False)
    table.to_parquet(tmp_path / "f.parquet")
    for name in ("f.jsonl", "f.csv", "f.parquet"):
        scores = score_feature_file(tmp_path / name, model)
        assert list(scores) == expected, name
        assert [row["id"] for row in scores.rows] == ["a", "b", "c"]
        assert [row["features"] for row in scores.rows] == [[float(v) for v in f] for f in FEATURES]
        capsys.readouterr()
        assert main(["score", "vcrscore", "--from-features", str(tmp_path / name), "--model", model,
                     "--output", str(tmp_path / "out.jsonl")]) == 0, name
        assert json.loads(capsys.readouterr().out)["vcrscore"] == pytest.approx(np.mean(expected), abs=1e-12)
        out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
        assert [(row["id"], row["scores"]["vcrscore"]) for row in out] == list(zip("abc", expected)), name


@pytest.mark.parametrize("line, message", [
    ('{"features": [1, 2, 3]', r"f\.jsonl:2: invalid JSON"),
    ('not json', r"f\.jsonl:2: invalid JSON"),
    ('[1, 2, 3]', r"f\.jsonl:2: expected a JSON object"),
    ('{"features": [1, 2]}', r"f\.jsonl row 1: 'features' must be a list of 3 numbers"),
    ('{"features": [1, 2, 3, 4]}', r"f\.jsonl row 1: 'features' must be a list of 3"),
    ('{"features": "1, 2, 3"}', r"f\.jsonl row 1: 'features' must be a list of 3 .*got the text"),
    ('{"features": ["1", 2, 3]}', r"f\.jsonl row 1: .*word_precision is str"),
    ('{"features": [1, true, 3]}', r"f\.jsonl row 1: .*vilt_logit is bool"),
    ('{"features": [1, 2, null]}', r"f\.jsonl row 1: .*mcip_refclip_s is NoneType"),
    ('{"features": [1, 2, NaN]}', r"f\.jsonl row 1: .*mcip_refclip_s is nan"),
    ('{"features": [Infinity, 2, 3]}', r"f\.jsonl row 1: .*word_precision is inf"),
    ('{"features": [[1], 2, 3]}', r"f\.jsonl row 1: .*word_precision is list"),
    ('{"caption": "no features"}', r"f\.jsonl row 1: 'features' must be a list of 3"),
])
def test_bad_feature_rows_are_one_line_errors_naming_the_row(tmp_path, capsys, line, message):
    import re

    from capeval.cli import main

    _, model = _feature_file_model(tmp_path)
    path = tmp_path / "f.jsonl"
    path.write_text('{"features": [1.0, 2.0, 3.0]}\n' + line + "\n")
    capsys.readouterr()
    assert main(["score", "vcrscore", "--from-features", str(path), "--model", model]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("capeval score: error: "), err
    assert re.search(message, err), err


def test_bad_csv_feature_cells_and_training_scores_are_one_line_errors(tmp_path, capsys):
    from capeval.cli import main

    _, model = _feature_file_model(tmp_path)
    (tmp_path / "f.csv").write_text('features\n"[1, 2, 3]"\n"[1, 2, true]"\n')
    assert main(["score", "vcrscore", "--from-features", str(tmp_path / "f.csv"), "--model", model]) == 2
    assert "f.csv row 1: 'features' must be a list of 3 numbers" in capsys.readouterr().err
    rng = np.random.default_rng(3)
    rows = [{"features": rng.uniform(0, 1, 3).tolist(), "score": float(rng.uniform())} for _ in range(12)]
    for bad, message in ((True, "'score' must be a number, got bool"), ("high", "'score' must be a number, got str"),
                         (float("nan"), "'score' must be a finite number")):
        data = [*rows[:4], {**rows[4], "score": bad}, *rows[5:]]
        (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
        assert main(["train", "vcrscore", "--data", str(tmp_path / "train.jsonl"), "--output", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"train.jsonl row 4: {message}" in err, err
    data = [*rows[:2], {"features": rows[2]["features"]}, *rows[3:]]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    assert main(["train", "vcrscore", "--data", str(tmp_path / "train.jsonl"), "--output", str(tmp_path / "o")]) == 2
    assert "train.jsonl row 2 has no 'score'" in capsys.readouterr().err


def _placeholder(*args):
    """Pickled by reference; the tests rewrite its GLOBAL opcode into the global under test."""
    raise AssertionError("the placeholder itself is never unpickled")


class _Reduces:
    """Pickles as a call of ``function`` with ``args`` (REDUCE)."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


# globals a GradientBoostingRegressor pickle does not reference: code runners, file writers, other numpy/sklearn
# names than the allowed ones (same module, another name), pickle's own helpers
UNEXPECTED_GLOBALS = [("shutil", "copyfile"), ("shutil", "rmtree"), ("builtins", "eval"), ("builtins", "getattr"),
                      ("builtins", "open"), ("os", "system"), ("posix", "system"), ("subprocess", "Popen"),
                      ("importlib", "import_module"), ("pickle", "loads"), ("copyreg", "_reconstructor"),
                      ("numpy", "load"), ("numpy", "frombuffer"), ("numpy.core.multiarray", "scalar"),
                      ("numpy.random._pickle", "__generator_ctor"),
                      ("sklearn.ensemble._gb", "GradientBoostingClassifier"),
                      ("sklearn.tree._tree", "Tree.__reduce__"), ("sklearn.utils", "Bunch"), ("torch", "load")]


def _pickle_referencing(module, name, *args):
    """A fitted regressor's pickle (protocol 3: text GLOBAL opcodes, native bytes) whose attribute ``extra`` calls
    ``module.name(*args)``."""
    fitted, _ = _fitted(random_state=0)
    fitted.extra = _Reduces(_placeholder, *args)
    data = pickle.dumps(fitted, protocol=3)
    reference = f"c{_placeholder.__module__}\n_placeholder\n".encode()
    assert data.count(reference) == 1
    return data.replace(reference, f"c{module}\n{name}\n".encode())


def _convert(tmp_path, capsys, data):
    from capeval.cli import main

    path = tmp_path / "model_GBR_VCR.pickle"
    path.write_bytes(data)
    capsys.readouterr()
    code = main(["convert", "vcrscore-gbr", str(path), "--output", str(tmp_path / "out")])
    return code, capsys.readouterr(), path


@pytest.mark.parametrize("module, name", UNEXPECTED_GLOBALS)
def test_every_unexpected_global_is_refused_by_name_in_one_line_with_nothing_written(tmp_path, capsys, module, name):
    """#34 item 5: the converter refuses any global outside its allowlist, naming it, exit 2, one line, no output
    folder, nothing run (``shutil.copyfile`` would copy a file, ``eval`` touch one)."""
    target = tmp_path / "copied"
    args = {("shutil", "copyfile"): (str(tmp_path / "source"), str(target)),
            ("builtins", "eval"): (f"open({str(target)!r}, 'w').close()",)}.get((module, name), ())
    (tmp_path / "source").write_text("the file a malicious checkpoint would copy")
    code, captured, path = _convert(tmp_path, capsys, _pickle_referencing(module, name, *args))
    lines = captured.err.splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0] == (f"capeval convert: error: {path}: cannot convert to 'vcrscore-gbr': not a "
                        f"GradientBoostingRegressor pickle: refusing to load {module}.{name}: not an allowed "
                        "sklearn/numpy type")
    assert not (tmp_path / "out").exists() and not target.exists()


def test_a_real_reference_to_shutil_copyfile_is_refused_at_any_protocol(tmp_path, capsys):
    import re
    import shutil

    target = tmp_path / "copied"
    (tmp_path / "source").write_text("x")
    fitted, _ = _fitted(random_state=0)
    fitted.loss_helper = _Reduces(shutil.copyfile, str(tmp_path / "source"), str(target))
    for protocol in range(0, pickle.HIGHEST_PROTOCOL + 1):
        code, captured, _ = _convert(tmp_path, capsys, pickle.dumps(fitted, protocol=protocol))
        assert code == 2 and captured.err.count("\n") == 1, (protocol, captured.err)
        # protocols 0-2 write arrays' bytes (and objects) with helpers the reader refuses too (_codecs.encode,
        # copy_reg._reconstructor), protocol 5 numpy's out-of-band reconstructor _frombuffer: each named
        refused = {3: "shutil.copyfile", 4: "shutil.copyfile", 5: r"numpy\._?core\.numeric\._frombuffer"}.get(
            protocol, r"(_codecs\.encode|copy_reg\._reconstructor)")
        assert re.search(f"refusing to load {refused}: not an allowed", captured.err), (protocol, captured.err)
        assert not (tmp_path / "out").exists() and not target.exists()


def test_the_crafted_pickle_converts_without_the_unexpected_global(tmp_path, capsys):
    """The control: the same regressor with ``extra`` left empty converts (exit 0) and predicts as sklearn."""
    fitted, x = _fitted(random_state=0)
    fitted.extra = None
    code, captured, _ = _convert(tmp_path, capsys, pickle.dumps(fitted, protocol=3))
    assert code == 0, captured.err
    np.testing.assert_array_equal(predict(load_json(tmp_path / "out" / "vcrscore_gbr.json"), x[:20]),
                                  fitted.predict(x[:20]))
