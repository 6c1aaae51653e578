"""Gradio demos (Hugging Face Spaces) for any registered capeval scorer.

A metric's ``app.py`` is a few lines::

    from pathlib import Path
    from capeval.demo import build_demo, clip_score_breakdown
    demo = build_demo("clip_s", explanation=clip_score_breakdown(), card=Path(__file__).with_name("README.md"))
    demo.launch()

The scorer is loaded when the app is built (not on the first request) and scores the first example, which the
page opens with. The page shows the provenance of the loaded weights (a banner when they are tiny random test
weights), an image upload (hidden for a metric whose images are unused), a caption, references (one per line;
hidden for a reference-free metric), clickable examples, the scores rounded for reading, an optional
metric-specific explanation (a table, an image or HTML), and the metric card. The scoring endpoint ``/score``
returns the unrounded values: ``gradio_client.Client(url).predict(handle_file(path), caption, references,
api_name="/score")`` gives ``(scores, panel)``, ``panel`` being ``{"headers": [...], "data": [[component,
value], ...]}`` for a table and the HTML text for HTML. ``scores["scored"]`` echoes what was scored (the caption,
the references and :func:`image_digest` of the image), and the page shows it above the scores, so that a result can
never pass for the score of other inputs. Score is disabled while an example loads and while a request is scored
(the scores show the progress meanwhile).
"""

from __future__ import annotations

import hashlib
import html
import math
import os
import tempfile
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from capeval.core.errors import InputError
from capeval.core.inputs import check_captions, load_image
from capeval.core.scoring import load_scorer, scorers

PANEL_KINDS = ("table", "image", "html")
DIGITS = 4  # decimals shown on the page (the API returns full precision)
CSS = """
.capeval-table td, .capeval-table th {word-break: normal; overflow-wrap: normal;}
.capeval-table td:first-child {overflow-wrap: anywhere;}
.capeval-tiny {background: #fff3cd; border: 2px solid #d39e00; border-radius: 8px; padding: 4px 12px;}
"""  # numbers never break mid-number (long names may); the tiny-weights banner stands out
DIGEST_CHARS = 12  # hex digits of the image digest shown and returned
TINY_BANNER = ("⚠️ **These are tiny random TEST weights: the scores mean nothing.** They exercise the real code "
               "path offline; a published Space loads the real weights listed below.")


@dataclass(frozen=True)
class DemoInputs:
    """One validated request: the image (``None`` for text-only metrics), the caption and its references."""

    image: Any
    caption: str
    references: Optional[List[str]]

    def echo(self) -> Dict[str, Any]:
        """What was scored: the caption, the references and the image's digest (``None`` without an image)."""
        return {"caption": self.caption, "references": self.references,
                "image_sha256": image_digest(self.image) if self.image is not None else None}


def image_digest(image) -> str:
    """The first :data:`DIGEST_CHARS` hex digits of the sha256 of the image's RGB pixels (row-major bytes)."""
    return hashlib.sha256(image.convert("RGB").tobytes()).hexdigest()[:DIGEST_CHARS]


@dataclass(frozen=True)
class Explanation:
    """A metric-specific panel: ``render(scorer, result, inputs)`` returns a ``{component: value}`` dict
    (``kind="table"``), an image (``kind="image"``) or an HTML text, every input in it escaped (``kind="html"``);
    ``result`` is the scorer's output for the request, scored once with ``score_options`` (e.g.
    ``{"return_report": True}``) so that the panel needs no second scoring."""

    kind: str
    label: str
    render: Callable[[Any, Dict[str, Any], DemoInputs], Any]
    score_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in PANEL_KINDS:
            raise ValueError(f"Explanation kind must be one of {PANEL_KINDS}, not {self.kind!r}")


def parse_references(text: Optional[str]) -> Optional[List[str]]:
    """One reference per non-blank line; ``None`` when there are none."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines or None


def scalar_scores(result: Dict[str, Any]) -> Dict[str, Any]:
    """The scorer's corpus-level outputs (for one sample, its scores); per-sample lists and reports are dropped."""
    return {k: v for k, v in result.items() if not k.endswith("_per_sample") and k != "reports"}


