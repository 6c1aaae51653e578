"""VCRScore's regressor: the official GradientBoostingRegressor converted to JSON, scoring of precomputed
feature rows, and retraining (``capeval train vcrscore``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Iterable, List, Optional, Sequence

import numpy as np

from capeval.core.convert import write_model_card
from capeval.core.errors import InputError
from capeval.core.hub import resolve

GBR_FILE = "vcrscore_gbr.json"
FEATURE_NAMES = ("word_precision", "vilt_logit", "mcip_refclip_s")


def load_regressor(model: Optional[str] = None):
    from capeval.vcrscore.gradient_boosting import load_json

    return load_json(resolve(model or "vcrscore-gbr", [GBR_FILE]) / GBR_FILE)


def read_feature_rows(path: Path) -> List[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if "shard" in row:  # `capeval score --shard` output: `capeval merge` removes the tag
                raise InputError(f"{path}:{line_no}: a row of shard {row['shard']} only; join every shard with "
                                 "`capeval merge` first")
            if "features" not in row and all(name in (row.get("scores") or {}) for name in FEATURE_NAMES):
                row["features"] = [row["scores"][name] for name in FEATURE_NAMES]  # `capeval score vcrscore` output
            features = row.get("features")
            if not isinstance(features, list) or len(features) != len(FEATURE_NAMES):
                raise InputError(f"{path}:{line_no}: 'features' must be a list of {len(FEATURE_NAMES)} numbers "
                                 f"({', '.join(FEATURE_NAMES)})")
            rows.append(row)
    if not rows:
        raise InputError(f"{path} holds no feature rows")
    return rows


def score_feature_file(path, model: Optional[str] = None) -> List[float]:
    """VCRScore of each ``{"features": [f1, f2, f3]}`` row of a JSONL file (official regressor by default)."""
    from capeval.vcrscore.gradient_boosting import predict

    rows = read_feature_rows(Path(path))
    return predict(load_regressor(model), [row["features"] for row in rows]).tolist()


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
                        help='JSONL feature rows {"features": [f1, f2, f3], "score": human score}')
    parser.add_argument("--out", required=True, help="output directory for vcrscore_gbr.json + card")
    parser.add_argument("--drop-zero", action="store_true", help="drop rows whose human score is 0 (as the paper)")
    parser.add_argument("--held-out", type=float, default=0.2, help="fraction held out for Spearman")
    parser.add_argument("--seed", type=int, default=0)


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


def train_vcrscore(args: argparse.Namespace) -> Path:
    from capeval.vcrscore.gradient_boosting import save_json

    rows = [row for path in args.data for row in read_feature_rows(Path(path))]
    missing = [i for i, r in enumerate(rows) if "score" not in r]
    if missing:
        raise InputError(f"rows {missing[:5]} have no 'score'")
    model, spearman = train_regressor(rows, drop_zero=args.drop_zero, held_out=args.held_out, seed=args.seed)
    out = Path(args.out)
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
