"""Gradient-boosted regression trees without pickle: a restricted reader for sklearn's
``GradientBoostingRegressor`` pickles, a JSON tree format, and a numpy predictor that matches sklearn."""

from __future__ import annotations

import json
import pickle
from typing import Dict

import numpy as np

FORMAT = "capeval-gbr/1"


class _Record:
    """Stand-in for an sklearn object: keeps constructor args and pickled state, runs no code."""

    def __init__(self, *args):
        self.args = args
        self.state = None

    def __setstate__(self, state):
        self.state = state


def _stand_in(name: str):
    return type(name, (_Record,), {})


_SKLEARN = {
    ("sklearn.ensemble._gb", "GradientBoostingRegressor"),
    ("sklearn.tree._classes", "DecisionTreeRegressor"),
    ("sklearn.tree._tree", "Tree"),
    ("sklearn.dummy", "DummyRegressor"),
    ("sklearn._loss.loss", "HalfSquaredError"),
    ("sklearn._loss.link", "IdentityLink"),
    ("sklearn._loss._loss", "CyHalfSquaredError"),
    ("_loss", "CyHalfSquaredError"),
    ("sklearn._loss.link", "Interval"),
    ("numpy.random._pickle", "__randomstate_ctor"),
    ("numpy.random._pickle", "__bit_generator_ctor"),
    ("numpy.random._mt19937", "MT19937"),
}


class RestrictedUnpickler(pickle.Unpickler):
    """Allows numpy array reconstruction and records sklearn objects as inert stand-ins; refuses anything else."""

    def find_class(self, module: str, name: str):
        if (module, name) in _SKLEARN:
            return _stand_in(name)
        if name == "_reconstruct" and module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            return np.zeros(1).__reduce__()[0]  # numpy's own array reconstructor, whatever its module path
        if (module, name) in (("numpy", "ndarray"), ("numpy", "dtype")):
            return getattr(np, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: not an allowed sklearn/numpy type")


def read_sklearn_pickle(path) -> "_Record":
    with open(path, "rb") as f:
        return RestrictedUnpickler(f).load()


def _tree_to_dict(tree_record) -> Dict:
    state = tree_record.state
    nodes = state["nodes"]
    return {
        "left": nodes["left_child"].astype(int).tolist(),
        "right": nodes["right_child"].astype(int).tolist(),
        "feature": nodes["feature"].astype(int).tolist(),
        "threshold": nodes["threshold"].astype(float).tolist(),
        "value": np.asarray(state["values"])[:, 0, 0].astype(float).tolist(),
    }


def gbr_to_json(model) -> Dict:
    """Our JSON tree format from a restricted-unpickled GradientBoostingRegressor (or a live sklearn one)."""
    state = model.state if isinstance(model, _Record) else model.__getstate__()
    init = state["init_"]
    init_state = init.state if isinstance(init, _Record) else init.__getstate__()
    trees = []
    for estimator in np.asarray(state["estimators_"]).ravel():
        est_state = estimator.state if isinstance(estimator, _Record) else estimator.__getstate__()
        tree = est_state["tree_"]
        if not isinstance(tree, _Record):
            rec = _Record()
            rec.state = tree.__getstate__()
            tree = rec
        trees.append(_tree_to_dict(tree))
    return {
        "format": FORMAT,
        "n_features": int(state["n_features_in_"]),
        "learning_rate": float(state["learning_rate"]),
        "init": float(np.asarray(init_state["constant_"]).ravel()[0]),
        "trees": trees,
    }


def predict(model: Dict, features) -> np.ndarray:
    """sklearn's arithmetic: features as float32 compared (<=) with float64 thresholds, float64 accumulation
    of ``learning_rate * leaf`` in stage order after the initial constant."""
    x = np.asarray(features, dtype=np.float32)
    if x.ndim == 1:
        x = x[None]
    if x.shape[1] != model["n_features"]:
        raise ValueError(f"expected {model['n_features']} features, got {x.shape[1]}")
    out = np.full(x.shape[0], model["init"], dtype=np.float64)
    lr = model["learning_rate"]
    rows = np.arange(x.shape[0])
    for tree in model["trees"]:
        left, right = np.asarray(tree["left"]), np.asarray(tree["right"])
        feature, threshold = np.asarray(tree["feature"]), np.asarray(tree["threshold"], dtype=np.float64)
        value = np.asarray(tree["value"], dtype=np.float64)
        node = np.zeros(x.shape[0], dtype=np.int64)
        while True:
            internal = left[node] != -1
            if not internal.any():
                break
            go_left = x[rows, np.maximum(feature[node], 0)].astype(np.float64) <= threshold[node]
            node = np.where(internal, np.where(go_left, left[node], right[node]), node)
        out += lr * value[node]
    return out


def save_json(model: Dict, path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(model, f)


def load_json(path) -> Dict:
    with open(path, encoding="utf-8") as f:
        model = json.load(f)
    if model.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    return model