def format_value(value: Any) -> str:
    """A value as shown on the page: floats to ``DIGITS`` decimals, NaN as "n/a"."""
    if isinstance(value, bool) or not isinstance(value, float):
        return str(value)
    if math.isnan(value):
        return "n/a"
    text = f"{value:.{DIGITS}f}"
    return text.lstrip("-") if float(text) == 0 else text  # no "-0.0000"


def markdown_table(rows: Sequence[Sequence[Any]], headers: Sequence[str] = ("", "value")) -> str:
    """A Markdown table (text escaped, numbers rounded); Markdown tables wrap on narrow screens."""
    def cell(value):
        return html.escape(format_value(value)).replace("|", "&#124;").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join([":--"] + ["--:"] * (len(headers) - 1)) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def scored_markdown(echo: Optional[Mapping[str, Any]]) -> str:
    """The inputs a result was computed from, shown above its scores."""
    if not echo:
        return ""
    caption = html.escape(echo["caption"]).replace("\n", " ")
    digest = f" · image sha256 `{echo['image_sha256']}`" if echo.get("image_sha256") else ""
    references = len(echo.get("references") or [])
    return f"**Scored:** “{caption}”{digest} · {references} reference{'' if references == 1 else 's'}"


def score_rows(scores: Mapping[str, Any]) -> List[List[Any]]:
    """The numbers of a result (the hashcode is shown with the provenance; timings and reports are left out)."""
    return [[k, v] for k, v in scores.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]


def provenance_markdown(provenance: Optional[Mapping[str, Any]], hashcode: Optional[str] = None) -> str:
    """The weights a scorer loaded (``provenance["weights"]``), with a banner for tiny random test weights."""
    if provenance is None:  # a scorer that does not report its provenance
        return "**Weights:** provenance not reported by this scorer."
    lines = [TINY_BANNER, ""] if provenance.get("tiny_random_weights") else []
    weights = provenance.get("weights") or []
    if not weights:
        lines.append("**Weights:** none (computed from the inputs alone).")
    for weight in weights:
        source = weight.get("source") or f"converted from {weight.get('converted_from')}"
        tiny = " — **tiny random test weights**" if weight.get("tiny_random_weights") else ""
        lines.append(f"- `{weight.get('ref')}`: {html.escape(str(source))}{tiny}")
    lines.append(f"\ncapeval {provenance.get('capeval', '?')}" + (f" · hashcode `{hashcode}`" if hashcode else ""))
    return "\n".join(lines)


def card_markdown(card: Optional[os.PathLike]) -> Optional[str]:
    """A metric card's body (its YAML header dropped), with a link to it on the Hub when running in a Space."""
    if card is None or not Path(card).is_file():
        return None
    text = Path(card).read_text(encoding="utf-8")
    if text.startswith("---\n") and "\n---" in text[4:]:
        text = text[text.index("\n---", 4) + 4:].lstrip("\n")
    space = os.environ.get("SPACE_ID")  # set by the Hub inside a Space
    link = f"[Open the metric card on the Hub](https://huggingface.co/spaces/{space}/blob/main/README.md)\n\n"
    return (link if space else "") + text


def example_images(folder: Optional[os.PathLike] = None) -> Dict[str, str]:
    """Two drawn example images (no files shipped), written once into ``folder`` (default: a fixed folder in the
    temporary directory): ``{"squares": path, "sun": path}``."""
    from PIL import Image, ImageDraw

    folder = Path(folder or Path(tempfile.gettempdir()) / "capeval-demo-examples")
    folder.mkdir(parents=True, exist_ok=True)
    squares = Image.new("RGB", (384, 256), (245, 245, 240))
    draw = ImageDraw.Draw(squares)
    draw.rectangle((32, 64, 160, 192), fill=(210, 40, 40))
    draw.rectangle((224, 64, 352, 192), fill=(40, 70, 200))
    sun = Image.new("RGB", (384, 256), (140, 190, 240))
    draw = ImageDraw.Draw(sun)
    draw.rectangle((0, 176, 384, 256), fill=(60, 150, 60))
    draw.ellipse((250, 30, 330, 110), fill=(250, 210, 40))
    paths = {}
    for name, image in (("squares", squares), ("sun", sun)):
        path = folder / f"{name}.png"
        if not path.is_file():
            partial = folder / f".{name}.{os.getpid()}.png"  # written whole, then renamed: apps may share the folder
            image.save(partial)
            os.replace(partial, path)
        paths[name] = str(path)
    return paths


