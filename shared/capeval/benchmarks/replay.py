"""Replay a judge cache on a benchmark (``capeval benchmark fleur flickr8k_expert --replay CACHE``): the judge's
recorded outputs stand in for its scorer in the benchmark runner, with no model and no images.

Each benchmark row is joined to the cache records of the judge by :data:`JOIN_RULE`. Rows with no record are
reported (how many, the first few) and refused, unless ``unmatched="omit"`` computes the statistic on the matched
rows (pairs whose two captions matched) only; cache records no row used are reported too. Pairwise benchmarks can
take the human labels recorded with published outputs (``labels="published"``: FLEUR's Pascal-50S files carry the
label each pair was counted with); where those differ from the benchmark's own labels, the pairs are counted.

Every record of the cache is checked as it is read (:func:`capeval.judges.cache.entry_problem`: its key is that of
its inputs, its score a finite number in [0, 1]); the judge's records must come from one judge configuration (model,
prompt, generation settings), which the provenance names (``model``; ``tiny_random_weights`` when the model id is
capeval's tiny random test weights', marked in the hashcode as a live run's): a cache mixing two is refused.
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from capeval.benchmarks.catalog import load
from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.pairwise import PREFERS_A, PREFERS_B, PairwiseBenchmark
from capeval.benchmarks.runner import run_correlation, run_pairwise, scorer_and_key
from capeval.core.errors import InputError
from capeval.core.provenance import TinyWeightsWarning

UNMATCHED = ("raise", "omit")
LABELS = ("benchmark", "published")
OUTPUTS = ("score", "raw_score")
SHOWN = 5  # unmatched rows and unused records shown by name
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([.,!?;:])")
JOIN_RULE = ("judge + image file basename + caption, exact; a row whose caption is not among its image's cached "
             "captions takes the one cached caption of that image equal to it once whitespace before . , ! ? ; : "
             "is removed (FLEUR's Composite file writes 'umbrella .' where the release has 'umbrella.'); a record "
             "with references matches only a row with the same references")


def _despaced(caption: str) -> str:
    return _SPACE_BEFORE_PUNCTUATION.sub(r"\1", caption)


class NoRowInCache(InputError):
    """The judge cache holds no row of the benchmark at all (a leaderboard lists the metric as skipped there)."""


@dataclass
class Match:
    records: List[Dict]
    rule: str  # "exact" or "punctuation_spacing"


class ReplayedJudge:
    """A judge's cached outputs in the runner's place of a scorer (``loaded[<metric>]``): ``rows(benchmark)``
    gives each row's recorded ``output`` (``score``: the judge's score; ``raw_score``: the generated number).
    ``unmatched="raise"`` refuses rows not in the cache, ``"nan"`` leaves them NaN (the caller's
    ``nan_policy`` decides)."""

    replayed = True

    def __init__(self, judge: str, cache, *, output: str = "score", unmatched: str = "raise"):
        from capeval.core.hashing import file_sha256
        from capeval.judges.cache import JudgeCache
        from capeval.judges.identity import is_tiny_model_id

        if output not in OUTPUTS:
            raise InputError(f"replay output: {output!r} is not one of {OUTPUTS}")
        path = Path(cache)
        if not path.is_file():
            raise InputError(f"--replay: judge cache not found: {path}")
        judges, configurations = set(), {}
        self.records = []  # only what the join and its report use, one small dict per record of the judge
        for line, record in JudgeCache(path).entries():
            judges.add(record["inputs"]["judge"])
            if record["inputs"]["judge"] == judge:
                configurations.setdefault(_configuration(record["inputs"]), line)
                self.records.append(_entry(record, output))
        if not self.records:
            raise InputError(f"--replay {path}: no records of the judge {judge!r} "
                             f"(it holds {sorted(judges) or 'none'})")
        if len(configurations) > 1:
            raise InputError(f"--replay {path}: the records of {judge} come from more than one judge: "
                             f"{_differing(list(configurations.items())[:2])}; replay one judge's records")
        self.name, self.output, self.unmatched, self.path = judge, output, unmatched, path
        self.exact: Dict[Tuple[str, str], List[Dict]] = defaultdict(list)
        self.despaced: Dict[Tuple[str, str], set] = defaultdict(set)
        for record in self.records:
            image = Path(record["image"] or "").name
            self.exact[image, record["caption"]].append(record)
            self.despaced[image, _despaced(record["caption"])].add(record["caption"])
        digest = file_sha256(path)
        (model, backend, prompt, generation), = configurations
        tiny = is_tiny_model_id(model)
        self.hashcode = f"replay-{judge}-{output}-{digest[:16]}" + ("|TINY-RANDOM-WEIGHTS" if tiny else "")
        self.provenance = {"replayed": True, "cache": str(path), "cache_sha256": digest, "judge": judge,
                           "model": model, "backend": json.loads(backend), "prompt_sha256": prompt,
                           "generation": json.loads(generation),
                           "tiny_random_weights": tiny, "output": output,
                           "origins": sorted({r["origin"] for r in self.records}), "join": JOIN_RULE}
        if tiny:
            warnings.warn(f"{judge}: replayed records of TINY RANDOM TEST WEIGHTS ({model}): their scores mean "
                          f"nothing", TinyWeightsWarning, stacklevel=2)

    def match(self, image: str, caption: str, references: Optional[Sequence[str]] = None) -> Optional[Match]:
        image = Path(image).name
        records, rule = self.exact.get((image, caption)), "exact"
        if not records:
            spaced = self.despaced.get((image, _despaced(caption)), set())
            records, rule = (self.exact[image, next(iter(spaced))], "punctuation_spacing") if len(spaced) == 1 \
                else ([], "")
        records = [r for r in records if r["references"] is None or r["references"] == list(references or [])]
        return Match(records, rule) if records else None

    def value(self, match: Match, row: str) -> float:
        values = {r["value"] for r in match.records}
        if len(values) != 1 or None in values:
            raise InputError(f"--replay {self.path}: {row}: the cache holds {sorted(values, key=str)} as "
                             f"{self.output}; expected one number")
        return float(values.pop())

    def join(self, images: Sequence[str], captions: Sequence[str],
             references: Optional[Sequence[Sequence[str]]] = None) -> Tuple[np.ndarray, List[Optional[Match]]]:
        """Each row's recorded value (NaN where no record matched) and its match."""
        references = references if references is not None else [None] * len(captions)
        matches = [self.match(i, c, r) for i, c, r in zip(images, captions, references)]
        values = np.array([np.nan if m is None else self.value(m, describe_row(k, images[k], captions[k]))
                           for k, m in enumerate(matches)])
        return values, matches

    def rows(self, benchmark: Benchmark) -> List[float]:
        values, matches = self.join(benchmark.images, benchmark.candidates, benchmark.references)
        missing = [k for k, m in enumerate(matches) if m is None]
        if len(missing) == len(matches):
            raise NoRowInCache(f"the judge cache {self.path} holds no row of {benchmark.name}")
        if missing and self.unmatched == "raise":
            raise InputError(f"{benchmark.name}: {unmatched_message(missing, benchmark.images, benchmark.candidates)}"
                             f" are not in the judge cache {self.path}")
        return values.tolist()

    def report(self, matches: Sequence[Optional[Match]], images: Sequence[str], captions: Sequence[str],
               pairs: Optional[int] = None) -> Dict:
        """Counts of the join: rows matched by each rule, rows unmatched, and the records of the cache's sources
        (``origin``: e.g. the published file) that rows matched that no row used (the first few of each by name).
        ``pairs``: the rows are the A captions of that many pairs, then their B captions."""
        missing = [k for k, m in enumerate(matches) if m is None]
        used = {id(r) for m in matches if m is not None for r in m.records}
        origins = {r["origin"] for m in matches if m is not None for r in m.records}
        unused = [r for r in self.records if id(r) not in used and r["origin"] in origins]
        rules = Counter(m.rule for m in matches if m is not None)
        return {"cache": str(self.path), "join": JOIN_RULE, "rows": len(matches),
                "matched_exact": rules["exact"], "matched_punctuation_spacing": rules["punctuation_spacing"],
                "unmatched": len(missing),
                "unmatched_first": [describe_row(k, images[k], captions[k], pairs) for k in missing[:SHOWN]],
                "cache_records_unused": len(unused),
                "cache_records_unused_first": [_describe_record(r) for r in unused[:SHOWN]]}


