"""The table every format prints (Markdown, LaTeX, HTML): column titles, the printed scale, each cell's value and
CI as text, its significance mark against the baseline, the best value per metric, and the footer's facts.

Nothing here computes a statistic: values, CIs, comparisons and coverage come from the report document, and so
does each key's ``title`` and ``scale`` (its ``metrics[key]`` entry, which the suite copies from the key's scorer:
:mod:`capeval.core.keys`). Scale: a key with a scale other than 1 (the COCO caption metrics and the CLIP-S / PAC-S /
Polos families: ×100, as captioning papers print them) is printed scaled with one decimal; any other key as
computed with four decimals. The table's header says which columns are scaled. Marks: ``†`` significantly
better than the baseline, ``‡`` significantly worse (the comparison's corrected decision, ``significant``; its
direction from ``delta`` = system_b − system_a and the metric's ``higher_is_better``, also read from
``metrics[key]``). A metric scored with tiny random test weights (:func:`tiny_weight_keys`) carries
:data:`TINY_MARK` in its column title and in every cell, bold "best" included, and the table opens with a warning
naming those metrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from capeval.core.errors import InputError

BETTER, WORSE = "†", "‡"
MISSING = "n/a"
TINY_MARK = "(tiny)"
TINY_HASHCODE = "TINY-RANDOM-WEIGHTS"  # what capeval.core.provenance.hashcode appends for test weights


@dataclass(frozen=True)
class Cell:
    value: str                        # "81.2" (scaled), or MISSING
    ci: Optional[Tuple[str, str]]     # ("79.9", "82.5"), None when the document has no finite CI
    mark: str                         # "", BETTER or WORSE
    best: bool                        # the best value of its metric (ties: every one of them)
    tiny: bool = False                # scored with tiny random test weights: the value means nothing


@dataclass(frozen=True)
class Table:
    systems: List[str]
    keys: List[str]
    titles: List[str]                  # TINY_MARK after the title of a tiny-weights metric
    cells: Dict[str, Dict[str, Cell]]  # system -> key -> cell
    baseline: Optional[str]
    scale_note: str                    # which columns are scaled (×100)
    legend: str                        # what CI, marks and bold mean
    footer: List[str]                  # coverage, resamples, seed, tests, correction
    tiny: List[str]                    # the keys scored with tiny random test weights
    warning: str                       # what the table says first about them ("" when none)


def metric_entry(report: Mapping, key: str) -> Mapping:
    """The document's ``metrics[key]`` (an InputError names what it lacks)."""
    return field(field(report, "metrics", ""), key, "metrics.")


def title(report: Mapping, key: str) -> str:
    """``key``'s title, as the document's ``metrics[key]`` gives it."""
    text = field(metric_entry(report, key), "title", f"metrics[{key!r}].")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"report: metrics[{key!r}].title must be a non-empty string, not {text!r}")
    return text


def tiny_weight_keys(report: Mapping) -> List[str]:
    """The document's ``keys`` whose metric ran with tiny random test weights: its provenance says
    ``tiny_random_weights`` (a weight of it, or a replayed judge cache written with one) or its hashcode ends
    in ``TINY-RANDOM-WEIGHTS``."""
    metrics = report.get("metrics") or {}
    tiny = []
    for key in report.get("keys", []):
        metric = metrics.get(key) or {}
        provenance = metric.get("provenance") or {}
        if provenance.get("tiny_random_weights") or str(metric.get("hashcode", "")).endswith(TINY_HASHCODE):
            tiny.append(key)
    return tiny


def tiny_warning(report: Mapping, keys: Sequence[str]) -> str:
    """The warning naming the metrics of ``keys`` scored with tiny random test weights ("" when none)."""
    if not keys:
        return ""
    names = ", ".join(title(report, k) for k in keys)
    return (f"WARNING: {names} {'was' if len(keys) == 1 else 'were'} scored with TINY RANDOM TEST WEIGHTS: "
            f"{'its' if len(keys) == 1 else 'their'} values, marked {TINY_MARK}, mean nothing.")


def column_title(report: Mapping, key: str, tiny: Sequence[str]) -> str:
    """A column's title, with :data:`TINY_MARK` for a metric scored with tiny random test weights."""
    return f"{title(report, key)} {TINY_MARK}" if key in tiny else title(report, key)


def scale(report: Mapping, key: str) -> float:
    """The factor ``key`` is printed with, as the document's ``metrics[key]`` gives it (1: as computed)."""
    factor = field(metric_entry(report, key), "scale", f"metrics[{key!r}].")
    if not finite(factor) or isinstance(factor, bool) or factor <= 0:
        raise InputError(f"report: metrics[{key!r}].scale must be a finite positive number, not {factor!r}")
    return float(factor)


