"""``report.html``: one self-contained page (inline CSS, inline SVG, thumbnails as ``data:`` URIs, a small inline
script; no external URL): a banner naming the metrics scored with tiny random test weights (when any), a header
naming the files the report was computed from (path and sha256) and the command line, the table,
every pairwise comparison on the table's scale, the scores with their CIs, significance clusters, the images where
two systems disagree most (how many images were compared, how many the page embeds; each card with what each
caption matched, missed and invented where a metric reports it: :mod:`capeval.report.details`), coverage, and the
provenance/hashcodes in a collapsible section.

Every text from the document (names, captions, references, provenance) is HTML-escaped. The disagreement browser
is rendered in full by Python for its default choice (readable without script); the script only re-ranks the
already rendered entries when another pair or metric is chosen (``#pair=<n>&metric=<key>`` in the URL selects
one too)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from capeval.report.cells import (BETTER, TINY_MARK, WORSE, Cell, Table, column_title, digits, finite, format_score,
                                  scale)
from capeval.report.details import image_details_html
from capeval.report.disagreements import differences, ranked, system_pairs
from capeval.report.plot import score_plots, system_colors
from capeval.report.thumbnails import image_thumbnail

TOP_DISAGREEMENTS = 10
DEFAULT_METRICS = ("cider", "clip_s", "refclip_s", "polos", "spice")
MARK_TITLES = {BETTER: "significantly better than the baseline", WORSE: "significantly worse than the baseline"}
MARK_CLASSES = {BETTER: "better", WORSE: "worse"}

STYLE = """
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1b1b;background:#f4f5f7}
main{max-width:1180px;margin:0 auto;padding:16px}
section,header{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:14px 16px;margin:0 0 16px}
h1{font-size:1.45rem;margin:0 0 .2em}h2{font-size:1.12rem;margin:0 0 .5em}
p{margin:.3em 0}.note{color:#555;font-size:.9em}.coverage{font-weight:600}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:separate;border-spacing:0;font-variant-numeric:tabular-nums}
th,td{padding:4px 8px;border-bottom:1px solid #e4e7eb;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}thead th{border-bottom:2px solid #9aa3ad}
.ci{color:#666;font-size:.8em}.scroll th:first-child{position:sticky;left:0;background:#fff;white-space:normal;
min-width:6em}#scores td{vertical-align:top;line-height:1.25}
.mark{font-weight:700}.better{color:#1a7f37}.worse{color:#b00020}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(290px,1fr));gap:10px}
.panel{margin:0}svg.plot{width:100%;height:auto;display:block}
.plot-title{font-weight:600;font-size:13px}.label,.tick{font-size:11px;fill:#333}.grid{stroke:#e6e6e6}
.controls{display:flex;flex-wrap:wrap;gap:8px 16px;margin:0 0 8px}.controls label{display:flex;flex-direction:column;
max-width:100%;font-size:.9em}select{max-width:100%;font:inherit;padding:2px}
#cards{list-style:none;padding:0;margin:0}[hidden]{display:none!important}
.card{display:flex;flex-wrap:wrap;gap:12px;border-top:1px solid #e4e7eb;padding:12px 0}
.thumb{flex:0 0 auto;width:min(256px,100%)}.thumb img{max-width:100%;height:auto;display:block;border-radius:4px}
.noimg{width:100%;padding:24px 8px;background:#eceef1;color:#555;font-size:.85em;text-align:center}
.detail{flex:1 1 320px;min-width:0}.meta,.delta{font-weight:600}
dl{margin:.4em 0}dt{font-weight:600}dd{margin:0 0 .3em 0}dd,li,.meta,pre{overflow-wrap:anywhere}
ol{margin:.2em 0;padding-left:1.4em}.sel{background:#fff3c4}
details summary{cursor:pointer;font-weight:600}
.image-details{margin:.5em 0}.image-details th,.image-details td{text-align:left}
.capeval-scene-graphs td{white-space:normal}
pre{white-space:pre-wrap;font-size:12px;background:#f3f4f6;padding:8px;border-radius:4px}
.banner{background:#fde7e9;border:2px solid #b00020;color:#7a0016;border-radius:8px;padding:12px 16px;
margin:0 0 16px;font-weight:600}.tiny{color:#b00020;font-weight:700;font-size:.8em}
#comparisons{width:100%}#comparisons th{white-space:normal}#comparisons td.pair{text-align:left;white-space:normal;
overflow-wrap:anywhere}
@media (max-width:600px){main{padding:8px}section,header{padding:10px}body{font-size:14px}}
@media (max-width:760px){#comparisons thead{display:none}#comparisons,#comparisons tbody,#comparisons tr{display:block}
#comparisons tr{border-top:1px solid #9aa3ad;padding:4px 0}#comparisons td,#comparisons td.pair{display:flex;
justify-content:space-between;gap:12px;border:0;padding:1px 4px;text-align:right}
#comparisons td::before{content:attr(data-label);font-weight:600;text-align:left;flex:0 0 auto}}
"""

SCRIPT = """
(function () {
  var box = document.getElementById("disagreements");
  if (!box.dataset.keys) return;
  var keys = JSON.parse(box.dataset.keys), top = Number(box.dataset.top), list = document.getElementById("cards");
  var counts = JSON.parse(box.dataset.counts);
  var pairSelect = document.getElementById("pair"), metricSelect = document.getElementById("metric");
  var chosen = new URLSearchParams(location.hash.slice(1));
  if (chosen.has("pair")) pairSelect.value = chosen.get("pair");
  if (chosen.has("metric")) metricSelect.value = chosen.get("metric");
  function signed(delta, key) {
    var text = Math.abs(delta * key.factor).toFixed(key.digits);
    return (delta > 0 ? "+" : delta < 0 ? "\\u2212" : "\\u00b1") + text;
  }
  function show() {
    var pair = pairSelect.value, index = keys.findIndex(function (k) { return k.key === metricSelect.value; });
    var key = keys[index], found = [];
    Array.prototype.forEach.call(list.children, function (card) {
      card.hidden = true;
      if (card.dataset.pair !== pair) return;
      var delta = JSON.parse(card.dataset.deltas)[index];
      if (delta !== null) found.push([Math.abs(delta), Number(card.dataset.order), card, delta]);
    });
    found.sort(function (a, b) { return b[0] - a[0] || a[1] - b[1]; });
    found.slice(0, top).forEach(function (entry, rank) {
      var card = entry[2];
      card.hidden = false;
      card.querySelector(".rank").textContent = "#" + (rank + 1);
      card.querySelector(".delta").textContent = "\\u0394 " + key.title + " = " + signed(entry[3], key);
      card.querySelectorAll("[data-col]").forEach(function (cell) {
        cell.classList.toggle("sel", Number(cell.dataset.col) === index);
      });
      list.appendChild(card);
    });
    document.getElementById("shown").textContent = Math.min(top, found.length) + " of " + counts[Number(pair)][index];
  }
  pairSelect.addEventListener("change", show);
  metricSelect.addEventListener("change", show);
  show();
})();
"""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def signed_score(report: Mapping, key: str, delta: float) -> str:
    """A difference on the table's scale with its sign (U+2212 minus, ± for zero), as the script prints it."""
    text = f"{abs(delta) * scale(report, key):.{digits(report, key)}f}"
    return ("+" if delta > 0 else "\u2212" if delta < 0 else "\u00b1") + text


def tiny_html() -> str:
    return f'<span class="tiny" title="tiny random test weights: the value means nothing">{esc(TINY_MARK)}</span>'


def cell_html(cell: Cell) -> str:
    value = f"<b>{cell.value}</b>" if cell.best else cell.value
    mark = (f'<sup class="mark {MARK_CLASSES[cell.mark]}" title="{MARK_TITLES[cell.mark]}">{cell.mark}</sup>'
            if cell.mark else "")
    tiny = f" {tiny_html()}" if cell.tiny else ""
    ci = f'<br><span class="ci">[{cell.ci[0]}, {cell.ci[1]}]</span>' if cell.ci else ""
    return f"<td>{value}{mark}{tiny}{ci}</td>"


def tiny_banner(table: Table) -> str:
    """The warning about tiny random test weights, at the top of the page (nothing when no metric used them)."""
    return f'<div class="banner" id="tiny-weights" role="alert">{esc(table.warning)}</div>' if table.warning else ""


def system_label(system: str, baseline: Optional[str]) -> str:
    return esc(system) + (' <span class="note">(baseline)</span>' if system == baseline else "")


def score_table(table: Table) -> str:
    head = "".join(f"<th>{esc(t)}</th>" for t in table.titles)
    rows = "".join(f"<tr><th>{system_label(s, table.baseline)}</th>"
                   + "".join(cell_html(table.cells[s][k]) for k in table.keys) + "</tr>" for s in table.systems)
    return (f'<div class="scroll"><table id="scores"><thead><tr><th>System</th>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table></div>")


def clusters_table(report: Mapping, table: Table) -> str:
    clusters = report.get("clusters") or {}
    if not clusters:
        return ""
    head = "".join(f"<th>{esc(t)}</th>" for t in table.titles)
    rows = "".join(f"<tr><th>{esc(s)}</th>" + "".join(f"<td>{esc(clusters.get(k, {}).get(s, '–'))}</td>"
                                                       for k in table.keys) + "</tr>" for s in table.systems)
    return ('<h3>Significance clusters</h3><p class="note">Rank per metric: a system opens a lower rank when a '
            "system ranked above it is significantly better.</p>"
            f'<div class="scroll"><table id="clusters"><thead><tr><th>System</th>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table></div>")


P_COLUMNS = (("p_bootstrap", "p bootstrap"), ("p_randomization", "p randomization"),
             ("p_bootstrap_adjusted", "adjusted p bootstrap"), ("p_randomization_adjusted", "adjusted p randomization"))


def p_text(p) -> str:
    """A p-value rounded to four decimals (``<0.0001`` below that; ``n/a`` when the document has none)."""
    if not finite(p):
        return "n/a"
    text = f"{p:.4f}"
    return "<0.0001" if text == "0.0000" and p > 0 else text


def comparison_row(report: Mapping, row: Mapping, tiny: Sequence[str]) -> str:
    key, delta = row.get("metric", ""), row.get("delta")
    cells = [("Systems", f'{esc(row.get("system_b", ""))} − {esc(row.get("system_a", ""))}', ' class="pair"'),
             ("Metric", esc(column_title(report, key, tiny)), ""),
             ("Δ", signed_score(report, key, delta) if finite(delta) else "n/a", ""),
             *((label, p_text(row.get(name)), "") for name, label in P_COLUMNS),
             ("Significant", {True: "yes", False: "no"}.get(row.get("significant"), "n/a"), "")]
    return "<tr>" + "".join(f'<td data-label="{esc(label)}"{extra}>{text}</td>'
                            for label, text, extra in cells) + "</tr>"


def comparisons_table(report: Mapping, table: Table) -> str:
    """Every comparison of the document: Δ = second − first system on the table's scale and decimals, p-values
    rounded to four decimals; one row per comparison (a list of labelled rows on a narrow screen). Nothing when the
    document has no comparison (one system)."""
    if not report.get("comparisons"):
        return ""
    rows = "".join(comparison_row(report, row, table.tiny) for row in report["comparisons"])
    labels = ("Systems (Δ = first − second)", "Metric", "Δ", *(label for _, label in P_COLUMNS), "Significant")
    head = "".join(f"<th>{esc(label)}</th>" for label in labels)
    correction = report.get("significance", {}).get("correction")
    adjusted = f"; adjusted: {correction}" if correction else ""
    return ("<details><summary>Every pairwise comparison</summary>"
            f'<p class="note">Δ on the table\'s scale ({esc(table.scale_note)}); p-values to four decimals'
            f'{esc(adjusted)}.</p><div class="scroll">'
            f'<table id="comparisons"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div></details>')


def _mini_table(report: Mapping, image: Mapping, pair: Tuple[str, str], keys: Sequence[str],
                deltas: List[Optional[float]], selected: int, tiny: Sequence[str]) -> str:
    def cells(values) -> str:
        return "".join(f'<td data-col="{i}"{" class=sel" if i == selected else ""}>{v}</td>'
                       for i, v in enumerate(values))

    head = "".join(f'<th data-col="{i}"{" class=sel" if i == selected else ""}>'
                   f"{esc(column_title(report, k, tiny))}</th>" for i, k in enumerate(keys))
    rows = "".join(f"<tr><th>{esc(s)}</th>"
                   f"{cells(format_score(report, k, image['scores'][s].get(k)) for k in keys)}</tr>" for s in pair)
    delta_row = cells("n/a" if d is None else signed_score(report, k, d) for k, d in zip(keys, deltas))
    return (f'<div class="scroll"><table class="image-scores"><thead><tr><th></th>{head}</tr></thead>'
            f"<tbody>{rows}<tr><th>Δ</th>{delta_row}</tr></tbody></table></div>")


def image_card(report: Mapping, image: Mapping, order: int, pair_index: int, pair: Tuple[str, str],
               keys: Sequence[str], deltas: List[Optional[float]], selected: int, thumbnail: Tuple[Optional[str], str],
               colors: Mapping[str, str], tiny: Sequence[str]) -> str:
    uri, why = thumbnail
    picture = (f'<img src="{uri}" alt="image {esc(image["image_id"])}">' if uri
               else f'<p class="noimg">{esc(why)}</p>')
    file = f' · <span class="file">{esc(image["file"])}</span>' if image.get("file") else ""
    key, delta = keys[selected], deltas[selected]
    delta_text = (f"Δ {esc(column_title(report, key, tiny))} = {signed_score(report, key, delta)}"
                  if delta is not None else "")
    captions = "".join(f'<dt style="color:{colors[s]}">{esc(s)}</dt><dd>{esc(image["captions"][s])}</dd>'
                       for s in pair)
    references = "".join(f"<li>{esc(r)}</li>" for r in image.get("references", []))
    details = image_details_html(image, pair, keys, {k: column_title(report, k, tiny) for k in keys}, colors)
    return (f'<li class="card" data-pair="{pair_index}" data-order="{order}" '
            f'data-deltas="{esc(json.dumps(deltas))}"><div class="thumb">{picture}</div><div class="detail">'
            f'<p class="meta"><span class="rank"></span> image {esc(image["image_id"])}{file}</p>'
            f'<p class="delta">{delta_text}</p><dl class="captions">{captions}</dl>'
            f'<p class="note">References ({len(image.get("references", []))})</p><ol class="references">'
            f"{references}</ol>{_mini_table(report, image, pair, keys, deltas, selected, tiny)}{details}</div></li>")


def default_metric(keys: Sequence[str]) -> int:
    return next((keys.index(k) for k in DEFAULT_METRICS if k in keys), 0)


def disagreement_browser(report: Mapping, table: Table, images_root: Optional[Path],
                         top: int = TOP_DISAGREEMENTS) -> str:
    """Per pair, the images among the ``top`` disagreements on any metric, each rendered once; the default pair
    and metric shown ranked, the rest hidden until chosen."""
    images, keys = report["images"], table.keys
    pairs = system_pairs(table.systems, table.baseline)
    if not pairs or not keys:
        return ('<section id="disagreements"><h2>Where two systems disagree most</h2>'
                '<p class="note">Nothing to compare: the report has one system or no metric.</p></section>')
    selected = default_metric(keys)
    colors = system_colors(table.systems, table.baseline)
    thumbnails: Dict[int, Tuple[Optional[str], str]] = {}
    shown, hidden, counts = [], [], []
    for pair_index, (a, b) in enumerate(pairs):
        per_key = [differences(images, a, b, k) for k in keys]
        counts.append([sum(d is not None for d in deltas) for deltas in per_key])
        chosen = sorted({i for deltas in per_key for i in ranked(deltas, top)})
        default_rank = ranked(per_key[selected], top) if pair_index == 0 else []
        for i in sorted(chosen, key=lambda i: (i not in default_rank, default_rank.index(i) if i in default_rank
                                               else i)):
            if i not in thumbnails:
                thumbnails[i] = image_thumbnail(images_root, images[i].get("file"))
            card = image_card(report, images[i], i, pair_index, (a, b), keys, [d[i] for d in per_key], selected,
                              thumbnails[i], colors, table.tiny)
            if i in default_rank:
                shown.append(card.replace('<span class="rank"></span>',
                                          f'<span class="rank">#{default_rank.index(i) + 1}</span>', 1))
            else:
                hidden.append(card.replace('<li class="card"', '<li hidden class="card"', 1))
    key_info = [{"key": k, "title": column_title(report, k, table.tiny), "factor": scale(report, k),
                 "digits": digits(report, k)} for k in keys]
    pair_options = "".join(f'<option value="{n}">{esc(a)} − {esc(b)}</option>' for n, (a, b) in enumerate(pairs))
    metric_options = "".join(f'<option value="{esc(k)}"{" selected" if n == selected else ""}>'
                             f"{esc(column_title(report, k, table.tiny))}</option>" for n, k in enumerate(keys))
    count = counts[0][selected]
    return (f'<section id="disagreements" data-top="{top}" data-keys="{esc(json.dumps(key_info))}" '
            f'data-counts="{esc(json.dumps(counts))}"><h2>Where two systems disagree most</h2>'
            '<p class="note">Images ranked by the absolute difference of the two systems\' per-image scores on the '
            "chosen metric (Δ = first − second, on the table's scale).</p>"
            f'<div class="controls"><label>Systems<select id="pair">{pair_options}</select></label>'
            f'<label>Metric<select id="metric">{metric_options}</select></label></div>'
            f'<p class="note" id="counts"><span id="compared">{len(images)}</span> images compared. Showing '
            f'<span id="shown">{min(top, count)} of {count}</span> images that both systems have a score for, the '
            f'largest difference first. This page embeds <span id="embedded">{len(thumbnails)}</span> of the '
            f"compared images as examples: the {top} largest differences of each pair of systems on each metric.</p>"
            f'<ol id="cards">{"".join(shown + hidden)}</ol></section>')


def provenance_section(report: Mapping, table: Table) -> str:
    metrics = report.get("metrics", {})
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(metrics.get(k, {}).get('scorer', ''))}</td>"
                   f"<td>{esc(metrics.get(k, {}).get('corpus_level', ''))}</td>"
                   f"<td><code>{esc(metrics.get(k, {}).get('hashcode', ''))}</code></td></tr>" for k in table.keys)
    sources = "".join(f"<li>{esc(s)}: <code>{esc(report['systems'][s].get('source', ''))}</code></li>"
                      for s in table.systems)
    details = {"capeval_version": report.get("capeval_version"), "created": report.get("created"),
               "coverage": report.get("coverage"), "significance": report.get("significance"),
               "undefined": report.get("undefined"),
               "provenance": {k: metrics.get(k, {}).get("provenance") for k in table.keys}}
    return ('<section id="provenance"><details><summary>Provenance and hashcodes</summary>'
            '<div class="scroll"><table id="hashcodes"><thead><tr><th>key</th><th>scorer</th><th>corpus level</th>'
            f"<th>hashcode</th></tr></thead><tbody>{rows}</tbody></table></div>"
            f"<p>Systems' results files:</p><ul>{sources}</ul>"
            f"<pre>{esc(json.dumps(details, indent=1, default=str, ensure_ascii=False))}</pre></details></section>")


def inputs_list(report: Mapping) -> str:
    """The files the report was computed from (path and sha256 of each) and the command line, from the document's
    ``inputs`` (nothing for a document without it)."""
    inputs = report.get("inputs")
    if not inputs:
        return ""
    annotations = inputs.get("annotations")
    entries = [("Annotations", annotations["path"], annotations["sha256"])] if annotations else []
    entries += [(f"Results of {e['system']}", e["path"], e["sha256"]) for e in inputs.get("results", [])]
    entries += [(f"Records of {e['system']}", e["source"], e["sha256"]) for e in inputs.get("records", [])]
    items = "".join(f"<dt>{esc(label)}</dt><dd><code>{esc(path)}</code>"
                    + (f' · sha256 <code class="sha256">{esc(digest)}</code>' if digest else "") + "</dd>"
                    for label, path, digest in entries)
    command = inputs.get("command")
    shown = (f'<code id="command">{esc(command)}</code>' if command
             else "not recorded (evaluate_captions called from Python)")
    return f'<dl class="note" id="inputs">{items}<dt>Command</dt><dd>{shown}</dd></dl>'


def render_html(report: Mapping, table: Table, images_root: Optional[Path] = None) -> str:
    coverage = esc(report["coverage"]["text"])
    title_text = f"capeval report: {len(table.systems)} systems, {report['coverage']['text']}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title_text)}</title><style>{STYLE}</style></head><body><main>{tiny_banner(table)}"
            f'<header><h1>Caption evaluation report</h1><p class="coverage" id="coverage">{coverage}</p>'
            f'<p class="note">capeval {esc(report.get("capeval_version", ""))} · {esc(report.get("created", ""))}'
            f"</p>{inputs_list(report)}</header>"
            f'<section id="table"><h2>Scores</h2><p class="note">{esc(table.scale_note)} {esc(table.legend)}</p>'
            f'{score_table(table)}<p class="note" id="footer">{" · ".join(map(esc, table.footer))}</p>'
            f"{clusters_table(report, table)}{comparisons_table(report, table)}</section>"
            f'<section id="plots"><h2>Scores with their confidence intervals</h2>'
            f'<div class="plots">{score_plots(report, table.keys, table.systems, table.baseline)}</div></section>'
            f"{disagreement_browser(report, table, images_root)}{provenance_section(report, table)}"
            f"</main><script>{SCRIPT}</script></body></html>\n")
