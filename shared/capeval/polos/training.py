"""M²LHF: training the Polos head (scalar mix + MLP) on human judgments with frozen encoders.

Official recipe (``configs/polos-trainer.yaml`` of the authors' code): MSE with ``reduction="sum"``, Adam lr 3e-5
for the MLP and the scalar mix, CLIP and SimCSE frozen, batch 64 with 4 gradient-accumulation steps (the loss of
each batch divided by 4, as Lightning does), gradient-norm clipping 1.0, scalar-mix layer dropout 0.1, MLP
dropout 0.1, seed 42, at most 100 epochs, early stopping on validation Pearson and the best epoch's weights kept.
The stopping rule and the kept epoch follow the official Lightning 1.2 callbacks (``EarlyStopping`` and
``ModelCheckpoint``, monitor ``pearson``, mode max, min_delta 0, patience 1, top-2 checkpoints, the best one released):
the monitored value is the validation Pearson as a float32 (NaN when undefined); the best score starts at −∞, so the
first epoch always counts as an improvement (the head before training is only logged, as Lightning's sanity check); an
epoch improves when its Pearson minus min_delta is strictly greater than the best so far; training stops after the
validation of the ``patience``-th consecutive epoch without improvement; the head returned is the first epoch with the
highest Pearson (NaN counting as −∞), never the head before training. See :func:`kept_epoch`.

Frozen encoders make their outputs constants, so they are computed once per distinct image and text: CLIP
features, and for each sentence the first-position vector of each of the 13 hidden states with that layer's
per-sentence mean and population variance. The trainable scalar mix then normalises and mixes them at every step;
the official batch-wide statistics (``statistics="batch"``) are recovered exactly by pooling the per-sentence
moments of a batch's sentences. Memory: 13 × 768 floats per distinct text (~40 KB).

Data: one judgment per row, with fields ``image`` (path, relative to ``images_dir`` when given), ``candidate``,
``references`` (list of strings, or a JSON/Python list literal in CSV) and ``score`` (in [0, 1]) — in JSONL, a JSON
list, CSV or parquet. The official Polaris CSV columns (``imgid``, ``mt``, ``refs``, ``score``) and capeval
benchmark names (``image_path``, ``human``) are accepted as aliases.

Sharded precomputation (large judgment sets, several workers): ``capeval train polos-features --data FILE --shard i/n
--output DIR_i`` encodes the judgments ``index % n == i`` into a feature folder (safetensors + JSON: the rows, their
input indices, the encoders and a fingerprint of the data); ``capeval merge DIR_0 … DIR_n-1 --output DIR`` joins them
in input order (refusing other data/encoders, duplicated and missing records); ``capeval train polos --train DIR``
(and ``--val``) then reads the features instead of running the encoders.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from tqdm.auto import tqdm

from capeval.core.errors import InputError
from capeval.core.record_sources import iter_records, parse_shard
from capeval.functional.polos import layer_norm_statistics, mix_weights, normalise, polos_features, pooled_statistics
from capeval.polos.checkpoint import OFFICIAL_HIDDEN
from capeval.core.inputs import parse_references
from capeval.core.hub import load_safetensors

logger = logging.getLogger(__name__)

FIELDS = {"image": ("image", "image_path", "imgid"), "candidate": ("candidate", "mt"),
          "references": ("references", "refs"), "score": ("score", "human")}


@dataclass
class Recipe:
    lr: float = 3e-5
    batch_size: int = 64
    accumulation: int = 4
    grad_clip: float = 1.0
    scalar_mix_dropout: float = 0.1
    seed: int = 42
    patience: int = 1  # validation epochs without improvement before stopping (Lightning EarlyStopping)
    min_delta: float = 0.0  # an improvement must exceed the best validation Pearson by more than this
    max_epochs: int = 100
    statistics: str = "per_sentence"  # or "batch": the official batch-wide scalar-mix statistics


def _field(row: Dict, name: str, where: str):
    for alias in FIELDS[name]:
        if alias in row:
            return row[alias]
    raise InputError(f"{where} lacks {name!r} (accepted names: {FIELDS[name]})")


def read_judgments(path, images_dir=None) -> List[Dict]:
    """Rows ``{"image", "candidate", "references": [...], "score"}`` from a judgments file (see module docstring)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"judgments file not found: {path}")
    rows = []
    for i, raw in enumerate(iter_records(path)):
        where = f"{path} row {i}"
        image = _field(raw, "image", where)
        if not isinstance(image, str) or not image.strip():
            raise InputError(f"{where}: the image must be a file path, got {image!r}")
        candidate = _field(raw, "candidate", where)
        if not isinstance(candidate, str):
            raise InputError(f"{where}: the candidate is a {type(candidate).__name__}, expected a string")
        if not candidate.strip():
            raise InputError(f"{where} has an empty candidate")
        try:
            score = float(_field(raw, "score", where))
        except (TypeError, ValueError):
            raise InputError(f"{where}: score {_field(raw, 'score', where)!r} is not a number") from None
        if not 0 <= score <= 1:
            raise InputError(f"{where}: score {score} is outside [0, 1] (min-max normalise the judgments first)")
        references = parse_references(_field(raw, "references", where), i)
        rows.append({"image": str(Path(images_dir) / image) if images_dir else image, "candidate": candidate,
                     "references": references, "score": score})
    if not rows:
        raise InputError(f"{path} holds no rows")
    return rows