def digits(report: Mapping, key: str) -> int:
    """Decimals printed: one for a scaled key (×100: papers' percentages), four for a key printed as computed."""
    return 4 if scale(report, key) == 1 else 1


def format_score(report: Mapping, key: str, value) -> str:
    """A score as the table prints it (scaled with one decimal, or as computed with four decimals)."""
    if value is None or not math.isfinite(value):
        return MISSING
    return f"{value * scale(report, key):.{digits(report, key)}f}"


def field(mapping: Mapping, name: str, where: str):
    """``mapping[name]``, or an InputError naming the missing field of the report document."""
    if not isinstance(mapping, Mapping) or name not in mapping:
        raise InputError(f"report: {where}{name!r} is missing")
    return mapping[name]


def resolve_baseline(report: Mapping, baseline: Optional[str]) -> Optional[str]:
    baseline = report.get("baseline") if baseline is None else baseline
    systems = list(field(report, "systems", ""))
    if baseline is not None and baseline not in systems:
        raise InputError(f"baseline: {baseline!r} is not one of the systems {systems}")
    return baseline


def higher_is_better(report: Mapping, key: str) -> bool:
    """Whether a higher ``key`` is better, as the document's ``metrics[key]`` says."""
    better = field(metric_entry(report, key), "higher_is_better", f"metrics[{key!r}].")
    if not isinstance(better, bool):
        raise InputError(f"report: metrics[{key!r}].higher_is_better must be true or false, not {better!r}")
    return better


def comparison(report: Mapping, system: str, other: str, key: str) -> Optional[Tuple[Mapping, float]]:
    """The document's comparison of ``system`` and ``other`` on ``key`` (either may be ``system_a``), with the
    sign that turns its ``delta`` (value(system_b) − value(system_a), as :func:`compare_systems` gives it) into
    value(system) − value(other); None when the document has none."""
    for row in report.get("comparisons", []):
        if row.get("metric") != key:
            continue
        pair = (row.get("system_a"), row.get("system_b"))
        if pair in ((system, other), (other, system)):
            return row, (1.0 if pair[1] == system else -1.0)
    return None


def mark(report: Mapping, system: str, baseline: Optional[str], key: str) -> str:
    if baseline is None or system == baseline:
        return ""
    found = comparison(report, system, baseline, key)
    if found is None or not field(found[0], "significant", "comparisons[]."):
        return ""
    delta = found[1] * field(found[0], "delta", "comparisons[].")
    if delta == 0:
        return ""
    return BETTER if (delta > 0) == higher_is_better(report, key) else WORSE


def finite(*values) -> bool:
    """Every value a finite number (None, NaN and inf are not)."""
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def score_entry(report: Mapping, system: str, key: str) -> Mapping:
    """``{"value", "ci"}`` of ``system`` on ``key`` (an InputError names what the document lacks)."""
    scores = field(report["systems"][system], "scores", f"systems[{system!r}].")
    return field(scores, key, f"systems[{system!r}].scores.")


def _best_systems(report: Mapping, systems: Sequence[str], key: str) -> set:
    values = {s: score_entry(report, s, key).get("value") for s in systems}
    defined = {s: v for s, v in values.items() if finite(v)}
    if not defined:
        return set()
    best = (max if higher_is_better(report, key) else min)(defined.values())
    return {s for s, v in defined.items() if v == best}


def _cell(report: Mapping, system: str, key: str, baseline: Optional[str], best: set, tiny: bool) -> Cell:
    score = score_entry(report, system, key)
    ci = score.get("ci")
    shown_ci = (format_score(report, key, ci[0]), format_score(report, key, ci[1])) if ci and finite(*ci) else None
    marked = mark(report, system, baseline, key) if finite(score.get("value")) else ""
    return Cell(format_score(report, key, score.get("value")), shown_ci, marked, system in best, tiny)


def scale_note(report: Mapping, keys: Sequence[str]) -> str:
    """Which columns are printed scaled (per factor, e.g. "CIDEr, SPICE ×100") and which as computed."""
    by_scale: Dict[float, List[str]] = {}
    for key in keys:
        by_scale.setdefault(scale(report, key), []).append(title(report, key))
    plain = by_scale.pop(1.0, [])
    only = len(by_scale) == 1 and not plain
    parts = [("All scores" if only else ", ".join(titles)) + f" ×{factor:g}" for factor, titles in by_scale.items()]
    if plain:
        parts.append(("all scores" if not by_scale else ", ".join(plain)) + " as computed")
    return "; ".join(parts) + "."


