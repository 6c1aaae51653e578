"""VCRScore's regressor: the official GradientBoostingRegressor converted to JSON, scoring of precomputed
feature rows, and retraining (``capeval train vcrscore``)."""

from __future__ import annotations

import argparse
import json
import math
import numbers
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

import numpy as np

from capeval.core.convert import write_model_card
from capeval.core.errors import InputError
from capeval.core.hub import resolve
from capeval.core.record_sources import iter_records
from capeval.vcrscore.constants import GBR_FILE

FEATURE_NAMES = ("word_precision", "vilt_logit", "mcip_refclip_s")


def load_regressor(model: Optional[str] = None):
    from capeval.vcrscore.gradient_boosting import load_json

    return load_json(resolve(model or "vcrscore-gbr", [GBR_FILE]) / GBR_FILE)


def _feature_values(features, where: str) -> List[float]:
    """A row's ``features``: exactly three finite numbers (a CSV cell holds them as a JSON list)."""
    expected = f"'features' must be a list of {len(FEATURE_NAMES)} numbers ({', '.join(FEATURE_NAMES)}), each finite"
    if isinstance(features, str):  # a CSV cell
        try:
            features = json.loads(features)
        except json.JSONDecodeError:
            raise InputError(f"{where}: {expected}, got the text {features!r:.60}") from None
    if not isinstance(features, (list, tuple)) or len(features) != len(FEATURE_NAMES):
        raise InputError(f"{where}: {expected}, got {features!r:.60}")
    for name, value in zip(FEATURE_NAMES, features):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise InputError(f"{where}: {expected}; {name} is {type(value).__name__} {value!r:.40}")
        if not math.isfinite(value):
            raise InputError(f"{where}: {expected}; {name} is {value}")
    return [float(value) for value in features]


def read_feature_rows(path) -> List[dict]:
    """The ``{"features": [f1, f2, f3], ...}`` rows of a JSONL/JSON, CSV or parquet file (read with
    :func:`capeval.core.record_sources.iter_records`), each row's ``features`` checked (three finite numbers) and given as
    floats. Rows of ``capeval score vcrscore --output`` (the three features under ``scores``) are read as feature
    rows too. Errors name the file and the row (0-based)."""
    rows = []
    for i, row in enumerate(iter_records(path)):
        where = f"{path} row {i}"
        if "shard" in row:  # `capeval score --shard` output: `capeval merge` removes the tag
            raise InputError(f"{where}: a row of shard {row['shard']} only; join every shard with `capeval merge` "
                             "first")
        scores = row.get("scores")
        if "features" not in row and isinstance(scores, dict) and all(name in scores for name in FEATURE_NAMES):
            row["features"] = [scores[name] for name in FEATURE_NAMES]  # `capeval score vcrscore` output
        row["features"] = _feature_values(row.get("features"), where)
        rows.append(row)
    if not rows:
        raise InputError(f"{path} holds no feature rows")
    return rows


class FeatureScores(list):
    """The VCRScore of each row of a feature file (a list of floats, in row order), with ``rows``: the rows they
    score, as :func:`read_feature_rows` read them (so a caller writes its output without reading the file again)."""

    def __init__(self, scores: Iterable[float], rows: List[dict]):
        super().__init__(scores)
        self.rows = rows


def score_feature_file(path, model: Optional[str] = None) -> FeatureScores:
    """VCRScore of each ``{"features": [f1, f2, f3]}`` row of a JSONL/JSON, CSV or parquet file (official regressor
    by default): the scores, with the rows read (``.rows``)."""
    from capeval.vcrscore.gradient_boosting import predict

    rows = read_feature_rows(path)
    scores = predict(load_regressor(model), [row["features"] for row in rows]).tolist()
    return FeatureScores(scores, rows)


def convert_vcrscore_gbr(official: Path, out_dir: Path) -> None:
    """``model_GBR_VCR.pickle`` → ``vcrscore_gbr.json`` + card; anything but a fitted GradientBoostingRegressor
    pickle is refused (``ValueError``, one line saying what is wrong) before ``out_dir`` is touched."""
    from capeval.vcrscore.gradient_boosting import read_gbr_pickle, save_json

    model = read_gbr_pickle(official)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_json(model, out_dir / GBR_FILE)
    write_model_card(out_dir, title="VCRScore regressor (capeval JSON)", source=official.name,
                     license="other",
                     body="The official GradientBoostingRegressor's trees as JSON (`vcrscore_gbr.json`), evaluated by "
                          "`capeval.vcrscore.gradient_boosting.predict` with sklearn's arithmetic. Features, in order: "
                          + ", ".join(FEATURE_NAMES) + ".")