def describe_row(k: int, image: str, caption: str, pairs: Optional[int] = None) -> str:
    if pairs:
        return f"pair {k % pairs} caption {'AB'[k // pairs]} (image {Path(image).name!r}, caption {caption!r})"
    return f"row {k} (image {Path(image).name!r}, caption {caption!r})"


def unmatched_message(missing: Sequence[int], images: Sequence[str], captions: Sequence[str]) -> str:
    shown = "; ".join(describe_row(k, images[k], captions[k]) for k in missing[:SHOWN])
    more = f"; and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    return f"{len(missing)} of {len(captions)} rows ({shown}{more})"


def _configuration(inputs: Dict) -> Tuple[str, str, Optional[str], str]:
    """What a judge's answers depend on besides the sample: its model, backend (null in published records), prompt
    and generation settings."""
    return (str(inputs.get("model")), json.dumps(inputs.get("backend"), sort_keys=True), inputs.get("prompt_sha256"),
            json.dumps(inputs.get("generation"), sort_keys=True))


def _differing(found: Sequence[Tuple[Tuple[str, str, Optional[str], str], int]]) -> str:
    """Two judge configurations in words: the first part they differ in, with the line of each."""
    (first, line_a), (second, line_b) = found
    part = next(i for i in range(4) if first[i] != second[i])
    name = ("model", "backend", "prompt sha256", "generation settings")[part]
    return f"{name} {first[part]} (line {line_a}) and {name} {second[part]} (line {line_b})"


