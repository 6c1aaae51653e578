"""Loaders for the raw releases of the correlation benchmarks (``<data_dir>/<benchmark>/...``), one row per judgment."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

from capeval.errors import InputError


@dataclass
class Benchmark:
    name: str
    candidates: List[str]
    references: List[List[str]]
    images: List[str]  # image file names/paths as in the release (images are not shipped)
    human: List[float]
    statistic: str  # the statistic the literature reports for it
    protocol: str
    raters: Optional[List[int]] = None  # rater index within an item, where each rating is its own row
    categories: Optional[List[str]] = None


def raw_file(data_dir: Path, *parts: str) -> Path:
    path = data_dir.joinpath(*parts)
    if not path.exists():
        raise InputError(f"benchmark file not found: {path} (pass --data-dir, the folder holding the raw releases)")
    return path


def flickr8k_expert(data_dir: Path) -> Benchmark:
    data = json.loads(raw_file(data_dir, "flickr8k", "flickr8k_expert_clipscore_format.json").read_text())
    rows, raters = [], []
    for entry in data.values():
        seen: Dict[str, int] = defaultdict(int)  # the experts' ratings of one caption follow each other
        for j in entry["human_judgement"]:
            rows.append((j["caption"], entry["ground_truth"], entry["image_path"], float(j["rating"])))
            raters.append(seen[j["caption"]])
            seen[j["caption"]] += 1
    return Benchmark("flickr8k_expert", *map(list, zip(*rows)), statistic="kendall_tau_c",
                     protocol="each of the 3 expert ratings is its own row; candidates that are also references "
                              "dropped (CLIPScore-format file: 5,664 candidates, 16,992 ratings); 5 references",
                     raters=raters)


def flickr8k_cf(data_dir: Path) -> Benchmark:
    captions: Dict[str, str] = {}
    by_image: Dict[str, List[str]] = defaultdict(list)
    for line in raw_file(data_dir, "flickr8k", "Flickr8k.token.txt").read_text().splitlines():
        if "\t" in line:
            caption_id, text = line.split("\t", 1)
            captions[caption_id] = text.strip()
            by_image[caption_id.split("#")[0]].append(caption_id)
    rows = []
    for line in raw_file(data_dir, "flickr8k", "CrowdFlowerAnnotations.txt").read_text().splitlines():
        image, caption_id, percent_yes, *_ = line.split("\t")
        refs = [captions[c] for c in by_image[image] if c != caption_id]
        rows.append((captions[caption_id], refs, image, float(percent_yes)))
    return Benchmark("flickr8k_cf", *map(list, zip(*rows)), statistic="kendall_tau_b",
                     protocol="share of 'yes' votes per (image, caption) pair; the candidate removed from the "
                              "image's 5 reference captions")


def _words(text: str) -> List[str]:
    return re.sub(r"[^a-z0-9 ]", " ", text.lower()).split()


def composite(data_dir: Path) -> Benchmark:
    import pandas as pd

    table = pd.read_parquet(raw_file(data_dir, "composite", "composite_candidates_refs_ratings.parquet"))
    table = table[table.groupby("image_path", sort=False).cumcount() < 3]  # the first 3 candidates per image
    candidates = table["candidate"].tolist()
    # one candidate per image is a human caption that also appears (re-cased) among its references: drop it there
    references = [[r for r in refs if _words(r) != _words(c)] for c, refs in zip(candidates, table["references"])]
    return Benchmark("composite", candidates, references, table["image_path"].tolist(),
                     [float(s["human_correctness"]) for s in table["scores"]], statistic="kendall_tau_c",
                     protocol="first 3 candidates per image, correctness rating; a candidate that is one of the "
                              "references (same words, ignoring case and punctuation) is removed from them")


def thumb(data_dir: Path) -> Benchmark:
    refs = {}
    for line in raw_file(data_dir, "thumb", "references.json").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            refs[row["seg_id"]] = row["refs"]
    rows = [json.loads(line) for line in raw_file(data_dir, "thumb", "THumB-1.0.jsonl").read_text().splitlines()
            if line.strip()]
    return Benchmark("thumb", [r["hyp"] for r in rows], [refs[r["seg_id"]] for r in rows], [r["image"] for r in rows],
                     [float(r["human_score"]) for r in rows], statistic="pearson",
                     protocol="5 systems x 500 COCO images, 4 references, THumB total score")


def polaris(data_dir: Path) -> Benchmark:
    rows = json.loads(raw_file(data_dir, "polaris_val", "polaris_val_subset.json").read_text())
    return Benchmark("polaris", [r["mt"] for r in rows], [[] for _ in rows], [r["imgid"] for r in rows],
                     [float(r["score"]) for r in rows], statistic="kendall_tau_c",
                     protocol="Polaris validation subset: one row per candidate, score = mean of its raters' "
                              "normalised ratings; this release holds no references (reference-free metrics only)")


CORRELATION_LOADERS: Dict[str, Callable[[Path], Benchmark]] = {
    "flickr8k_expert": flickr8k_expert, "flickr8k_cf": flickr8k_cf, "composite": composite, "thumb": thumb,
    "polaris": polaris,
}
