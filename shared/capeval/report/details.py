"""The images' detail records (report.json's ``images[i]["details"][system][key]``: what a scorer reports for an
image beside its score) in the renderings: the counts ``scores.csv`` carries, and the part of a disagreement card
that shows what each caption matched, missed and invented.

A scene-graph record (CAPTURE's: objects, attributes and relations, each with its precision, recall, F1, matched
pairs, missed and invented elements) is counted per kind and status (``objects_missed``: how many) and shown as the
caption's and the references' scene graphs side by side (:func:`capeval.report.scene_graphs.scene_graphs_html`);
any other record (the FACTUAL SPICE's tuple counts, pycocoevalcap SPICE's categories) gives its top-level integers as
its counts and is shown as its JSON. Every text is HTML-escaped."""

from __future__ import annotations

import html
import json
import numbers
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from capeval.report.scene_graphs import KINDS, STATUSES, scene_graphs_html


def is_scene_graph(record) -> bool:
    """Whether ``record`` is a scene-graph record: each kind with numeric precision, recall and F1 and lists of
    matched pairs, missed and invented elements."""
    return isinstance(record, Mapping) and all(
        isinstance(record.get(kind), Mapping)
        and all(_is_number(record[kind].get(name)) for name in ("precision", "recall", "f1"))
        and all(isinstance(record[kind].get(status), list) for status in STATUSES) for kind in KINDS)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def record_counts(record) -> Dict[str, int]:
    """A record's counts, by name: per kind and status of a scene-graph record (``objects_matched``, ...), else its
    top-level integers (``matches``, ``candidate_tuples``, ...); nothing for no record."""
    if is_scene_graph(record):
        return {f"{kind}_{status}": len(record[kind][status]) for kind in KINDS for status in STATUSES}
    if not isinstance(record, Mapping):
        return {}
    return {name: value for name, value in record.items() if isinstance(value, numbers.Integral)
            and not isinstance(value, bool)}


def count_columns(report: Mapping) -> List[Tuple[str, str]]:
    """``(key, count)`` of every count the document's records hold, in the document's key order, then in order of
    first appearance: ``scores.csv``'s column ``f"{key}_{count}"``."""
    found: Dict[str, Dict[str, None]] = {}
    for image in report.get("images", []):
        for records in (image.get("details") or {}).values():
            for key, record in records.items():
                found.setdefault(key, {}).update(dict.fromkeys(record_counts(record)))
    return [(key, count) for key in report.get("keys", []) for count in found.get(key, {})]


def count_row(image: Mapping, system: str, columns: Sequence[Tuple[str, str]]) -> List[Optional[int]]:
    """One image's counts of ``system`` in the order of ``columns`` (None where it has no such record or count)."""
    records = (image.get("details") or {}).get(system, {})
    counts = {key: record_counts(record) for key, record in records.items()}
    return [counts.get(key, {}).get(count) for key, count in columns]


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _counts_cell(record: Mapping, kind: str) -> str:
    shown = " ".join(f'<span title="{_esc(meaning)}">{_esc(marker)}{len(record[kind][status])}</span>'
                     for status, (marker, meaning, *_) in STATUSES.items())
    return f"<td>{shown}</td>"


def _system_heading(system: str, colors: Mapping[str, str]) -> str:
    return f'<p class="meta" style="color:{colors[system]}">{_esc(system)}</p>'


def _scene_graph_details(title: str, records: Mapping[str, Optional[Mapping]], colors: Mapping[str, str]) -> str:
    head = "".join(f"<th>{_esc(kind)}</th>" for kind in KINDS)
    rows = "".join(f'<tr><th style="color:{colors[system]}">{_esc(system)}</th>'
                   + "".join(_counts_cell(record, kind) for kind in KINDS) + "</tr>"
                   for system, record in records.items() if record is not None)
    graphs = "".join(f'{_system_heading(system, colors)}<div class="scroll">{scene_graphs_html(record)}</div>'
                     for system, record in records.items() if record is not None)
    return (f'<p class="note">{_esc(title)}: what each caption matched (✓), missed (−: in the references, not the '
            f'caption) and invented (+: in the caption, not the references)</p><div class="scroll">'
            f'<table class="detail-counts"><thead><tr><th></th>{head}</tr></thead><tbody>{rows}</tbody></table>'
            f"</div><details><summary>{_esc(title)}: the scene graphs</summary>{graphs}</details>")


def _record_details(title: str, records: Mapping[str, Optional[Mapping]], colors: Mapping[str, str]) -> str:
    shown = "".join(_system_heading(system, colors)
                    + f"<pre>{_esc(json.dumps(record, indent=1, ensure_ascii=False, default=str))}</pre>"
                    for system, record in records.items() if record is not None)
    return f"<details><summary>{_esc(title)}: each caption's record</summary>{shown}</details>"


def image_details_html(image: Mapping, pair: Sequence[str], keys: Sequence[str], titles: Mapping[str, str],
                       colors: Mapping[str, str]) -> str:
    """The records of ``image`` for the systems of ``pair`` (document order of ``keys``; ``titles``: each key's
    column title): per key with a record, the scene graphs' counts and the graphs, or the records as JSON; nothing
    when neither system has one."""
    details = image.get("details") or {}
    parts = []
    for key in keys:
        records = {system: details.get(system, {}).get(key) for system in pair}
        if all(record is None for record in records.values()):
            continue
        present = [record for record in records.values() if record is not None]
        render = _scene_graph_details if all(map(is_scene_graph, present)) else _record_details
        parts.append(f'<div class="image-details" data-key="{_esc(key)}">{render(titles[key], records, colors)}'
                     "</div>")
    return "".join(parts)
