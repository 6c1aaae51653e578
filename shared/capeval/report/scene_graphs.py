"""The scene graphs CAPTURE compared, side by side, as self-contained HTML (every text escaped, inline styles only).

Built from one sample's ``capture_details`` (:class:`capeval.detail.scorer.CaptureScorer`): per kind (objects,
attributes, relations) the caption's elements (matched or invented) and the references' elements (matched or
missed; with several references, the union over them, so one element can be matched in one reference and missed
in another). Each element carries a status marker that reads without colour: ✓ matched (with its partner when the
synonym stage matched another phrase), − missed (in the references, not the caption), + invented (in the caption,
not the references).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from capeval.functional.capture import KINDS

# status -> (marker, what it means, text colour, background)
STATUSES = {
    "matched": ("✓", "matched", "#0f5323", "#dafbe1"),
    "missed": ("−", "missed: in the references, not the caption", "#7a3e00", "#fff1d6"),
    "invented": ("+", "invented: in the caption, not the references", "#8a0010", "#ffe4e8"),
}
SOFT_STAGE_NOTE = ("Missed and invented elements are those the exact and synonym stages left unmatched; with soft "
                   "matching on, each still counts in P/R by its best cosine similarity.")


@dataclass
class GraphElement:
    """One element of one side: its text, its statuses in order of first appearance, its matched partners."""

    text: str
    statuses: List[str] = field(default_factory=list)
    partners: List[str] = field(default_factory=list)

    def add(self, status: str, partner: Optional[str] = None) -> None:
        if status not in self.statuses:
            self.statuses.append(status)
        if partner is not None and partner != self.text and partner not in self.partners:
            self.partners.append(partner)


def graph_sides(kind_detail: Mapping) -> Tuple[List[GraphElement], List[GraphElement]]:
    """The caption's and the references' elements of one kind, from its ``matched`` pairs, ``missed`` and
    ``invented`` lists (matched elements first, each element once)."""
    caption: Dict[str, GraphElement] = {}
    references: Dict[str, GraphElement] = {}
    for caption_text, reference_text in kind_detail["matched"]:
        caption.setdefault(caption_text, GraphElement(caption_text)).add("matched", reference_text)
        references.setdefault(reference_text, GraphElement(reference_text)).add("matched", caption_text)
    for text in kind_detail["invented"]:
        caption.setdefault(text, GraphElement(text)).add("invented")
    for text in kind_detail["missed"]:
        references.setdefault(text, GraphElement(text)).add("missed")
    return list(caption.values()), list(references.values())


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _element_html(element: GraphElement) -> str:
    first = STATUSES[element.statuses[0]]
    markers = "".join(STATUSES[s][0] for s in element.statuses)
    meaning = "; ".join(STATUSES[s][1] for s in element.statuses)
    partners = f" ≈ {', '.join(element.partners)}" if element.partners else ""
    title = meaning + (f" (matched with {', '.join(element.partners)})" if element.partners else "")
    return (f'<li data-status="{" ".join(element.statuses)}" title="{_esc(title)}" style="color:{first[2]};'
            f'background:{first[3]};border-radius:4px;padding:1px 6px;margin:2px 0;list-style:none">'
            f'<b>{_esc(markers)}</b> {_esc(element.text)}{_esc(partners)}</li>')


def _side_html(elements: Sequence[GraphElement]) -> str:
    if not elements:
        return '<td style="vertical-align:top;color:#555"><i>none</i></td>'
    items = "".join(map(_element_html, elements))
    return f'<td style="vertical-align:top"><ul style="margin:0;padding:0">{items}</ul></td>'


def _kind_header(kind: str, detail: Mapping) -> str:
    numbers = "<br>".join(f"{name} {detail[key]:.3f}" for name, key in (("P", "precision"), ("R", "recall"),
                                                                          ("F1", "f1")))
    return (f'<th style="text-align:left;vertical-align:top">{_esc(kind)}<br>'
            f'<small style="font-weight:normal">{numbers}</small></th>')


def legend_html() -> str:
    """What the markers and colours mean."""
    return " · ".join(f'<span style="color:{text};background:{background};border-radius:4px;padding:1px 6px">'
                      f'<b>{_esc(marker)}</b> {_esc(meaning)}</span>'
                      for marker, meaning, text, background in STATUSES.values())


def scene_graphs_html(details: Mapping[str, Mapping]) -> str:
    """One sample's ``capture_details`` as a table: a row per kind (with its P, R, F1), the caption's scene graph
    in one column and the references' in the other."""
    rows = "".join(f"<tr>{_kind_header(kind, details[kind])}{''.join(map(_side_html, graph_sides(details[kind])))}"
                   f"</tr>" for kind in KINDS)
    return (f'<div class="capeval-scene-graphs"><p>{legend_html()}</p>'
            f'<table style="width:100%;border-collapse:collapse"><thead><tr><th></th>'
            f'<th style="text-align:left">Caption\'s scene graph</th>'
            f'<th style="text-align:left">References\' scene graph</th></tr></thead><tbody>{rows}</tbody></table>'
            f'<p style="font-size:.85em;color:#555">{_esc(SOFT_STAGE_NOTE)}</p></div>')
