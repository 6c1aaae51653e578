"""Loaders for the raw benchmark releases (laid out as ``<data_dir>/<benchmark>/...``), one row per judgment."""

from __future__ import annotations

import json
import os
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


def _file(data_dir: Path, *parts: str) -> Path:
    path = data_dir.joinpath(*parts)
    if not path.exists():
        raise InputError(f"benchmark file not found: {path} (pass --data-dir, the folder holding the raw releases)")
    return path


def flickr8k_expert(data_dir: Path) -> Benchmark:
    data = json.loads(_file(data_dir, "flickr8k", "flickr8k_expert_clipscore_format.json").read_text())
    rows = [(j["caption"], entry["ground_truth"], entry["image_path"], float(j["rating"]))
            for entry in data.values() for j in entry["human_judgement"]]
    return Benchmark("flickr8k_expert", *map(list, zip(*rows)), statistic="kendall_tau_c",
                     protocol="each of the 3 expert ratings is its own row; candidates that are also references "
                              "dropped (CLIPScore-format file: 5,664 candidates, 16,992 ratings); 5 references")


def flickr8k_cf(data_dir: Path) -> Benchmark:
    captions: Dict[str, str] = {}
    by_image: Dict[str, List[str]] = defaultdict(list)
    for line in _file(data_dir, "flickr8k", "Flickr8k.token.txt").read_text().splitlines():
        if "\t" in line:
            caption_id, text = line.split("\t", 1)
            captions[caption_id] = text.strip()
            by_image[caption_id.split("#")[0]].append(caption_id)
    rows = []
    for line in _file(data_dir, "flickr8k", "CrowdFlowerAnnotations.txt").read_text().splitlines():
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

    table = pd.read_parquet(_file(data_dir, "composite", "composite_candidates_refs_ratings.parquet"))
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
    for line in _file(data_dir, "thumb", "references.json").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            refs[row["seg_id"]] = row["refs"]
    rows = [json.loads(line) for line in _file(data_dir, "thumb", "THumB-1.0.jsonl").read_text().splitlines()
            if line.strip()]
    return Benchmark("thumb", [r["hyp"] for r in rows], [refs[r["seg_id"]] for r in rows], [r["image"] for r in rows],
                     [float(r["human_score"]) for r in rows], statistic="pearson",
                     protocol="5 systems x 500 COCO images, 4 references, THumB total score")


BENCHMARKS: Dict[str, Callable[[Path], Benchmark]] = {
    "flickr8k_expert": flickr8k_expert, "flickr8k_cf": flickr8k_cf, "composite": composite, "thumb": thumb,
}


def default_data_dir() -> Optional[Path]:
    env = os.environ.get("CAPEVAL_BENCHMARK_DIR")
    return Path(env) if env else None


def load(name: str, data_dir: Optional[os.PathLike] = None) -> Benchmark:
    """A benchmark from its local raw release (``data_dir`` → $CAPEVAL_BENCHMARK_DIR)."""
    if name not in BENCHMARKS:
        raise InputError(f"unknown benchmark {name!r}; available here: {sorted(BENCHMARKS)}")
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    if data_dir is None:
        raise InputError(f"no data directory for {name!r}: pass data_dir / --data-dir or set $CAPEVAL_BENCHMARK_DIR")
    return BENCHMARKS[name](data_dir)
