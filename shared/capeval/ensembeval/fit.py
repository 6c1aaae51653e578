"""Refitting EnsembEval weights with the original procedure, on cached per-sample component scores.

A table has one row per human judgment, one column per candidate metric and the human score. Forward
sequential feature selection over ``LinearRegression`` (tol 1e-4, 5-fold *unshuffled* KFold, R²) picks the
components; a ``LinearRegression`` on them gives the weights (``coef_``; the intercept is dropped, as
officially). Missing values are set to 0, as in the official code. Users may add their own metric to the
candidate pool: a registered capeval scorer or any callable, computed from the table's caption columns.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd

from capeval.core.constants import ENSEMBEVAL_WEIGHTS_FILE as WEIGHTS_FILE
from capeval.core.errors import InputError
from capeval.core.inputs import check_captions, parse_references
from capeval.core.record_sources import iter_records

CARD_FILE = "README.md"


@dataclass
class FitResult:
    weights: Dict[str, float]  # selected component -> coefficient, in selection order
    intercept: float  # fitted but not used by the ensemble (official semantics)
    candidates: List[str]
    cv_r2: float  # mean 5-fold R² of the selected set (the selector's criterion)
    train_r2: float  # in-sample R² of Σ w·x without intercept (what the ensemble actually computes)
    rows: int
    details: Dict = field(default_factory=dict)


TABLE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")


def read_table(path: Union[str, Path]) -> pd.DataFrame:
    """CSV, JSONL/JSON (records) or parquet, read with :func:`capeval.core.record_sources.iter_records` (a CSV
    ``references`` cell may hold a JSON or Python-literal list). CSV cells are text: a CSV column whose every
    non-empty cell is a number becomes numeric (:func:`pandas.to_numeric`; empty cells are missing values), the
    others stay text. Rows written by ``capeval score`` / ``capeval merge`` (per-sample scores under ``scores``)
    are flattened: each score becomes a column beside the record's own fields (e.g. the human score carried through
    from the scored input)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"data file not found: {path}")
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(f"unsupported data format {suffix!r} (use .csv, .jsonl, .json or .parquet)")
    table = pd.DataFrame(list(iter_records(path)))
    if suffix == ".csv":
        table = _numeric_columns(table)
    return _flatten_scores(table, path)


def _numeric_columns(table: pd.DataFrame) -> pd.DataFrame:
    """Each column of text cells that all parse as numbers (empty cells: missing) as numbers; others unchanged."""
    table = table.copy()
    for column in table.columns:
        try:
            table[column] = pd.to_numeric(table[column])
        except (ValueError, TypeError):  # text, or list cells (references)
            pass
    return table


def _flatten_scores(table: pd.DataFrame, path: Path) -> pd.DataFrame:
    if "scores" not in table.columns:
        return table
    if not all(isinstance(cell, dict) for cell in table["scores"]):
        raise InputError(f"{path}: the 'scores' column must hold one mapping per row (a `capeval score` output)")
    scores = pd.DataFrame(table["scores"].tolist(), index=table.index)
    clash = sorted(set(scores.columns) & set(table.columns))
    if clash:
        raise InputError(f"{path}: {clash} are both record fields and scores; rename the record fields")
    if "index" in table.columns:  # merged shards: input order
        if sorted(table["index"]) != list(range(len(table))):
            raise InputError(f"{path}: record indices are not 0..{len(table) - 1} once each (merge the shards with "
                             "`capeval merge`)")
        order = np.argsort(table["index"].to_numpy(), kind="stable")
        table, scores = table.iloc[order], scores.iloc[order]
    return pd.concat([table.drop(columns=["scores"]), scores], axis=1).reset_index(drop=True)


def fit_weights(table: pd.DataFrame, candidates: Sequence[str], target: str = "human_score", *,
                tol: float = 1e-4, folds: int = 5) -> FitResult:
    """Forward SFS (LinearRegression, ``tol``, unshuffled ``folds``-fold CV, R²), then LinearRegression."""
    from sklearn.feature_selection import SequentialFeatureSelector
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import KFold, cross_val_score

    candidates = list(candidates)
    missing = [c for c in [*candidates, target] if c not in table.columns]
    if missing:
        raise InputError(f"columns {missing} not in the data (has {list(table.columns)})")
    if len(candidates) < 2:
        raise InputError("feature selection needs at least two candidate metrics")
    x = table[candidates].apply(pd.to_numeric, errors="coerce").fillna(0.0).to_numpy(dtype=np.float64)
    y = pd.to_numeric(table[target], errors="coerce")
    if y.isna().any():
        raise InputError(f"target column {target!r} has missing or non-numeric values")
    y = y.to_numpy(dtype=np.float64)
    cv = KFold(n_splits=folds)  # unshuffled, as sklearn's default cv=5 for a regressor
    selector = SequentialFeatureSelector(LinearRegression(), n_features_to_select="auto", tol=tol,
                                         direction="forward", scoring="r2", cv=cv)
    selector.fit(x, y)
    order = _selection_order(x, y, selector.get_support(), cv)
    selected = [candidates[i] for i in order]
    regression = LinearRegression().fit(x[:, order], y)
    cv_r2 = float(np.mean(cross_val_score(LinearRegression(), x[:, order], y, cv=cv, scoring="r2")))
    prediction = x[:, order] @ regression.coef_
    train_r2 = float(1 - np.sum((y - prediction) ** 2) / np.sum((y - y.mean()) ** 2))
    return FitResult({name: float(c) for name, c in zip(selected, regression.coef_)}, float(regression.intercept_),
                     candidates, cv_r2, train_r2, len(y), {"tol": tol, "folds": folds, "target": target})