def examples(spec) -> List[List[Any]]:
    """``[image, caption, references]`` rows: good and wrong captions of the drawn images."""
    images = example_images()
    rows = [
        [images["squares"], "a red square next to a blue square",
         "a red and a blue square side by side\ntwo coloured squares on a white background"],
        [images["sun"], "a yellow sun above a green field",
         "the sun shining over a meadow\na yellow circle in a blue sky above grass"],
        [images["sun"], "a black cat sleeping on a red sofa",
         "the sun shining over a meadow\na yellow circle in a blue sky above grass"],
    ]
    if spec.references == "unused":
        rows = [[image, caption, ""] for image, caption, _ in rows]
    return rows  # build_demo shows the columns of the inputs the metric uses


class DemoScorer:
    """Loads the scorer once (at construction), validates a request, scores it once and renders the explanation."""

    def __init__(self, metric: str, scorer_options: Optional[Dict[str, Any]] = None,
                 explanation: Optional[Explanation] = None):
        self.spec = scorers()[metric]
        self.explanation = explanation
        self.scorer = load_scorer(self.spec.name, **dict(scorer_options or {}))
        self._lock = threading.Lock()  # one request at a time through the shared scorer and its caches

    @property
    def provenance(self) -> Optional[Dict[str, Any]]:
        """What the scorer reports about its weights (``None`` when it reports nothing)."""
        return getattr(self.scorer, "provenance", None)

    def inputs(self, image, caption: Optional[str], references_text: Optional[str]) -> DemoInputs:
        references = parse_references(references_text)
        if self.spec.needs_images and image is None:
            raise InputError("upload an image")
        if self.spec.needs_references and references is None:
            raise InputError(f"{self.spec.name} needs at least one reference (one per line)")
        (caption,) = check_captions([caption or ""], name="caption")
        if self.spec.images == "unused":  # a text metric: an uploaded image is ignored
            image = None
        return DemoInputs(load_image(image) if image is not None else None, caption, references)

    def score(self, image, caption, references_text):
        """``(scores, explanation)`` for one request, ``scores["scored"]`` echoing the inputs scored; bad input
        raises :class:`capeval.InputError`."""
        inputs = self.inputs(image, caption, references_text)
        images = [inputs.image] if inputs.image is not None else None
        options = dict(self.explanation.score_options) if self.explanation else {}
        with self._lock:
            result = self.scorer.score([inputs.caption], images=images,
                                       references=[inputs.references] if inputs.references else None, **options)
            panel = self.explanation.render(self.scorer, result, inputs) if self.explanation else None
        if self.explanation is not None and self.explanation.kind == "table":
            panel = {"headers": ["component", "value"], "data": [[name, value] for name, value in panel.items()]}
        return {**scalar_scores(result), "scored": inputs.echo()}, panel


def blocks(title: str):
    """``gradio.Blocks`` styled with :data:`CSS`. Gradio 6 moved ``css`` to ``launch()`` but still takes it here as
    ``launch()``'s default (with a warning, silenced): an ``app.py`` keeps a bare ``demo.launch()``."""
    import gradio as gr

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The parameters have been moved", category=UserWarning)
        return gr.Blocks(title=title, css=CSS)


DISABLE_JS = "{__type__: 'update', interactive: false}"
ENABLE_JS = "{__type__: 'update', interactive: true}"