def configure_training(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", nargs="+", required=True,
                        help='feature rows {"features": [f1, f2, f3], "score": human score} (JSONL/JSON, CSV or '
                             'parquet)')
    parser.add_argument("--output", required=True, help="output directory for vcrscore_gbr.json + card")
    parser.add_argument("--drop-zero", action="store_true", help="drop rows whose human score is 0 (as the paper)")
    parser.add_argument("--held-out", type=float, default=0.2, help="fraction held out for Spearman")
    parser.add_argument("--seed", type=int, default=0, help="seed of the held-out split (default: 0)")


def train_regressor(rows: Iterable[dict], *, drop_zero: bool = False, held_out: float = 0.2, seed: int = 0):
    """Fit ``GradientBoostingRegressor(random_state=0)`` on min-max normalised scores; return (json, spearman)."""
    from scipy.stats import spearmanr
    from sklearn.ensemble import GradientBoostingRegressor

    from capeval.vcrscore.gradient_boosting import gbr_to_json, predict

    rows = [r for r in rows if not (drop_zero and float(r["score"]) == 0)]
    if len(rows) < 10:
        raise InputError(f"need at least 10 scored feature rows to train, got {len(rows)}")
    x = np.asarray([r["features"] for r in rows], dtype=np.float64)
    y = np.asarray([float(r["score"]) for r in rows])
    y = (y - y.min()) / (y.max() - y.min()) if y.max() > y.min() else np.zeros_like(y)
    order = np.random.default_rng(seed).permutation(len(rows))
    n_test = max(1, int(round(held_out * len(rows))))
    test, train = order[:n_test], order[n_test:]
    model = gbr_to_json(GradientBoostingRegressor(random_state=0).fit(x[train], y[train]))
    return model, float(spearmanr(predict(model, x[test]), y[test]).statistic)


def _human_score(row: dict, where: str) -> float:
    """A training row's human ``score``: a finite number (a CSV cell holds it as text)."""
    if "score" not in row:
        raise InputError(f"{where} has no 'score' (the human judgment to train on)")
    score = row["score"]
    refused = InputError(f"{where}: 'score' must be a number, got {type(score).__name__} {score!r:.40}")
    if isinstance(score, (bool, np.bool_)) or not isinstance(score, (numbers.Real, str)):
        raise refused
    try:
        value = float(score)
    except ValueError:
        raise refused from None
    if not math.isfinite(value):
        raise InputError(f"{where}: 'score' must be a finite number, got {value}")
    return value


def train_vcrscore(args: argparse.Namespace) -> Path:
    from capeval.vcrscore.gradient_boosting import save_json

    rows = []
    for path in args.data:
        for i, row in enumerate(read_feature_rows(path)):
            row["score"] = _human_score(row, f"{path} row {i}")
            rows.append(row)
    model, spearman = train_regressor(rows, drop_zero=args.drop_zero, held_out=args.held_out, seed=args.seed)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    save_json(model, out / GBR_FILE)
    (out / "training.json").write_text(json.dumps({"rows": len(rows), "held_out_spearman": spearman,
                                                   "drop_zero": args.drop_zero, "seed": args.seed}, indent=2))
    write_model_card(out, title="VCRScore regressor (retrained with capeval)", source=", ".join(args.data),
                     license="other", body=f"GradientBoostingRegressor(random_state=0) on {len(rows)} rows; "
                                           f"held-out Spearman {spearman:.4f}.")
    print(f"held-out Spearman: {spearman:.4f}")
    return out


def feature_rows(features: Sequence[Sequence[float]], scores: Optional[Iterable[float]] = None,
                 extra: Optional[Iterable[dict]] = None) -> List[dict]:
    """``{"features": [f1, f2, f3]}`` rows (plus ``"score"`` and any extra fields) as ``capeval train vcrscore`` and
    ``capeval score vcrscore --from-features`` read them."""
    rows = []
    scores = list(scores) if scores is not None else None
    extra = list(extra) if extra is not None else None
    for i, row in enumerate(features):
        if len(row) != len(FEATURE_NAMES):
            raise ValueError(f"feature row {i} has {len(row)} values, expected {len(FEATURE_NAMES)}")
        out = dict(extra[i]) if extra is not None else {}
        out["features"] = [float(v) for v in row]
        if scores is not None:
            out["score"] = float(scores[i])
        rows.append(out)
    return rows


def write_feature_rows(path, rows: Iterable[dict]) -> Path:
    """Write feature rows as JSONL (one ``{"features": [...], ...}`` per line)."""
    path = Path(path)
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return path