def _selection_order(x: np.ndarray, y: np.ndarray, support: np.ndarray, cv) -> List[int]:
    """The selected columns in the order forward selection adds them (for the card; same set as sklearn's)."""
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import cross_val_score

    remaining, order = list(np.flatnonzero(support)), []
    while remaining:
        scores = [np.mean(cross_val_score(LinearRegression(), x[:, order + [j]], y, cv=cv, scoring="r2"))
                  for j in remaining]
        order.append(remaining.pop(int(np.argmax(scores))))
    return [int(i) for i in order]


def resolve_metric(spec: Union[str, Callable, object]) -> Callable:
    """A user metric as ``f(predictions, images, references) -> per-sample scores``.

    ``spec`` is a callable, a scorer object, a registered scorer ``"name[:key]"`` or ``"module:function"``.
    """
    from capeval.core.scoring import load_scorer, scorers

    if isinstance(spec, str):
        head, _, tail = spec.partition(":")
        if head in scorers():
            return _scorer_metric(load_scorer(head), tail or None)
        if not tail:
            raise InputError(f"metric {spec!r} is neither a registered scorer ({sorted(scorers())}) "
                             "nor 'module:function'")
        return getattr(importlib.import_module(head), tail)
    if hasattr(spec, "score"):
        return _scorer_metric(spec, None)
    if callable(spec):
        return spec
    raise InputError(f"cannot use {spec!r} as a metric")


def _scorer_metric(scorer, key: Optional[str]) -> Callable:
    def metric(predictions, images, references):
        # a capeval scorer receives only the inputs it uses (giving it others is an input error)
        images = None if getattr(scorer, "images", None) == "unused" else images
        references = None if getattr(scorer, "references", None) == "unused" else references
        result = scorer.score(predictions, images=images, references=references)
        lists = sorted(k for k in result if k.endswith("_per_sample"))
        wanted = f"{key}_per_sample" if key else (lists[0] if len(lists) == 1 else None)
        if wanted not in result:
            raise InputError(f"choose one of the scorer's outputs {lists} with 'scorer:key'")
        return result[wanted]

    return metric


def add_metric_columns(table: pd.DataFrame, metrics: Mapping[str, Union[str, Callable, object]],
                       caption_column: str = "caption", image_column: str = "image",
                       references_column: str = "references") -> pd.DataFrame:
    """Compute each user metric over the table's captions (with images/references when present) as a column."""
    if not metrics:
        return table
    if caption_column not in table.columns:
        raise InputError(f"adding metrics needs a {caption_column!r} column")
    table = table.copy()
    predictions = check_captions(table[caption_column].tolist(), caption_column)
    images = table[image_column].tolist() if image_column in table.columns else None
    references = [parse_references(entry, i) for i, entry in enumerate(table[references_column])] \
        if references_column in table.columns else None
    for name, spec in metrics.items():
        values = [float(v) for v in resolve_metric(spec)(predictions, images, references)]
        if len(values) != len(table):
            raise InputError(f"metric {name!r} returned {len(values)} scores for {len(table)} rows")
        table[name] = values
    return table


def weights_document(result: FitResult, *, name: str, data: Optional[Path] = None) -> Dict:
    """The weights JSON (same format as the official weights) with provenance."""
    import sklearn

    from capeval.core.version import __version__
    from capeval.ensembeval.components import COMPONENTS

    provenance = {
        "data": {"file": data.name, "sha256": hashlib.sha256(data.read_bytes()).hexdigest()} if data else None,
        "rows": result.rows,
        "target": result.details.get("target"),
        "candidates": result.candidates,
        "procedure": f"SequentialFeatureSelector(LinearRegression(), direction='forward', tol={result.details['tol']}, "
                     f"cv=KFold({result.details['folds']}) unshuffled, scoring='r2'); LinearRegression on the "
                     "selected components; coef_ kept, intercept dropped; missing values set to 0",
        "cv_r2": result.cv_r2,
        "train_r2_without_intercept": result.train_r2,
        "dropped_intercept": result.intercept,
        "components": {k: (COMPONENTS[k]._asdict() if k in COMPONENTS else "user metric") for k in result.weights},
        "versions": {"capeval": __version__, "scikit-learn": sklearn.__version__, "numpy": np.__version__},
    }
    return {"format": "capeval-ensembeval-weights/1", "name": name, "weights": result.weights,
            "provenance": provenance}


