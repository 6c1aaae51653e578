"""Gradient-boosted regression trees without pickle: a restricted reader for sklearn's
``GradientBoostingRegressor`` pickles, a JSON tree format, and a numpy predictor that matches sklearn.

Anything else (another object, a malformed or truncated file, a pickle naming a global outside the allowlist) is
refused with a ``ValueError`` whose one-line message says what is wrong; no code from the file is ever run.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Dict

import numpy as np

FORMAT = "capeval-gbr/1"
NOT_GBR = "not a GradientBoostingRegressor pickle"


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
    # the global RandomState (random_state=None) pickles its bit generator's SeedSequence
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
    ("numpy.random.bit_generator", "SeedSequence"),
}


class RefusedGlobal(pickle.UnpicklingError):
    """A pickle names a global that is not on the allowlist (nothing of it was loaded or run)."""


class RestrictedUnpickler(pickle.Unpickler):
    """Allows numpy array reconstruction and records sklearn objects as inert stand-ins; refuses anything else."""

    def find_class(self, module: str, name: str):
        if (module, name) in _SKLEARN:
            return _stand_in(name)
        if name == "_reconstruct" and module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            return np.zeros(1).__reduce__()[0]  # numpy's own array reconstructor, whatever its module path
        if (module, name) in (("numpy", "ndarray"), ("numpy", "dtype")):
            return getattr(np, name)
        raise RefusedGlobal(f"refusing to load {module}.{name}: not an allowed sklearn/numpy type")


def read_sklearn_pickle(path) -> "_Record":
    with open(path, "rb") as f:
        return RestrictedUnpickler(f).load()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else exc.__class__.__name__


def read_gbr_pickle(path) -> Dict:
    """Our JSON tree model of an sklearn ``GradientBoostingRegressor`` pickle (read by :class:`RestrictedUnpickler`);
    ``ValueError`` with a one-line reason for an empty, truncated or corrupt file, a refused global, or another
    object."""
    path = Path(path)
    if path.stat().st_size == 0:
        raise ValueError(f"{NOT_GBR}: the file is empty")
    try:
        obj = read_sklearn_pickle(path)
    except RefusedGlobal as exc:
        raise ValueError(f"{NOT_GBR}: {_one_line(exc)}") from exc
    except (EOFError, pickle.UnpicklingError) as exc:
        raise ValueError(f"{NOT_GBR}: truncated or corrupt pickle ({_one_line(exc)})") from exc
    except Exception as exc:  # anything the pickle machine chokes on: a file that is no pickle at all
        raise ValueError(f"{NOT_GBR}: unreadable as a pickle ({exc.__class__.__name__}: {_one_line(exc)})") from exc
    return gbr_to_json(obj)


def _describe(obj) -> str:
    if isinstance(obj, _Record):
        return f"an sklearn {type(obj).__name__}"
    if obj is None:
        return "None"
    kind = type(obj)
    name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def _state_of(obj, expected: str, where: str) -> dict:
    """The pickled (or live) state dict of ``obj``, which must be an sklearn ``expected``."""
    if type(obj).__name__ != expected or not (isinstance(obj, _Record) or hasattr(obj, "__getstate__")):
        raise ValueError(f"{where} is {_describe(obj)}, not a {expected}")
    state = obj.state if isinstance(obj, _Record) else obj.__getstate__()
    if not isinstance(state, dict):
        raise ValueError(f"{where} has no pickled state")
    return state


def _field(state: dict, key: str, where: str):
    if key not in state:
        raise ValueError(f"{where} has no {key!r}")
    return state[key]


def _tree_to_dict(tree_state: dict, n_features: int, where: str) -> Dict:
    nodes, values = _field(tree_state, "nodes", where), _field(tree_state, "values", where)
    fields = ("left_child", "right_child", "feature", "threshold")
    if not isinstance(nodes, np.ndarray) or nodes.dtype.names is None or not set(fields) <= set(nodes.dtype.names):
        raise ValueError(f"{where}: 'nodes' is not sklearn's node array")
    values = np.asarray(values)
    if values.ndim != 3 or values.shape[0] != nodes.shape[0] or values.shape[1:] != (1, 1):
        raise ValueError(f"{where}: 'values' of shape {values.shape} for {nodes.shape[0]} nodes (expected (n, 1, 1))")
    tree = {
        "left": nodes["left_child"].astype(int).tolist(),
        "right": nodes["right_child"].astype(int).tolist(),
        "feature": nodes["feature"].astype(int).tolist(),
        "threshold": nodes["threshold"].astype(float).tolist(),
        "value": values[:, 0, 0].astype(float).tolist(),
    }
    check_tree(tree, n_features, where)
    return tree


def check_tree(tree: Dict, n_features: int, where: str = "tree") -> None:
    """A tree ``predict`` can walk: aligned node lists, leaves marked -1 on both sides, children after their parent
    (sklearn's order, so every walk ends at a leaf) and split features below ``n_features``."""
    try:
        left, right, feature = (np.asarray(tree[k], dtype=np.int64) for k in ("left", "right", "feature"))
        threshold, value = (np.asarray(tree[k], dtype=np.float64) for k in ("threshold", "value"))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: malformed tree ({_one_line(exc)})") from exc
    n = left.shape[0]
    if n == 0 or any(a.ndim != 1 or a.shape[0] != n for a in (left, right, feature, threshold, value)):
        raise ValueError(f"{where}: node lists must be non-empty and of one length")
    nodes = np.arange(n)
    leaf = left == -1
    if not np.array_equal(leaf, right == -1):
        raise ValueError(f"{where}: a node has exactly one child")
    inner = ~leaf
    if np.any((left[inner] <= nodes[inner]) | (right[inner] <= nodes[inner]) | (left[inner] >= n) |
              (right[inner] >= n)):
        raise ValueError(f"{where}: a child index is out of range or not after its parent")
    if np.any((feature[inner] < 0) | (feature[inner] >= n_features)):
        raise ValueError(f"{where}: a split uses a feature outside 0..{n_features - 1}")


def gbr_to_json(model) -> Dict:
    """Our JSON tree format from a restricted-unpickled GradientBoostingRegressor (or a live sklearn one);
    ``ValueError`` naming the problem for anything else."""
    if type(model).__name__ != "GradientBoostingRegressor":
        raise ValueError(f"{NOT_GBR}: it holds {_describe(model)}")
    state = _state_of(model, "GradientBoostingRegressor", "malformed GradientBoostingRegressor pickle: the estimator")
    missing = [key for key in ("init_", "estimators_") if key not in state]
    if missing:
        raise ValueError(f"the GradientBoostingRegressor is not fitted (it has no {', '.join(missing)})")
    where = "malformed GradientBoostingRegressor"
    n_features = state.get("n_features_in_", state.get("n_features_"))
    try:
        n_features, learning_rate = int(n_features), float(_field(state, "learning_rate", where))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: no usable n_features_in_/learning_rate ({_one_line(exc)})") from exc
    init = state["init_"]
    if isinstance(init, str) and init == "zero":  # GradientBoostingRegressor(init="zero"): raw predictions from 0
        init_value = 0.0
    else:
        constant = np.asarray(_field(_state_of(init, "DummyRegressor", f"{where}: init_"), "constant_",
                                     f"{where}: init_"))
        if constant.size != 1 or not np.issubdtype(constant.dtype, np.number):
            raise ValueError(f"{where}: init_ constant_ is not a single number")
        init_value = float(constant.ravel()[0])
    estimators = state["estimators_"]
    if not isinstance(estimators, np.ndarray) or estimators.ndim != 2 or estimators.shape[1] != 1:
        raise ValueError(f"{where}: estimators_ is {_describe(estimators)}"
                         f"{f' of shape {estimators.shape}' if isinstance(estimators, np.ndarray) else ''}, "
                         f"not an (n_stages, 1) array of trees")
    trees = []
    for i, estimator in enumerate(estimators.ravel()):
        est_where = f"{where}: estimators_[{i}]"
        tree = _field(_state_of(estimator, "DecisionTreeRegressor", est_where), "tree_", est_where)
        tree_state = _state_of(tree, "Tree", f"{est_where}.tree_")
        trees.append(_tree_to_dict(tree_state, n_features, f"{est_where}.tree_"))
    return {
        "format": FORMAT,
        "n_features": n_features,
        "learning_rate": learning_rate,
        "init": init_value,
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
    if not isinstance(model, dict) or model.get("format") != FORMAT:
        raise ValueError(f"{path} is not a {FORMAT} file")
    try:
        n_features, trees = int(model["n_features"]), model["trees"]
        float(model["learning_rate"]), float(model["init"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: malformed {FORMAT} file ({_one_line(exc)})") from exc
    if not isinstance(trees, list):
        raise ValueError(f"{path}: malformed {FORMAT} file ('trees' is not a list)")
    for i, tree in enumerate(trees):
        if not isinstance(tree, dict):
            raise ValueError(f"{path}: malformed {FORMAT} file (trees[{i}] is not an object)")
        check_tree(tree, n_features, f"{path}: trees[{i}]")
    return model