def legend(report: Mapping, baseline: Optional[str]) -> str:
    confidence = report.get("significance", {}).get("confidence", 0.95)
    text = f"{confidence * 100:g} % CI in brackets; bold: best per metric"
    if baseline is not None:
        rule = report.get("significance", {}).get("significant", "adjusted p ≤ alpha")
        text += f"; {BETTER} / {WORSE}: significantly better / worse than the baseline ({rule})"
    return text + "."


def footer(report: Mapping) -> List[str]:
    coverage = field(field(report, "coverage", ""), "text", "coverage.")
    significance = field(report, "significance", "")
    resamples = field(significance, "resamples", "significance.")
    seed = field(significance, "seed", "significance.")
    tests = ", ".join(field(significance, "tests", "significance."))
    correction = field(significance, "correction", "significance.")
    units = significance.get("units", "images")
    alpha = significance.get("alpha")
    family = significance.get("family")
    if significance.get("family_size") == 0:  # no p-value to speak of
        return [coverage, f"{resamples} resamples over {units}, seed {seed}",
                f"no significance test ran ({_no_test_cause(report, significance)})"] + _empty_texts(report)
    return [coverage, f"{resamples} resamples over {units}, seed {seed}", f"tests: {tests}{_test_design(significance)}",
            f"correction: {correction}" + ("" if family is None else f" over {family}")
            + ("" if alpha is None else f", alpha {alpha:g}") + _floor(significance, alpha)] + _empty_texts(report)


def _empty_texts(report: Mapping) -> List[str]:
    """The empty captions of each system and the empty references, where there are any (report.json's
    ``systems[name].empty_captions`` and ``coverage.empty_references``)."""
    counts = {name: system.get("empty_captions", {}).get("count", 0)
              for name, system in report.get("systems", {}).items()}
    references = report.get("coverage", {}).get("empty_references", 0)
    if not any(counts.values()) and not references:
        return []
    parts = [f"{name} {count}" for name, count in counts.items() if count]
    text = f"empty captions: {', '.join(parts)}" if parts else ""
    if references:
        text += f"{'; ' if text else ''}empty references: {references}"
    return [f"{text} (scored as pycocoevalcap scores them)"]


def _no_test_cause(report: Mapping, significance: Mapping) -> str:
    """Why a document with a family of 0 tests has none."""
    n, units = significance.get("n_units"), significance.get("units", "images")
    if len(report.get("systems", {})) < 2:
        return "one system: nothing to compare"
    if n is not None and n < 2:
        return f"{n} {units[:-1] if n == 1 and units.endswith('s') else units}: a test needs at least 2"
    return "every difference is undefined"


def _test_design(significance: Mapping) -> str:
    """How the randomization test ran and counted, and the smallest p-value each test can give."""
    n, smallest = significance.get("n_units"), significance.get("smallest_p")
    if n is None or not smallest:
        return ""
    how = (f"randomization exact over all 2^{n} swap patterns" if significance.get("randomization") == "exact"
           else "randomization over drawn swaps")
    counting = {"noreen": "ties counted", "sacrebleu": "sacrebleu's strict count"}.get(significance.get("p_values"))
    floors = ", ".join(f"{test} {p:.2g}" for test, p in smallest.items())
    return f" ({how}{'; ' + counting if counting else ''}; smallest p on {n} {significance.get('units', 'images')}: " \
           f"{floors})"


def _floor(significance: Mapping, alpha: Optional[float]) -> str:
    """The family size and, when it exceeds alpha, the smallest adjusted p-value a mark needs."""
    size, floor = significance.get("family_size"), significance.get("smallest_adjusted_p")
    if size is None or floor is None:
        return ""
    text = f"; {size} tests, smallest adjusted p {floor:.2g}"
    if alpha is not None and floor > alpha:
        text += ": no difference can be marked significant"
    return text


def build_table(report: Mapping, baseline: Optional[str] = None) -> Table:
    """The table of ``report`` (systems × the document's ``keys``) with marks against ``baseline`` (default: the
    document's own ``baseline``)."""
    baseline = resolve_baseline(report, baseline)
    systems = list(report["systems"])
    keys = list(field(report, "keys", ""))
    best = {key: _best_systems(report, systems, key) for key in keys}
    tiny = tiny_weight_keys(report)
    cells = {s: {k: _cell(report, s, k, baseline, best[k], k in tiny) for k in keys} for s in systems}
    return Table(systems, keys, [column_title(report, k, tiny) for k in keys], cells, baseline,
                 scale_note(report, keys), legend(report, baseline), footer(report), tiny, tiny_warning(report, tiny))