def write_card(out_dir: Path, document: Dict) -> Path:
    prov = document["provenance"]
    rows = "\n".join(f"| `{k}` | {w:+.6f} |" for k, w in document["weights"].items())
    data = prov["data"]["file"] if prov.get("data") else "in-memory table"
    text = f"""# EnsembEval weights: {document['name']}

Refit with `capeval train ensembeval` on {data} ({prov['rows']} rows, target `{prov['target']}`).
Use with `capeval.load_scorer("ensembeval", weights="<this folder>")` or
`evaluate.load("capeval/ensembeval", weights="<this folder>")`.

| component | weight |
|---|---|
{rows}

Score = Σ weight × component (no intercept; the fitted intercept {prov['dropped_intercept']:.6f} is dropped, as in
the official EnsembEval). Mean 5-fold R² of the selected set: {prov['cv_r2']:.4f}; in-sample R² of the
intercept-free sum: {prov['train_r2_without_intercept']:.4f}.

Candidates: {', '.join(f'`{c}`' for c in prov['candidates'])}.

Procedure: {prov['procedure']}. Versions: {', '.join(f'{k} {v}' for k, v in prov['versions'].items())}.
"""
    path = out_dir / CARD_FILE
    path.write_text(text)
    return path


def default_candidates(table: pd.DataFrame, target: str) -> List[str]:
    from capeval.ensembeval.components import COMPONENTS

    return [c for c in table.columns if c in COMPONENTS and c != target]


def run_fit_command(args: argparse.Namespace) -> Path:
    """``capeval train ensembeval``: read the table, add user metrics, fit, write weights JSON + card."""
    data = Path(args.data)
    table = read_table(data)
    extra = dict(_split_assignment(item) for item in args.extra_metric)
    table = add_metric_columns(table, extra)
    candidates = list(args.metrics) if args.metrics else default_candidates(table, args.target)
    candidates += [name for name in extra if name not in candidates]
    result = fit_weights(table, candidates, args.target, tol=args.tol, folds=args.folds)
    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    document = weights_document(result, name=args.weights_name, data=data)
    (out_dir / WEIGHTS_FILE).write_text(json.dumps(document, indent=2))
    write_card(out_dir, document)
    return out_dir


def _split_assignment(item: str):
    name, sep, spec = item.partition("=")
    if not sep or not name or not spec:
        raise InputError(f"--extra-metric takes NAME=SPEC, got {item!r}")
    return name, spec


def run_idf_command(args: argparse.Namespace) -> Path:
    """``capeval train cider-idf``: fixed CIDEr document frequencies from a reference corpus."""
    from capeval.text.fixed_idf_cider import IDF_FILE, build_document_frequencies, save_document_frequencies

    data = Path(args.data)
    table = read_table(data)
    if "references" not in table.columns:
        raise InputError("the reference corpus needs a 'references' column (a list of captions per row)")
    reference_sets = [parse_references(entry, i) for i, entry in enumerate(table["references"])]
    frequencies = build_document_frequencies(reference_sets)
    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_document_frequencies(frequencies, out_dir / IDF_FILE, {
        "data": data.name, "sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "documents": frequencies.num_documents, "tokenizer": "pycocoevalcap PTBTokenizer"})
    return out_dir


# `capeval train ensembeval` / `capeval train cider-idf`

def configure_fit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="CSV/JSONL/parquet: one row per human judgment, one column "
                                                      "per candidate metric, and the human score")
    parser.add_argument("--metrics", nargs="+", help="candidate columns (default: every known component column)")
    parser.add_argument("--target", default="human_score", help="column with the human score")
    parser.add_argument("--extra-metric", action="append", default=[], metavar="NAME=SPEC",
                        help="add a candidate computed from the 'caption'/'image'/'references' columns: SPEC is a "
                             "registered scorer 'scorer[:key]' or a callable 'module:function' "
                             "(predictions, images, references) -> per-sample scores; repeatable")
    parser.add_argument("--tol", type=float, default=1e-4,
                        help="forward feature selection stops when a component adds less cross-validated R² than "
                             "this (default: 1e-4)")
    parser.add_argument("--folds", type=int, default=5, help="unshuffled cross-validation folds (default: 5)")
    parser.add_argument("--weights-name", default="refit", help="name recorded in the weights file")
    parser.add_argument("--output", required=True, help="folder for ensembeval_weights.json and README.md")


def configure_idf(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="JSONL/CSV records with a 'references' list (one document each)")
    parser.add_argument("--output", required=True, help="folder for cider_idf.json")