def _browser_step(*values: str) -> str:
    """A step run in the browser at once, with no round trip to the server: a JavaScript function returning
    ``values`` (JavaScript expressions) for its outputs."""
    return f"() => [{', '.join(values)}]"


def build_demo(metric: str, *, title: Optional[str] = None, description: Optional[str] = None,
               explanation: Optional[Explanation] = None, scorer_options: Optional[Dict[str, Any]] = None,
               card: Optional[os.PathLike] = None):
    """A ``gradio.Blocks`` app scoring one caption of an uploaded image with the registered scorer ``metric``.
    The scorer is loaded now and scores the first example, which the page opens with (inputs, scores, panel).

    Score is disabled in the browser the moment an example is clicked, until its inputs are in place, and while a
    request is scored; scoring clears the old scores and shows progress in their place, and the result names the
    caption and image digest it was computed from."""
    import gradio as gr

    demo_scorer = DemoScorer(metric, scorer_options, explanation)
    spec = demo_scorer.spec
    rows = examples(spec)
    first_scores, first_panel = demo_scorer.score(*rows[0])

    def score(image, caption, references_text):
        try:
            return demo_scorer.score(image, caption, references_text)
        except InputError as exc:
            raise gr.Error(str(exc)) from exc

    def show(scores, panel):
        scores = scores or {}
        numbers = markdown_table(score_rows(scores), ("score", "value")) if scores else ""
        table = f"{scored_markdown(scores.get('scored'))}\n\n{numbers}" if scores else ""
        weights = provenance_markdown(scores.get("provenance", demo_scorer.provenance), scores.get("hashcode"))
        if explanation is not None and explanation.kind == "table":
            return table, markdown_table(panel["data"], ("component", "value")) if panel else "", weights
        return table, gr.skip(), weights

    first_table, first_markdown, first_weights = show(first_scores, first_panel)
    tiny = bool((demo_scorer.provenance or {}).get("tiny_random_weights"))
    with blocks(title or f"capeval: {metric}") as demo:
        gr.Markdown(f"# {title or metric}\n\n{description or spec.help}")
        weights = gr.Markdown(first_weights, elem_classes=["capeval-tiny"] if tiny else None)
        with gr.Row():
            with gr.Column(min_width=300):
                image = gr.Image(rows[0][0], type="pil",
                                 label="Image" + ("" if spec.needs_images else " (optional)"),
                                 visible=spec.images != "unused")  # a text metric takes none
                caption = gr.Textbox(rows[0][1], label="Caption", placeholder="a dog running on the beach")
                references = gr.Textbox(
                    rows[0][2],
                    label="References, one per line" + (" (required)" if spec.needs_references else " (optional)"),
                    lines=3, visible=spec.references != "unused")  # a reference-free metric takes none
                button = gr.Button("Score", variant="primary")
                shown = [k for k, used in enumerate((spec.images, "required", spec.references)) if used != "unused"]
                example_inputs = [(image, caption, references)[k] for k in shown]
                example_rows = gr.Dataset(components=example_inputs, samples=[[row[k] for k in shown] for row in rows],
                                          label="Examples (drawn images)", type="index")
            with gr.Column(min_width=300):
                raw_scores = gr.JSON(first_scores, visible=False)
                gr.Markdown("### Scores")
                scores_table = gr.Markdown(first_table, elem_classes=["capeval-table"])
                if explanation is None:
                    raw_panel = gr.JSON(visible=False)
                    panel = gr.Markdown(visible=False)
                elif explanation.kind == "table":
                    raw_panel = gr.JSON(first_panel, visible=False)
                    gr.Markdown(f"### {explanation.label}")
                    panel = gr.Markdown(first_markdown, elem_classes=["capeval-table"])
                elif explanation.kind == "html":
                    gr.Markdown(f"### {explanation.label}")
                    raw_panel = panel = gr.HTML(first_panel)
                else:
                    raw_panel = panel = gr.Image(first_panel, type="pil", label=explanation.label)
        text = card_markdown(card)
        if text:
            with gr.Accordion("Metric card: what the score means, its limits, how to cite", open=False):
                gr.Markdown(text)

        def load_example(index):
            values = [rows[index][k] for k in shown]
            return values if len(values) > 1 else values[0]

        def show_and_enable(scores, panel):
            return (*show(scores, panel), gr.update(interactive=True))

        private = dict(api_visibility="private", queue=False)
        example_rows.click(None, None, button, js=_browser_step(DISABLE_JS), **private).then(
            load_example, example_rows, example_inputs, show_progress="hidden", **private).then(
            None, None, button, js=_browser_step(ENABLE_JS), **private)
        # Score: disabled and the old result cleared at once, then the inputs are read and scored
        cleared = [raw_scores, raw_panel, scores_table] + ([panel] if panel is not raw_panel else [])
        blank = ["'*Scoring…*'" if part is scores_table else "''" if isinstance(part, (gr.Markdown, gr.HTML))
                 else "null" for part in cleared]
        scoring = button.click(None, None, [button, *cleared], js=_browser_step(DISABLE_JS, *blank), **private).then(
            score, inputs=[image, caption, references], outputs=[raw_scores, raw_panel], api_name="score",
            show_progress_on=[scores_table] + ([panel] if panel.visible is not False else []))
        scoring.then(show_and_enable, inputs=[raw_scores, raw_panel], outputs=[scores_table, panel, weights, button],
                     **private)
    return demo