IMAGE_ITEMS = ("image",)  # per distinct image
TEXT_ITEMS = ("clip_text", "cls", "mean", "variance", "count")  # per distinct text
FEATURES_JSON = "polos_features.json"
FEATURES_TENSORS = "polos_features.safetensors"
FEATURES_FORMAT = "capeval-polos-features/1"


def distinct_items(rows: List[Dict]) -> Tuple[List[str], List[str]]:
    """The sorted distinct images and texts (candidates and references) of ``rows``."""
    images = sorted({row["image"] for row in rows})
    texts = sorted({row["candidate"] for row in rows} | {r for row in rows for r in row["references"]})
    return images, texts


def assemble_bank(rows: List[Dict], images: List[str], texts: List[str],
                  items: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The bank of ``rows`` from the per-distinct-item encoder outputs ``items`` (rows of ``images``/``texts``)."""
    image_index = {path: i for i, path in enumerate(images)}
    text_index = {text: i for i, text in enumerate(texts)}
    refs = [(i, j, ref) for i, row in enumerate(rows) for j, ref in enumerate(row["references"])]
    return {
        **{key: items[key] for key in IMAGE_ITEMS + TEXT_ITEMS},
        "row_image": torch.as_tensor([image_index[row["image"]] for row in rows]),
        "row_candidate": torch.as_tensor([text_index[row["candidate"]] for row in rows]),
        "ref_row": torch.as_tensor([i for i, _, _ in refs]),
        "ref_position": torch.as_tensor([j for _, j, _ in refs]),
        "ref_text": torch.as_tensor([text_index[ref] for _, _, ref in refs]),
        "score": torch.tensor([row["score"] for row in rows]),
    }


class FeatureBank:
    """The frozen encoders' outputs for a set of judgments: each distinct image and text computed once."""

    def __init__(self, scorer):
        self.scorer = scorer

    def _text_layers(self, texts: List[str]) -> Dict[str, torch.Tensor]:
        """First-position vectors of every hidden state with their per-sentence mean/variance/entry count."""
        encoder = self.scorer.encoder
        cls, means, variances, counts = [], [], [], []
        batches = range(0, len(texts), self.scorer.batch_size)
        for start in tqdm(batches, desc="SimCSE layers", disable=len(batches) < 2):
            states, mask = encoder.hidden_states(texts[start:start + self.scorer.batch_size])
            stats = [layer_norm_statistics(h.double(), mask, per_sentence=True) for h in states]
            cls.append(torch.stack([h[:, 0] for h in states], dim=1).cpu())
            means.append(torch.stack([m.flatten() for m, _ in stats], dim=1).cpu())
            variances.append(torch.stack([v.flatten() for _, v in stats], dim=1).cpu())
            counts.append((mask.sum(1) * states[0].shape[-1]).cpu())
        return {"cls": torch.cat(cls), "mean": torch.cat(means), "variance": torch.cat(variances),
                "count": torch.cat(counts)}

    def encode(self, images: List[str], texts: List[str]) -> Dict[str, torch.Tensor]:
        """Encoder outputs per distinct image (``IMAGE_ITEMS``) and text (``TEXT_ITEMS``), in the given order."""
        return {"image": self.scorer.clip_images(images), "clip_text": self.scorer.clip_texts(texts),
                **self._text_layers(texts)}

    def build(self, rows: List[Dict]) -> Dict[str, torch.Tensor]:
        images, texts = distinct_items(rows)
        return assemble_bank(rows, images, texts, self.encode(images, texts))


def encoder_identity(scorer) -> Dict:
    """What precomputed features depend on: the frozen encoders (by name) and their dimensions."""
    return {key: scorer.config[key] for key in ("clip_weights", "text_encoder", "text_dim", "clip_dim", "num_layers")}


class PrecomputedFeatures(NamedTuple):
    """A complete feature set read from disk: the judgments, their bank and the encoders that produced it."""
    rows: List[Dict]
    bank: Dict[str, torch.Tensor]
    encoders: Dict
    source: str


def data_fingerprint(path, images_dir=None) -> Dict:
    """Identifies the judgments a feature shard was computed from (merging refuses shards of different data)."""
    path = Path(path)
    return {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "images_dir": str(images_dir) if images_dir else None}


def write_features(out_dir: Path, *, rows: List[Dict], indices: List[int], total: int, images: List[str],
                   texts: List[str], items: Dict[str, torch.Tensor], encoders: Dict, data: Dict,
                   shard: Optional[str]) -> Path:
    """A feature folder: ``polos_features.safetensors`` (per-item tensors) + ``polos_features.json`` (rows with their
    input indices, item keys, encoders, data fingerprint, shard). Written to a temporary folder, then renamed."""
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file({key: items[key].contiguous().cpu() for key in IMAGE_ITEMS + TEXT_ITEMS}, str(tmp / FEATURES_TENSORS))
    meta = {"format": FEATURES_FORMAT, "encoders": encoders, "data": data, "shard": shard, "total_rows": total,
            "indices": indices, "rows": rows, "images": images, "texts": texts}
    (tmp / FEATURES_JSON).write_text(json.dumps(meta))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    return out_dir


def is_feature_folder(path) -> bool:
    return Path(path).is_dir() and (Path(path) / FEATURES_JSON).is_file()


def read_feature_folder(path) -> Tuple[Dict, Dict[str, torch.Tensor]]:
    path = Path(path)
    if not is_feature_folder(path):
        raise InputError(f"{path} is not a Polos feature folder (no {FEATURES_JSON}; made by "
                         "`capeval train polos-features`)")
    meta = json.loads((path / FEATURES_JSON).read_text())
    if meta.get("format") != FEATURES_FORMAT:
        raise InputError(f"{path}: unknown feature format {meta.get('format')!r} (expected {FEATURES_FORMAT})")
    return meta, load_safetensors(path / FEATURES_TENSORS)


def precompute_features(scorer, judgments, out_dir, *, images_dir=None, shard: int = 0, num_shards: int = 1) -> Path:
    """Encode the judgments ``index % num_shards == shard`` of the file ``judgments`` and write a feature folder."""
    all_rows = read_judgments(judgments, images_dir)
    indices = [i for i in range(len(all_rows)) if i % num_shards == shard]
    if not indices:
        raise InputError(f"{judgments} holds {len(all_rows)} judgments: none for shard {shard}/{num_shards}")
    rows = [all_rows[i] for i in indices]
    images, texts = distinct_items(rows)
    items = FeatureBank(scorer).encode(images, texts)
    return write_features(out_dir, rows=rows, indices=indices, total=len(all_rows), images=images, texts=texts,
                          items=items, encoders=encoder_identity(scorer), data=data_fingerprint(judgments, images_dir),
                          shard=f"{shard}/{num_shards}")


def merge_features(folders: Sequence, out_dir) -> Path:
    """Join shard feature folders in input order; refuses shards of other data or encoders, duplicated records and
    missing ones. Items (images, texts) met in several shards are taken from the first folder holding them."""
    if not folders:
        raise InputError("no feature folders to merge")
    metas, rows, item_source = [], {}, {}
    for folder in folders:
        meta, tensors = read_feature_folder(folder)
        if metas:
            for field in ("encoders", "data", "total_rows"):
                if meta[field] != metas[0][field]:
                    raise InputError(f"{folder}: {field} differ from {folders[0]} ({meta[field]} vs "
                                     f"{metas[0][field]}); these shards are not of the same run")
        metas.append(meta)
        for index, row in zip(meta["indices"], meta["rows"]):
            if index in rows:
                raise InputError(f"record {index} appears in more than one shard ({folder})")
            rows[index] = row
        for kind, keys, names in (("image", meta["images"], IMAGE_ITEMS), ("text", meta["texts"], TEXT_ITEMS)):
            for position, key in enumerate(keys):
                item_source.setdefault((kind, key), (tensors, position))
    total = metas[0]["total_rows"]
    missing = sorted(set(range(total)) - set(rows))
    if missing:
        raise InputError(f"{len(missing)} of {total} records are missing (first: {missing[:5]}); "
                         "run the shard(s) holding them")
    ordered = [rows[i] for i in range(total)]
    images, texts = distinct_items(ordered)
    items = {}
    for kind, keys, names in (("image", images, IMAGE_ITEMS), ("text", texts, TEXT_ITEMS)):
        for name in names:
            items[name] = torch.stack([item_source[(kind, key)][0][name][item_source[(kind, key)][1]] for key in keys])
    return write_features(out_dir, rows=ordered, indices=list(range(total)), total=total, images=images, texts=texts,
                          items=items, encoders=metas[0]["encoders"], data=metas[0]["data"], shard=None)


def load_features(path) -> PrecomputedFeatures:
    """A complete (merged or unsharded) feature folder as training input; a lone shard is refused."""
    meta, tensors = read_feature_folder(path)
    if meta["shard"] not in (None, "0/1") or len(meta["indices"]) != meta["total_rows"]:
        raise InputError(f"{path} holds shard {meta['shard']} only ({len(meta['indices'])} of {meta['total_rows']} "
                         "records); merge every shard first: capeval merge <shard folders> --output <folder>")
    bank = assemble_bank(meta["rows"], meta["images"], meta["texts"], tensors)
    return PrecomputedFeatures(meta["rows"], bank, meta["encoders"], str(path))


def load_training_data(path, images_dir=None) -> Union[List[Dict], PrecomputedFeatures]:
    """``--train``/``--val``: a judgments file (encoded during training) or a feature folder (read, not recomputed)."""
    return load_features(path) if is_feature_folder(path) else read_judgments(path, images_dir)


def _bank(scorer, data: Union[List[Dict], PrecomputedFeatures], name: str) -> Dict[str, torch.Tensor]:
    if isinstance(data, PrecomputedFeatures):
        expected = encoder_identity(scorer)
        if data.encoders != expected:
            raise InputError(f"{name} features {data.source} were computed with encoders {data.encoders}, but the head "
                             f"being trained uses {expected}; recompute them with these encoders")
        return data.bank
    return FeatureBank(scorer).build(data)


def _mixed(head, bank, text, group, num_groups, *, per_sentence: bool, dropped: Optional[torch.Tensor]):
    """Scalar mix of the first positions of sentences ``text``; statistics per sentence or pooled per ``group``;
    ``dropped`` (num_groups, layers): layers the scalar-mix dropout removes, one draw per group (one official call)."""
    mean, variance = bank["mean"][text], bank["variance"][text]
    if not per_sentence:
        mean, variance = pooled_statistics(mean, variance, bank["count"][text], group, num_groups)
        mean, variance = mean[group], variance[group]
    normed = normalise(bank["cls"][text], mean.float().unsqueeze(-1), variance.float().unsqueeze(-1))
    if dropped is None:
        weights = mix_weights(head.scalar_parameters).expand(len(text), -1)
    else:
        weights = torch.stack([mix_weights(head.scalar_parameters, d) for d in dropped])[group]
    return head.gamma * (weights.unsqueeze(-1) * normed).sum(1)


def head_scores(head, bank: Dict[str, torch.Tensor], rows: torch.Tensor, *, statistics: str = "per_sentence",
                layer_dropout: float = 0.0) -> torch.Tensor:
    """Polos of judgments ``rows`` (one batch) from the constant encoder outputs and the trainable head."""
    per_sentence = statistics == "per_sentence"
    position = torch.full((len(bank["score"]),), -1, dtype=torch.long)
    position[rows] = torch.arange(len(rows))
    select = position[bank["ref_row"]] >= 0
    owner = position[bank["ref_row"][select]]
    ref_group = bank["ref_position"][select]
    num_ref_groups = int(ref_group.max()) + 1
    draw = (lambda groups: torch.rand(groups, head.scalar_parameters.numel()) < layer_dropout) \
        if layer_dropout > 0 else (lambda groups: None)
    cand_text = bank["row_candidate"][rows]
    cand_se = _mixed(head, bank, cand_text, torch.zeros_like(cand_text), 1, per_sentence=per_sentence,
                     dropped=draw(1))
    ref_se = _mixed(head, bank, bank["ref_text"][select], ref_group, num_ref_groups, per_sentence=per_sentence,
                    dropped=draw(num_ref_groups))
    image = bank["image"][bank["row_image"][rows]]
    cand_clip = bank["clip_text"][cand_text]
    features = polos_features(ref_se, cand_se[owner], image[owner], cand_clip[owner],
                              bank["clip_text"][bank["ref_text"][select]])
    per_ref = head.mlp(features).squeeze(-1)
    return torch.full((len(rows),), float("-inf")).scatter_reduce(0, owner, per_ref, reduce="amax")


def evaluate_head(head, bank, recipe: Recipe) -> Dict[str, float]:
    """Validation MSE and Pearson (batches of ``recipe.batch_size`` in file order, as the official validation)."""
    head.eval()
    with torch.no_grad():
        order = torch.arange(len(bank["score"]))
        pred = torch.cat([head_scores(head, bank, order[i:i + recipe.batch_size], statistics=recipe.statistics)
                          for i in range(0, len(order), recipe.batch_size)]).numpy()
    gold = bank["score"].numpy()
    defined = np.isfinite(pred).all() and pred.std() > 0 and gold.std() > 0
    # undefined (constant or non-finite predictions, constant judgments): NaN, as the official scipy Pearson
    pearson = float(np.corrcoef(pred, gold)[0, 1]) if defined else float("nan")
    return {"mse": float(((pred - gold) ** 2).mean()), "pearson": pearson}


def _monitored(pearson: float) -> np.float32:
    """The value the official callbacks compare: Polos logs its validation Pearson as a float32 tensor."""
    return np.float32(pearson)


def kept_epoch(history: Sequence[Dict]) -> int:
    """The epoch whose head training keeps: the official ``ModelCheckpoint`` (mode max) best checkpoint, i.e. the first
    trained epoch (epoch ≥ 1) with the highest validation Pearson, NaN ranking as −∞. Epoch 0 (the head before
    training, Lightning's sanity check) is never kept."""
    best_epoch, best = None, None
    for entry in history:
        if entry["epoch"] < 1:
            continue
        score = _monitored(entry["pearson"])
        score = np.float32(-np.inf) if np.isnan(score) else score
        if best is None or score > best:  # strictly greater: a tie keeps the earlier epoch
            best_epoch, best = entry["epoch"], score
    if best_epoch is None:
        raise ValueError("no trained epoch in the history")
    return best_epoch


def train_head(scorer, train_rows: Union[List[Dict], PrecomputedFeatures],
               val_rows: Union[List[Dict], PrecomputedFeatures], recipe: Recipe = Recipe()) -> List[Dict]:
    """Train ``scorer.head`` in place (on CPU); returns the per-epoch validation history (epoch 0 = before training,
    logged only). Early stopping and the head kept follow the official Lightning callbacks (module docstring): the
    first epoch always improves on the initial best of −∞; training stops once ``recipe.patience`` consecutive
    epochs fail to beat the best Pearson by more than ``recipe.min_delta``; ``scorer.head`` ends as the
    :func:`kept_epoch` head. ``train_rows``/``val_rows``: judgment rows (encoded here) or precomputed features
    (:func:`load_features`)."""
    if recipe.statistics not in ("per_sentence", "batch"):
        raise ValueError(f"statistics must be 'per_sentence' or 'batch', not {recipe.statistics!r}")
    if recipe.max_epochs < 1:
        raise InputError(f"max_epochs must be at least 1 (the kept head is a trained epoch's), got {recipe.max_epochs}")
    train, val = _bank(scorer, train_rows, "training"), _bank(scorer, val_rows, "validation")
    head = scorer.head.cpu()
    torch.manual_seed(recipe.seed)
    optimizer = torch.optim.Adam(head.parameters(), lr=recipe.lr)
    history = [{"epoch": 0, **evaluate_head(head, val, recipe)}]
    best_score, bad_epochs, kept_state = np.float32(-np.inf), 0, None
    generator = torch.Generator().manual_seed(recipe.seed)
    progress = tqdm(range(1, recipe.max_epochs + 1), desc="Polos M2LHF epochs")
    for epoch in progress:
        head.train()
        order = torch.randperm(len(train["score"]), generator=generator)
        batches = list(order.split(recipe.batch_size))
        optimizer.zero_grad()
        for step, rows in enumerate(batches, 1):
            predicted = head_scores(head, train, rows, statistics=recipe.statistics,
                                    layer_dropout=recipe.scalar_mix_dropout)
            loss = ((predicted - train["score"][rows]) ** 2).sum()
            (loss / recipe.accumulation).backward()
            if step % recipe.accumulation == 0 or step == len(batches):
                torch.nn.utils.clip_grad_norm_(head.parameters(), recipe.grad_clip)
                optimizer.step()
                optimizer.zero_grad()
        history.append({"epoch": epoch, **evaluate_head(head, val, recipe)})
        progress.set_postfix(val_pearson=f"{history[-1]['pearson']:.4f}", val_mse=f"{history[-1]['mse']:.5f}")
        logger.info("epoch %d: validation MSE %.5f, Pearson %.4f", epoch, history[-1]["mse"], history[-1]["pearson"])
        tqdm.write(f"epoch {epoch}: validation MSE {history[-1]['mse']:.5f}, Pearson {history[-1]['pearson']:.4f}")
        if kept_epoch(history) == epoch:  # the best checkpoint so far (ModelCheckpoint)
            kept_state = {k: v.clone() for k, v in head.state_dict().items()}
        current = _monitored(history[-1]["pearson"])
        if current - np.float32(recipe.min_delta) > best_score:  # False for NaN (EarlyStopping)
            best_score, bad_epochs = current, 0
        else:
            bad_epochs += 1
            if bad_epochs >= recipe.patience:
                break
    head.load_state_dict(kept_state)
    scorer.head = head.to(scorer.device).eval()
    scorer.reset_caches()
    return history


def new_scorer(*, init: Optional[str], clip_weights: str, text_encoder: str, hidden: Sequence[int], seed: int,
               device: str = "auto"):
    """A scorer whose head is ``init`` (fine-tuning) or, as in the official recipe, a new seeded head."""
    from capeval.backbones.clip import CONFIG_FILE, WEIGHTS_FILE
    from capeval.core.hub import resolve
    from capeval.polos.checkpoint import head_config
    from capeval.polos.scorer import PolosScorer, encoder_dir, head_from_config

    if init:
        return PolosScorer(init, device=device)
    text_dim = json.loads((encoder_dir(text_encoder) / "config.json").read_text())["hidden_size"]
    clip_config = json.loads((resolve(clip_weights, [CONFIG_FILE, WEIGHTS_FILE]) / CONFIG_FILE).read_text())
    config = head_config(text_dim=text_dim, clip_dim=clip_config["model_cfg"]["embed_dim"], hidden=hidden,
                         clip_weights=clip_weights, text_encoder=text_encoder)
    torch.manual_seed(seed)
    return PolosScorer(None, head=head_from_config(config), config=config, device=device)


def train_and_save(train_rows: Union[List[Dict], PrecomputedFeatures],
                   val_rows: Union[List[Dict], PrecomputedFeatures], out: Path, *, recipe: Recipe = Recipe(),
                   init: Optional[str] = None, clip_weights: str = "openai-clip-vit-b-32",
                   text_encoder: str = "simcse-roberta-base", hidden: Sequence[int] = (2304, 1152),
                   device: str = "auto", data_description: str = "") -> Path:
    """Train and write a hub-ready artifact: ``polos_config.json``, ``polos_head.safetensors``, ``training.json``
    (recipe and validation history) and a model card."""
    from capeval.core.convert import write_model_card
    from capeval.polos.checkpoint import HEAD_LICENSE, write_head

    scorer = new_scorer(init=init, clip_weights=clip_weights, text_encoder=text_encoder, hidden=hidden,
                        seed=recipe.seed, device=device)
    history = train_head(scorer, train_rows, val_rows, recipe)
    n_train, n_val = (len(d.rows) if isinstance(d, PrecomputedFeatures) else len(d) for d in (train_rows, val_rows))
    write_head(out, scorer.head.state_dict(), scorer.config)
    best = history[kept_epoch(history)]  # the epoch of the saved head
    (out / "training.json").write_text(json.dumps({"recipe": asdict(recipe), "history": history,
                                                   "best_epoch": best["epoch"], "train_rows": n_train,
                                                   "val_rows": n_val}, indent=2))
    write_model_card(out, title="Polos head (trained with capeval M²LHF)", source=data_description or "user data",
                     license=HEAD_LICENSE,
                     body=f"Trained on {n_train} judgments, validated on {n_val}; "
                          f"{'fine-tuned from ' + init if init else 'new head'}. Best validation Pearson "
                          f"{best['pearson']:.4f} (MSE {best['mse']:.5f}) at epoch {best['epoch']}.\n\n"
                          f"Recipe: `{json.dumps(asdict(recipe))}`. Encoders (frozen): "
                          f"`{scorer.config['clip_weights']}`, `{scorer.config['text_encoder']}`.\n\n"
                          "Use: `capeval score polos --weights <this directory or repo id>` or "
                          "`evaluate.load('capeval/polos', weights=...)`.")
    return out


# `capeval train polos` / `capeval train polos-features`

def configure_training(parser) -> None:
    parser.add_argument("--train", required=True, help="judgments: JSONL, JSON, CSV or parquet rows with image, "
                                                       "candidate, references, score (see capeval.polos.training); "
                                                       "or a feature folder of `capeval train polos-features` "
                                                       "(merged), read instead of running the encoders")
    parser.add_argument("--val", required=True, help="validation judgments or feature folder, same formats")
    parser.add_argument("--images", help="directory the image paths are relative to")
    parser.add_argument("--output", required=True,
                        help="output directory (hub-ready head artifact + model card)")
    parser.add_argument("--init", help="head to fine-tune (registry name, hub id, directory or reprod.ckpt); "
                                       "default: a new head, as the official recipe")
    parser.add_argument("--clip-weights", default="openai-clip-vit-b-32", help="CLIP of a new head")
    parser.add_argument("--text-encoder", default="simcse-roberta-base", help="SimCSE encoder of a new head")
    parser.add_argument("--hidden", default=",".join(map(str, OFFICIAL_HIDDEN)), help="MLP hidden sizes of a new head")
    parser.add_argument("--statistics", choices=("per_sentence", "batch"), default="per_sentence",
                        help="scalar-mix statistics while training (batch: the official batch-wide ones)")
    parser.add_argument("--lr", type=float, default=Recipe.lr, help="Adam learning rate (official 3e-5)")
    parser.add_argument("--max-epochs", type=int, default=Recipe.max_epochs,
                        help=f"epochs at most, with early stopping on the validation Pearson "
                             f"(default: {Recipe.max_epochs})")
    parser.add_argument("--seed", type=int, default=Recipe.seed,
                        help=f"seed of the training run (default: {Recipe.seed})")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps (default: auto)")


def parse_hidden(text) -> Tuple[int, ...]:
    """``--hidden``: the MLP's hidden sizes, comma-separated positive integers (e.g. ``2304,1152``)."""
    try:
        hidden = tuple(int(part) for part in str(text).split(","))
    except ValueError:
        raise InputError(f"--hidden takes comma-separated positive integers (e.g. 2304,1152), got {text!r}") from None
    if not all(size > 0 for size in hidden):
        raise InputError(f"--hidden sizes must be positive, got {text!r}")
    return hidden


def train_polos(args) -> Path:
    recipe = Recipe(lr=args.lr, max_epochs=args.max_epochs, seed=args.seed, statistics=args.statistics)
    hidden = parse_hidden(args.hidden)
    return train_and_save(load_training_data(args.train, args.images), load_training_data(args.val, args.images),
                          Path(args.output), recipe=recipe, init=args.init, clip_weights=args.clip_weights,
                          text_encoder=args.text_encoder, hidden=hidden, device=args.device,
                          data_description=f"train {args.train}, validation {args.val}")


def configure_features(parser) -> None:
    parser.add_argument("--data", required=True, help="judgments file (same formats as `capeval train polos --train`)")
    parser.add_argument("--images", help="directory the image paths are relative to")
    parser.add_argument("--output", required=True, help="feature folder to write (safetensors + JSON)")
    parser.add_argument("--shard", help="i/n: encode only the judgments with index %% n == i (then `capeval merge` "
                                        "the n folders)")
    parser.add_argument("--init", help="take the encoders from this head (as `capeval train polos --init`)")
    parser.add_argument("--clip-weights", default="openai-clip-vit-b-32", help="CLIP of a new head")
    parser.add_argument("--text-encoder", default="simcse-roberta-base", help="SimCSE encoder of a new head")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--batch-size", type=int, default=64, help="judgments per encoder batch (default: 64)")


def run_polos_features(args) -> Path:
    shard, num_shards = parse_shard(args.shard)
    scorer = new_scorer(init=args.init, clip_weights=args.clip_weights, text_encoder=args.text_encoder,
                        hidden=(8, 8), seed=0, device=args.device)  # the head is not used: encoders only
    scorer.batch_size = args.batch_size
    scorer.clip.batch_size = args.batch_size
    return precompute_features(scorer, args.data, Path(args.output), images_dir=args.images, shard=shard,
                               num_shards=num_shards)
