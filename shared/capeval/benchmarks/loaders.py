"""Loaders for the raw releases of the correlation benchmarks (``<data_dir>/<benchmark>/...``), one row per judgment."""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

from capeval.core.errors import InputError


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
    corpus_per_category: bool = False  # corpus-level metrics (CIDEr's IDF) are computed within each category


def rating(value, file: str, record, field: str) -> float:
    """A human score from a release: a number, or NaN where the release has none (null: a missing judgment, which
    the runner and the leaderboard refuse or drop by their ``nan_policy``); anything else is an ``InputError``
    naming the file, the record and the field."""
    if value is None:
        return math.nan
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.inf
    if isinstance(value, bool) or math.isinf(number):
        raise InputError(f"{file}: record {record}: field {field!r}: {value!r} is not a finite number")
    return number


def raw_file(data_dir: Path, *parts: str) -> Path:
    path = data_dir.joinpath(*parts)
    if not path.exists():
        raise InputError(f"benchmark file not found: {path} (pass --data-dir, the folder holding the raw releases)")
    return path


def flickr8k_expert(data_dir: Path) -> Benchmark:
    file = "flickr8k_expert_clipscore_format.json"
    data = json.loads(raw_file(data_dir, "flickr8k", file).read_text())
    rows, raters = [], []
    for key, entry in data.items():
        seen: Dict[str, int] = defaultdict(int)  # the experts' ratings of one caption follow each other
        for k, j in enumerate(entry["human_judgement"]):
            rows.append((j["caption"], entry["ground_truth"], entry["image_path"],
                         rating(j["rating"], file, f"{key!r} human_judgement[{k}]", "rating")))
            raters.append(seen[j["caption"]])
            seen[j["caption"]] += 1
    return Benchmark("flickr8k_expert", *map(list, zip(*rows)), statistic="kendall_tau_c",
                     protocol="each of the 3 expert ratings is its own row; candidates that are also references "
                              "dropped (CLIPScore-format file: 5,664 candidates, 16,992 ratings); 5 references",
                     raters=raters)


REFERENCE_SETS = ("per_image", "per_row")


def _check_reference_set(reference_set: str) -> None:
    if reference_set not in REFERENCE_SETS:
        raise InputError(f"unknown reference_set {reference_set!r}; use one of {REFERENCE_SETS}")


def flickr8k_cf(data_dir: Path, reference_set: str = "per_image") -> Benchmark:
    """Flickr8k-CF: one row per (image, caption) pair, human score = share of "yes" votes, Kendall τ-b.

    ``reference_set="per_image"`` (the published protocol: CLIPScore's ``flickr8k_example/download.py``, whose
    ``crowdflower_flickr8k.json`` PAC-S and Polos evaluate, and EnsembEval's ``Flickr8kDataset``): every judged
    caption of an image that is one of the image's 5 captions (same text) is removed from the image's reference
    set, once per judgment, and all of that image's rows share what is left (mostly 4 references, 5 for images
    without a judged own caption). ``"per_row"``: only the row's own candidate is removed from its references;
    the image's other rows keep all 5 (capeval's earlier default; τ-b 0.4-0.9 higher for the n-gram metrics).
    """
    _check_reference_set(reference_set)
    captions: Dict[str, str] = {}
    by_image: Dict[str, List[str]] = defaultdict(list)
    for line in raw_file(data_dir, "flickr8k", "Flickr8k.token.txt").read_text().splitlines():
        if "\t" in line:
            caption_id, text = line.split("\t", 1)
            captions[caption_id] = text.strip()
            by_image[caption_id.split("#")[0]].append(caption_id)
    judgments = [line.split("\t") for line in
                 raw_file(data_dir, "flickr8k", "CrowdFlowerAnnotations.txt").read_text().splitlines() if line.strip()]
    image_refs: Dict[str, List[str]] = {}
    if reference_set == "per_image":
        for image, caption_id, *_ in judgments:
            refs = image_refs.setdefault(image, [captions[c] for c in by_image[image]])
            if captions[caption_id] in refs:
                refs.remove(captions[caption_id])  # one occurrence, as list.remove in the published script
    rows = []
    for line, (image, caption_id, percent_yes, *_) in enumerate(judgments, 1):
        refs = image_refs[image] if reference_set == "per_image" else \
            [captions[c] for c in by_image[image] if c != caption_id]
        rows.append((captions[caption_id], list(refs), image,
                     rating(percent_yes, "CrowdFlowerAnnotations.txt", f"line {line}", "percent_yes")))
    protocol = ("share of 'yes' votes per (image, caption) pair; " +
                ("every judged caption of the image removed from its 5 reference captions, the same references on "
                 "all of the image's rows (published protocol)" if reference_set == "per_image" else
                 "only the row's candidate removed from the image's 5 reference captions"))
    return Benchmark("flickr8k_cf", *map(list, zip(*rows)), statistic="kendall_tau_b", protocol=protocol)


def _words(text: str) -> List[str]:
    return re.sub(r"[^a-z0-9 ]", " ", text.lower()).split()