def _clip_score_components(scorer, result: Dict[str, Any], inputs: DemoInputs) -> Dict[str, float]:
    from capeval import functional as F

    backbone = scorer.backbone
    texts = [scorer.prefix + inputs.caption] + [scorer.prefix + r for r in inputs.references or []]
    text_emb = F.normalize(backbone.encode_texts(texts))
    image_emb = F.normalize(backbone.encode_images([inputs.image]))
    components = {
        "cosine(image, caption)": float(image_emb[0] @ text_emb[0]),
        "w": float(scorer.w),
        f"{scorer.name} = w · max(cosine, 0)": result[scorer.name],
    }
    if inputs.references:
        ref_cosines = (text_emb[1:] @ text_emb[0]).tolist()
        for j, (reference, cosine) in enumerate(zip(inputs.references, ref_cosines), 1):
            components[f"cosine(caption, reference {j}: “{_shorten(reference)}”)"] = float(cosine)
        components["max reference cosine"] = float(max(ref_cosines))
        components[f"ref{scorer.name} = harmonic mean({scorer.name}, max reference cosine)"] = \
            result[f"ref{scorer.name}"]
    return components


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def clip_score_breakdown() -> Explanation:
    """CLIP-S / PAC-S components: the image-caption cosine, ``w``, and each reference's cosine."""
    return Explanation("table", "How the score is made", _clip_score_components)


def _hice_overlay(scorer, result: Dict[str, Any], inputs: DemoInputs):
    from capeval.hice_s.visualize import draw_hice_report

    masks = scorer.regions.masks(inputs.image)  # cached by the scoring call: no second segmentation
    return draw_hice_report(inputs.image, result["reports"][0], masks)


def hice_overlay() -> Explanation:
    """HICE-S: the image with numbered regions (green mentioned, red unmentioned) and the caption's phrases, wrong
    ones marked, drawn from the report of the one scoring call."""
    return Explanation("image", "Regions and phrases", _hice_overlay, {"return_report": True})


def _capture_scene_graphs(scorer, result: Dict[str, Any], inputs: DemoInputs) -> str:
    from capeval.report.scene_graphs import scene_graphs_html

    return scene_graphs_html(result["capture_details"][0])


def capture_scene_graphs() -> Explanation:
    """CAPTURE: the caption's and the references' scene graphs side by side (objects, attributes, relations), each
    element marked matched, missed or invented, from the ``capture_details`` of the one scoring call."""
    return Explanation("html", "Scene graphs: caption vs references", _capture_scene_graphs)
