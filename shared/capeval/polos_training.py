"""M²LHF training of the Polos head (scalar mix + MLP) with frozen encoders, as the official recipe:
MSE (sum), Adam lr 3e-5, batch 64 with 4 accumulation steps, gradient clipping 1.0, seed 42, early stopping on
validation Pearson (patience 1, at most 100 epochs).

Frozen encoders make every encoder output a constant, so they are computed once: CLIP features, and for each
sentence its 13 per-layer normalised first-position vectors (per-sentence statistics), which the trainable
scalar mix then combines exactly as at scoring time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from capeval.errors import InputError
from capeval.functional.polos import layer_norm_statistics, polos_features
from capeval.inputs import load_images
from capeval.runtime import EmbeddingCache, encode_cached, text_key


@dataclass
class Recipe:
    lr: float = 3e-5
    batch_size: int = 64
    accumulation: int = 4
    grad_clip: float = 1.0
    seed: int = 42
    patience: int = 1
    max_epochs: int = 100


def read_judgments(path, images_dir=None) -> List[Dict]:
    """Rows ``{"image", "candidate", "references": [...], "score"}`` (JSONL or parquet)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"training data not found: {path}")
    if path.suffix == ".parquet":
        import pandas as pd

        rows = pd.read_parquet(path).to_dict("records")
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for i, row in enumerate(rows):
        missing = [k for k in ("image", "candidate", "references", "score") if k not in row]
        if missing:
            raise InputError(f"{path} row {i} lacks {missing}")
        row["references"] = [row["references"]] if isinstance(row["references"], str) else list(row["references"])
        if images_dir:
            row["image"] = str(Path(images_dir) / row["image"])
    if not rows:
        raise InputError(f"{path} holds no rows")
    return rows


class FeatureBank:
    """Constant encoder outputs for a Polos scorer's encoders, each distinct text/image computed once."""

    def __init__(self, scorer):
        self.scorer = scorer
        self.layers = EmbeddingCache("polos-train-layers")

    @torch.inference_mode()
    def _normalised_layers(self, texts: List[str]) -> torch.Tensor:
        s = self.scorer
        batch = s.tokenizer(texts, padding=True, truncation=True, max_length=min(512, s.tokenizer.model_max_length),
                            return_tensors="pt")
        hidden = s.encoder(**{k: v.to(s.device) for k, v in batch.items()}, output_hidden_states=True).hidden_states
        out = []
        for h in hidden:
            h = h.float()
            mean, variance = layer_norm_statistics(h, batch["attention_mask"].to(s.device), per_sentence=True)
            out.append(((h - mean) / torch.sqrt(variance + 1e-12))[:, 0])
        return torch.stack(out, dim=1).cpu()  # (B, 13, D)

    def text_layers(self, texts: Sequence[str]) -> torch.Tensor:
        return encode_cached(texts, [text_key(t) for t in texts], self._normalised_layers, self.layers,
                             batch_size=self.scorer.batch_size, desc="SimCSE layers")

    def build(self, rows: List[Dict]) -> Dict[str, torch.Tensor]:
        """One entry per (row, reference): all constant parts; the row index maps references to judgments."""
        s = self.scorer
        owner = [i for i, row in enumerate(rows) for _ in row["references"]]
        refs = [r for row in rows for r in row["references"]]
        cands = [row["candidate"] for row in rows]
        prefix = "A photo depicts "
        return {
            "owner": torch.as_tensor(owner),
            "image": s.clip.encode_images(load_images([row["image"] for row in rows])),
            "cand_clip": s.clip.encode_texts([prefix + c for c in cands]),
            "ref_clip": s.clip.encode_texts([prefix + r for r in refs]),
            "cand_layers": self.text_layers(cands),
            "ref_layers": self.text_layers(refs),
            "score": torch.tensor([float(row["score"]) for row in rows]),
        }


def head_scores(head, bank: Dict[str, torch.Tensor], rows: torch.Tensor) -> torch.Tensor:
    """Polos of judgments ``rows`` (max over their references) from the constant parts and the trainable head."""
    weights = torch.softmax(head.scalar_parameters, 0)
    select = torch.isin(bank["owner"], rows)
    owner = bank["owner"][select]
    mix = lambda layers: head.gamma * (weights[None, :, None] * layers).sum(1)  # noqa: E731
    ref_se = mix(bank["ref_layers"][select])
    cand_se = mix(bank["cand_layers"][owner])
    feats = polos_features(ref_se, cand_se, bank["image"][owner], bank["cand_clip"][owner], bank["ref_clip"][select])
    per_ref = head.mlp(feats).squeeze(-1)
    position = {int(r): i for i, r in enumerate(rows)}
    index = torch.as_tensor([position[int(o)] for o in owner])
    return torch.full((len(rows),), float("-inf")).scatter_reduce(0, index, per_ref, reduce="amax")


def evaluate_head(head, bank) -> Dict[str, float]:
    head.eval()
    with torch.no_grad():
        pred = head_scores(head, bank, torch.arange(len(bank["score"]))).numpy()
    gold = bank["score"].numpy()
    pearson = float(np.corrcoef(pred, gold)[0, 1]) if pred.std() > 0 else 0.0
    return {"mse": float(((pred - gold) ** 2).mean()), "pearson": pearson}


def train_head(scorer, train_rows: List[Dict], val_rows: List[Dict], recipe: Recipe = Recipe()):
    """Train ``scorer.head`` in place; returns the history (validation MSE/Pearson per epoch)."""
    torch.manual_seed(recipe.seed)
    bank = FeatureBank(scorer)
    train, val = bank.build(train_rows), bank.build(val_rows)
    head = scorer.head.cpu()
    optimizer = torch.optim.Adam([p for p in head.parameters()], lr=recipe.lr)
    history = [{"epoch": 0, **evaluate_head(head, val)}]
    best, best_state, bad_epochs = history[0]["pearson"], {k: v.clone() for k, v in head.state_dict().items()}, 0
    generator = torch.Generator().manual_seed(recipe.seed)
    for epoch in tqdm(range(1, recipe.max_epochs + 1), desc="Polos epochs"):
        head.train()
        order = torch.randperm(len(train_rows), generator=generator)
        optimizer.zero_grad()
        for step, start in enumerate(range(0, len(order), recipe.batch_size), 1):
            rows = order[start:start + recipe.batch_size]
            loss = ((head_scores(head, train, rows) - train["score"][rows]) ** 2).sum()
            (loss / recipe.accumulation).backward()
            if step % recipe.accumulation == 0 or start + recipe.batch_size >= len(order):
                torch.nn.utils.clip_grad_norm_(head.parameters(), recipe.grad_clip)
                optimizer.step()
                optimizer.zero_grad()
        history.append({"epoch": epoch, **evaluate_head(head, val)})
        tqdm.write(f"epoch {epoch}: val MSE {history[-1]['mse']:.5f}, Pearson {history[-1]['pearson']:.4f}")
        if history[-1]["pearson"] > best:
            best, best_state, bad_epochs = history[-1]["pearson"], {k: v.clone() for k, v in head.state_dict().items()}, 0
        else:
            bad_epochs += 1
            if bad_epochs >= recipe.patience:
                break
    head.load_state_dict(best_state)
    head.eval()
    return history