def _entry(record: Dict, output: str) -> Dict:
    """What a replay keeps of a cache record: the join's keys, the replayed value and where the record came from."""
    inputs = record["inputs"]
    references = inputs.get("references")
    return {"image": (inputs.get("image") or {}).get("file"), "caption": inputs["caption"],
            "references": None if references is None else list(references),
            "value": record["outputs"].get(output), "origin": record.get("origin", "generated"),
            "published": record.get("published")}


def _describe_record(record: Dict) -> str:
    where = record["published"] or {}
    place = f"{where['file']}: line {where['line']}: " if where else ""
    return f"{place}image {record['image']!r}, caption {record['caption']!r}"


def _subset(benchmark, keep: np.ndarray, fields: Sequence[str]):
    """``benchmark`` with only the rows (pairs) ``keep`` in every per-row field."""
    return replace(benchmark, **{name: [v for v, k in zip(getattr(benchmark, name), keep) if k]
                                 for name in fields if getattr(benchmark, name) is not None})


def _published_label(match_a: Match, match_b: Match, category: Optional[str]) -> Optional[int]:
    """PREFERS_A/PREFERS_B as FLEUR labelled the published pair that holds caption A and caption B at its two
    positions (in the pair's category; A first where both are the same caption); None when no published pair, or
    published pairs with different labels, hold them."""
    def positions(match: Match) -> Dict[tuple, Dict[int, int]]:
        found: Dict[tuple, Dict[int, int]] = defaultdict(dict)
        for where in (r.get("published") or {} for r in match.records):
            if where.get("pair") is not None and category in (None, where["section"]):
                found[where["file"], where["pair"]][where["position"]] = where["label"]
        return found

    in_a, in_b = positions(match_a), positions(match_b)
    labels = set()
    for key in in_a.keys() & in_b.keys():
        position_a = min((p for p in in_a[key] if any(q != p for q in in_b[key])), default=None)
        if position_a is not None:  # the pair holds A and B at different positions
            labels.add(PREFERS_A if in_a[key][position_a] == position_a else PREFERS_B)
    return labels.pop() if len(labels) == 1 else None


