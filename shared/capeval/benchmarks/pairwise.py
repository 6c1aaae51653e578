"""Pairwise benchmarks (which of two captions do people prefer?): Pascal-50S, Reformulations, FOIL."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from capeval.benchmarks.loaders import raw_file
from capeval.core.errors import InputError

PREFERS_A, PREFERS_B, TIED = 0, 1, -1
PASCAL_CATEGORIES = {1: "HC", 2: "HI", 3: "HM", 4: "MM"}  # the CIDEr release's category codes


@dataclass
class PairwiseBenchmark:
    name: str
    candidates_a: List[str]
    candidates_b: List[str]
    references: List[List[str]]  # each pair's full reference pool
    images: List[str]
    preference: List[int]  # PREFERS_A, PREFERS_B, or TIED (a tied vote, broken at random in each draw)
    protocol: str
    categories: Optional[List[str]] = None
    votes_a: Optional[List[int]] = None
    votes_b: Optional[List[int]] = None
    references_per_draw: Optional[int] = None  # references sampled from the pool in each draw; None: all of them
    draws: int = 1  # seeds 0 .. draws-1; the value is the mean over draws
    statistic: str = "pairwise_accuracy"
    # "image": one sample per image, shared by all of the image's pairs (the EnsembEval code); "pair": one per pair
    sample_references_per: str = "image"

    def draw(self, seed: int) -> Tuple[np.ndarray, List[List[str]]]:
        """(people prefer A?, references) for one seeded draw: tied votes broken by a fair coin per pair, then
        ``references_per_draw`` references sampled without replacement from the pool, once per image (in order
        of the image's first pair; all of an image's pairs get the same sample) or, with
        ``sample_references_per="pair"``, once per pair in pair order."""
        if self.sample_references_per not in ("image", "pair"):
            raise InputError(f"sample_references_per must be 'image' or 'pair', not {self.sample_references_per!r}")
        rng = np.random.default_rng(seed)
        preference = np.asarray(self.preference)
        coin = rng.integers(0, 2, len(preference))
        prefers_a = np.where(preference == TIED, coin == 0, preference == PREFERS_A)
        k = self.references_per_draw
        if k is None:
            return prefers_a, [list(r) for r in self.references]

        def sample(refs: Sequence[str]) -> List[str]:
            return [refs[j] for j in rng.choice(len(refs), size=min(k, len(refs)), replace=False)]

        if self.sample_references_per == "pair":
            return prefers_a, [sample(refs) for refs in self.references]
        pools: Dict[str, List[str]] = {}
        for image, refs in zip(self.images, self.references):
            if pools.setdefault(image, list(refs)) != list(refs):
                raise InputError(f"{self.name}: the pairs of image {image!r} have different reference pools; "
                                 f"sample references per pair instead")
        samples = {image: sample(refs) for image, refs in pools.items()}
        return prefers_a, [list(samples[image]) for image in self.images]


def majority(votes_a: Sequence[int], votes_b: Sequence[int]) -> List[int]:
    """Majority preference per pair; equal votes give ``TIED``."""
    return [PREFERS_A if a > b else PREFERS_B if b > a else TIED for a, b in zip(votes_a, votes_b)]


def pascal50s(data_dir: Path) -> PairwiseBenchmark:
    """Pascal-50S (4,000 pairs over 1,000 images, 1,000 pairs per category) with the 48 consensus references.

    The 48 references are the image's (every pair of an image has the same 48, in the same order), and each draw
    samples 5 of them per image, shared by the image's pairs, as the EnsembEval code does. The CIDEr release's
    per-pair votes (``consensus_pascal.mat``) are not in this data folder; the pairs file
    (``pascal50s_pairs_48refs.parquet``) carries the majority label of the 48 votes (0: A, 1: B) as decided
    by its distributor, so the seeded tie-break has nothing to break and each draw varies the 5 references only.
    """
    import pandas as pd

    file = "pascal50s_pairs_48refs.parquet"
    table = pd.read_parquet(raw_file(data_dir, "pascal50s", file))
    labels = [s["label"] for s in table["scores"]]
    for record, label in enumerate(labels):
        if label not in (PREFERS_A, PREFERS_B) or isinstance(label, bool):
            raise InputError(f"{file}: record {record}: field 'scores.label': {label!r} is not 0 (candidate A "
                             f"preferred) or 1 (candidate B preferred)")
    labels = [int(label) for label in labels]
    return PairwiseBenchmark(
        "pascal50s", [c.strip() for c in table["candidate_a"]], [c.strip() for c in table["candidate_b"]],
        [[r.strip() for r in refs] for refs in table["references"]],
        [Path(p).name for p in table["image_path"]], labels,
        protocol="majority of 48 votes (random tie-break), 5 of the image's 48 references sampled per image and "
                 "draw (shared by the image's pairs), strict pairwise accuracy per category (HC/HI/HM/MM) and "
                 "their mean, mean over draws with seeds 0-4",
        categories=[PASCAL_CATEGORIES[int(c)] for c in table["category"]], references_per_draw=5, draws=5)


def reformulations(data_dir: Path) -> PairwiseBenchmark:
    """Captions (``question``) and their human reformulations (``answer``): people prefer the reformulation."""
    rows = json.loads(raw_file(data_dir, "reformulations", "full_reformulation_dataset.json").read_text())
    images = [r["image"].split("/datasets/", 1)[-1] for r in rows]  # drop the authors' cluster prefix
    return PairwiseBenchmark(
        "reformulations", [r["question"] for r in rows], [r["answer"] for r in rows], [[] for _ in rows], images,
        [PREFERS_B] * len(rows),
        protocol="candidate A = original caption, B = its human reformulation (preferred); strict pairwise "
                 "accuracy; the release holds no reference captions (reference-free metrics only)")


def _foil(data_dir: Path, one_reference: bool) -> PairwiseBenchmark:
    foil = json.loads(raw_file(data_dir, "foil", "foilv1.0_test_2017.json").read_text())
    coco = json.loads(raw_file(data_dir, "foil", "captions_val2014.json").read_text())
    coco_refs: Dict[int, List[str]] = {}
    for ann in coco["annotations"]:
        coco_refs.setdefault(ann["image_id"], []).append(ann["caption"])
    files = {img["id"]: img["file_name"] for img in foil["images"]}
    originals, foiled = {}, {}
    for ann in foil["annotations"]:
        if ann["foil"]:
            foiled.setdefault(ann["id"], []).append(ann)
        else:
            originals[ann["id"]] = ann
    a, b, refs, images = [], [], [], []
    for ann_id, foils in foiled.items():
        if ann_id not in originals:
            raise InputError(f"foil: annotation {ann_id} has foiled captions but no original caption")
        original = originals[ann_id]
        pool = [r for r in coco_refs.get(original["image_id"], []) if r != original["caption"]]
        if not pool:
            raise InputError(f"foil: no COCO reference captions for image {original['image_id']}")
        for f in foils:
            a.append(original["caption"])
            b.append(f["caption"])
            refs.append(pool[:1] if one_reference else pool)
            images.append(files[original["image_id"]])
    n_refs = "the first" if one_reference else "all"
    return PairwiseBenchmark(
        "foil_one_ref" if one_reference else "foil", a, b, refs, images, [PREFERS_A] * len(a),
        protocol=f"FOIL-COCO test: candidate A = original COCO caption (preferred), B = a foiled caption; "
                 f"references = {n_refs} of the image's other COCO captions (the original removed); accuracy")


def foil(data_dir: Path) -> PairwiseBenchmark:
    return _foil(data_dir, one_reference=False)


def foil_one_ref(data_dir: Path) -> PairwiseBenchmark:
    return _foil(data_dir, one_reference=True)


PAIRWISE_LOADERS = {"pascal50s": pascal50s, "reformulations": reformulations, "foil": foil,
                    "foil_one_ref": foil_one_ref}
