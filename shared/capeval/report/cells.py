"""The table every format prints (Markdown, LaTeX, HTML): column titles, the printed scale, each cell's value and
CI as text, its significance mark against the baseline, the best value per metric, and the footer's facts.

Nothing here computes a statistic: values, CIs, comparisons and coverage come from the report document.
Scale: the COCO caption metrics and the CLIP-S / PAC-S / Polos families are printed ×100 with one decimal, as
captioning papers print them; any other key is printed as computed with four decimals. The table's header says
which columns are ×100. Marks: ``†`` significantly better than the baseline, ``‡`` significantly worse (the
comparison's corrected decision, ``significant``; its direction from ``delta`` = system_b − system_a and the metric's
``higher_is_better``). A metric scored with tiny random test weights (:func:`tiny_weight_keys`) carries
:data:`TINY_MARK` in its column title and in every cell, bold "best" included, and the table opens with a warning
naming those metrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from capeval.core.errors import InputError

TITLES = {"bleu_1": "BLEU-1", "bleu_2": "BLEU-2", "bleu_3": "BLEU-3", "bleu_4": "BLEU-4", "meteor": "METEOR",
          "rouge_l": "ROUGE-L", "cider": "CIDEr", "spice": "SPICE", "clip_s": "CLIP-S", "refclip_s": "RefCLIP-S",
          "pac_s": "PAC-S", "refpac_s": "RefPAC-S", "polos": "Polos"}
PERCENT_KEYS = frozenset(TITLES)
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
    scale_note: str                    # which columns are ×100
    legend: str                        # what CI, marks and bold mean
    footer: List[str]                  # coverage, resamples, seed, tests, correction
    tiny: List[str]                    # the keys scored with tiny random test weights
    warning: str                       # what the table says first about them ("" when none)


def title(key: str) -> str:
    return TITLES.get(key, key)


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


def tiny_warning(keys: Sequence[str]) -> str:
    """The warning naming the metrics of ``keys`` scored with tiny random test weights ("" when none)."""
    if not keys:
        return ""
    names = ", ".join(title(k) for k in keys)
    return (f"WARNING: {names} {'was' if len(keys) == 1 else 'were'} scored with TINY RANDOM TEST WEIGHTS: "
            f"{'its' if len(keys) == 1 else 'their'} values, marked {TINY_MARK}, mean nothing.")


def column_title(key: str, tiny: Sequence[str]) -> str:
    """A column's title, with :data:`TINY_MARK` for a metric scored with tiny random test weights."""
    return f"{title(key)} {TINY_MARK}" if key in tiny else title(key)


def scale(key: str) -> float:
    return 100.0 if key in PERCENT_KEYS else 1.0


def format_score(key: str, value) -> str:
    """A score as the table prints it (×100 with one decimal for the paper metrics, else four decimals)."""
    if value is None or not math.isfinite(value):
        return MISSING
    return f"{value * scale(key):.1f}" if key in PERCENT_KEYS else f"{value:.4f}"


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
    return bool(report.get("metrics", {}).get(key, {}).get("higher_is_better", True))


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
    shown_ci = (format_score(key, ci[0]), format_score(key, ci[1])) if ci and finite(*ci) else None
    marked = mark(report, system, baseline, key) if finite(score.get("value")) else ""
    return Cell(format_score(key, score.get("value")), shown_ci, marked, system in best, tiny)


def scale_note(keys: Sequence[str]) -> str:
    scaled = [title(k) for k in keys if k in PERCENT_KEYS]
    plain = [title(k) for k in keys if k not in PERCENT_KEYS]
    parts = []
    if scaled:
        parts.append(("All scores" if not plain else ", ".join(scaled)) + " ×100")
    if plain:
        parts.append(("all scores" if not scaled else ", ".join(plain)) + " as computed")
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
    return [coverage, f"{resamples} resamples over {units}, seed {seed}", f"tests: {tests}{_test_design(significance)}",
            f"correction: {correction}" + ("" if family is None else f" over {family}")
            + ("" if alpha is None else f", alpha {alpha:g}") + _floor(significance, alpha)]


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
    return Table(systems, keys, [column_title(k, tiny) for k in keys], cells, baseline, scale_note(keys),
                 legend(report, baseline), footer(report), tiny, tiny_warning(tiny))