def _with_published_labels(benchmark: PairwiseBenchmark, matches_a, matches_b, labels: str):
    """The benchmark (with the published labels when ``labels="published"``) and how many pairs' published labels
    differ from the benchmark's own (per category)."""
    published = [_published_label(a, b, c) for a, b, c in
                 zip(matches_a, matches_b, benchmark.categories or [None] * len(matches_a))]
    differing = Counter(c for p, own, c in zip(published, benchmark.preference,
                                                benchmark.categories or ["all"] * len(published))
                        if p is not None and p != own)
    if labels == "published":
        absent = [k for k, p in enumerate(published) if p is None]
        if absent:
            raise InputError(f"{benchmark.name}: --replay-labels published: {len(absent)} pairs have no published "
                             f"label in the cache (first: pair {absent[0]}, image {benchmark.images[absent[0]]!r})")
        benchmark = replace(benchmark, preference=published)
    return benchmark, {"published_labels_differing": sum(differing.values()), "per_category": dict(differing)}


def _check(unmatched: str, labels: str, benchmark) -> None:
    if unmatched not in UNMATCHED:
        raise InputError(f"replay_unmatched: {unmatched!r} is not one of {UNMATCHED}")
    if labels not in LABELS:
        raise InputError(f"replay_labels: {labels!r} is not one of {LABELS}")
    if labels == "published" and not isinstance(benchmark, PairwiseBenchmark):
        raise InputError(f"{benchmark.name} is not a pairwise benchmark: --replay-labels published applies to "
                         f"pairwise ones")


def run_replayed(metric: str, dataset: str, cache, *, unmatched: str = "raise", labels: str = "benchmark",
                 output: str = "score", data_dir=None, revision: Optional[str] = None,
                 statistic: Optional[str] = None, ties: str = "wrong", resamples: int = 1000, seed: int = 0,
                 plot: Optional[str] = None, nan_policy: str = "raise") -> Dict:
    """The benchmark statistic of ``metric``'s recorded outputs in the judge cache ``cache``, through the runner
    (:func:`capeval.benchmarks.runner.run_correlation` / ``run_pairwise``); ``replay``: the join's report."""
    benchmark = load(dataset, data_dir, revision=revision)
    _check(unmatched, labels, benchmark)
    name = scorer_and_key(metric)[0]
    judge = ReplayedJudge(name, cache, output=output)
    options = dict(resamples=resamples, seed=seed, plot=plot, nan_policy=nan_policy, loaded={name: judge})
    if isinstance(benchmark, PairwiseBenchmark):
        if statistic not in (None, benchmark.statistic):
            raise InputError(f"{dataset} is a pairwise benchmark: its statistic is {benchmark.statistic}")
        n = len(benchmark.candidates_a)
        images = benchmark.images * 2
        captions = benchmark.candidates_a + benchmark.candidates_b
        _, matches = judge.join(images, captions)
        report = judge.report(matches, images, captions, pairs=n)
        keep = np.array([a is not None and b is not None for a, b in zip(matches[:n], matches[n:])])
        fields = ("candidates_a", "candidates_b", "references", "images", "preference", "categories", "votes_a",
                  "votes_b")
        benchmark, report["labels"] = _with_published_labels(_subset(benchmark, keep, fields),
                                                             [m for m, k in zip(matches[:n], keep) if k],
                                                             [m for m, k in zip(matches[n:], keep) if k], labels)
        report["labels"]["used"] = labels
        report["pairs_omitted"] = int(n - keep.sum())
    else:
        _, matches = judge.join(benchmark.images, benchmark.candidates, benchmark.references)
        report = judge.report(matches, benchmark.images, benchmark.candidates)
        keep = np.array([m is not None for m in matches])
        benchmark = _subset(benchmark, keep, ("candidates", "references", "images", "human", "raters", "categories"))
    if report["unmatched"] and unmatched == "raise":
        raise InputError(f"{dataset}: {report['unmatched']} of {report['rows']} rows are not in the judge cache "
                         f"{cache} (first: {'; '.join(report['unmatched_first'])}); pass --replay-unmatched omit to "
                         f"compute on the matched rows only")
    if isinstance(benchmark, PairwiseBenchmark):
        out = run_pairwise(metric, benchmark, ties=ties, **options)
    else:
        out = run_correlation(metric, benchmark, statistic=statistic, **options)
    return {**out, "replay": report}