def levenshtein(a: str, b: str) -> int:
    """Character edit distance (unit costs), bit-parallel over ``a`` (Myers 1999, Hyyrö 2003)."""
    if not a or not b:
        return len(a) + len(b)
    full, last = (1 << len(a)) - 1, 1 << (len(a) - 1)
    masks: Dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    plus, minus, distance = full, 0, len(a)
    for ch in b:
        eq = masks.get(ch, 0)
        xv = eq | minus
        xh = (((eq & plus) + plus) ^ plus) | eq
        h_plus = minus | (~(xh | plus) & full)
        h_minus = plus & xh
        if h_plus & last:
            distance += 1
        elif h_minus & last:
            distance -= 1
        h_plus = ((h_plus << 1) | 1) & full
        h_minus = (h_minus << 1) & full
        plus = h_minus | (~(xv | h_plus) & full)
        minus = h_plus & xv
    return distance


COMPOSITE_SOURCES = {"flickr8k": "flickr8k", "flickr30k": "flickr30k", "MSCOCO_2014": "coco"}


def composite(data_dir: Path, reference_set: str = "per_image") -> Benchmark:
    """Composite: the first 3 candidates per image, correctness rating (1-5), Kendall τ-c.

    The first candidate of every image is its human caption, which the release also lists (re-cased) among the
    references. ``reference_set="per_image"`` (the published protocol, EnsembEval's ``CompositeDataset``,
    ``remove_gt_candidates_from_ref_set=True``): the reference nearest to the image's first candidate
    (character edit distance, first on ties) is removed from the references of all 3 of the image's rows (4
    references each). ``"per_row"``: a row's references lose only captions with the candidate's words (ignoring
    case and punctuation); the image's other rows keep all of them. ``categories`` = source dataset (flickr8k,
    flickr30k, coco): the published CIDEr computes its IDF within each of them.
    """
    import pandas as pd

    _check_reference_set(reference_set)
    table = pd.read_parquet(raw_file(data_dir, "composite", "composite_candidates_refs_ratings.parquet"))
    table = table[table.groupby("image_path", sort=False).cumcount() < 3]  # the first 3 candidates per image
    candidates = table["candidate"].tolist()
    images = table["image_path"].tolist()
    if reference_set == "per_image":
        dropped: Dict[str, int] = {}
        for image, candidate, refs in zip(images, candidates, table["references"]):
            if image not in dropped:  # the image's first row holds its human caption
                distances = [levenshtein(candidate, r) for r in refs]
                dropped[image] = distances.index(min(distances))
        references = [[r for j, r in enumerate(refs) if j != dropped[image]]
                      for image, refs in zip(images, table["references"])]
        protocol = ("first 3 candidates per image, correctness rating; the reference nearest to the image's first "
                    "(human) candidate removed from the references of all its rows (published protocol)")
    else:
        references = [[r for r in refs if _words(r) != _words(c)] for c, refs in zip(candidates, table["references"])]
        protocol = ("first 3 candidates per image, correctness rating; a candidate that is one of the references "
                    "(same words, ignoring case and punctuation) is removed from that row's references")
    categories = [COMPOSITE_SOURCES.get(image.split("/")[0], image.split("/")[0]) for image in images]
    return Benchmark("composite", candidates, references, images,
                     [rating(s["human_correctness"], "composite_candidates_refs_ratings.parquet", k,
                             "scores.human_correctness") for k, s in zip(table.index, table["scores"])],
                     statistic="kendall_tau_c",
                     protocol=protocol + "; corpus-level metrics (CIDEr's IDF) computed within each source dataset",
                     categories=categories, corpus_per_category=True)


def thumb(data_dir: Path) -> Benchmark:
    refs = {}
    for line in raw_file(data_dir, "thumb", "references.json").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            refs[row["seg_id"]] = row["refs"]
    lines = raw_file(data_dir, "thumb", "THumB-1.0.jsonl").read_text().splitlines()
    numbered = [(k, json.loads(line)) for k, line in enumerate(lines, 1) if line.strip()]
    rows = [r for _, r in numbered]
    return Benchmark("thumb", [r["hyp"] for r in rows], [refs[r["seg_id"]] for r in rows], [r["image"] for r in rows],
                     [rating(r["human_score"], "THumB-1.0.jsonl", f"line {k}", "human_score") for k, r in numbered],
                     statistic="pearson",
                     protocol="5 systems x 500 COCO images, 4 references, THumB total score")


def polaris(data_dir: Path) -> Benchmark:
    rows = json.loads(raw_file(data_dir, "polaris_val", "polaris_val_subset.json").read_text())
    return Benchmark("polaris", [r["mt"] for r in rows], [[] for _ in rows], [r["imgid"] for r in rows],
                     [rating(r["score"], "polaris_val_subset.json", k, "score") for k, r in enumerate(rows)],
                     statistic="kendall_tau_c",
                     protocol="Polaris validation subset: one row per candidate, score = mean of its raters' "
                              "normalised ratings; this release holds no references (reference-free metrics only)")


CORRELATION_LOADERS: Dict[str, Callable[[Path], Benchmark]] = {
    "flickr8k_expert": flickr8k_expert, "flickr8k_cf": flickr8k_cf, "composite": composite, "thumb": thumb,
    "polaris": polaris,
}
