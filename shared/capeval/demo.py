"""Gradio demos (Hugging Face Spaces) for any registered capeval scorer.

A metric's ``app.py`` is three lines::

    from capeval.demo import build_demo, clip_score_breakdown
    demo = build_demo("clip_s", explanation=clip_score_breakdown())
    demo.launch()

The page has an image upload (hidden for a metric whose images are unused, e.g. a text metric), a caption,
references (one per line; hidden for a reference-free metric), the scores, and an optional
metric-specific explanation panel: a table (the hook returns a ``{component: value}`` dict) or an image (a
region/phrase overlay, a generated image). The scorer is loaded on the first request. The scoring endpoint is
``/score``: ``gradio_client.Client(url).predict(handle_file(path), caption, references, api_name="/score")``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from capeval.core.errors import InputError
from capeval.core.inputs import check_captions, load_image
from capeval.core.scoring import load_scorer, scorers

PANEL_KINDS = ("table", "image")


@dataclass(frozen=True)
class DemoInputs:
    """One validated request: the image (``None`` for text-only metrics), the caption and its references."""

    image: Any
    caption: str
    references: Optional[List[str]]


@dataclass(frozen=True)
class Explanation:
    """A metric-specific panel: ``render(scorer, result, inputs)`` returns a ``{component: value}`` dict
    (``kind="table"``) or an image (``kind="image"``); ``result`` is the scorer's output for the request."""

    kind: str
    label: str
    render: Callable[[Any, Dict[str, Any], DemoInputs], Any]

    def __post_init__(self):
        if self.kind not in PANEL_KINDS:
            raise ValueError(f"Explanation kind must be one of {PANEL_KINDS}, not {self.kind!r}")


def parse_references(text: Optional[str]) -> Optional[List[str]]:
    """One reference per non-blank line; ``None`` when there are none."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines or None


def scalar_scores(result: Dict[str, Any]) -> Dict[str, Any]:
    """The scorer's corpus-level outputs (for one sample, its scores); per-sample lists are dropped."""
    return {k: v for k, v in result.items() if not k.endswith("_per_sample")}


class DemoScorer:
    """Validates a request, scores it with the (lazily loaded, shared) scorer and renders the explanation."""

    def __init__(self, metric: str, scorer_options: Optional[Dict[str, Any]] = None,
                 explanation: Optional[Explanation] = None):
        self.spec = scorers()[metric]
        self.scorer_options = dict(scorer_options or {})
        self.explanation = explanation
        self._scorer = None
        self._lock = threading.Lock()

    @property
    def scorer(self):
        with self._lock:
            if self._scorer is None:
                self._scorer = load_scorer(self.spec.name, **self.scorer_options)
            return self._scorer

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
        """``(scores, explanation)`` for one request; bad input raises :class:`capeval.InputError`."""
        inputs = self.inputs(image, caption, references_text)
        images = [inputs.image] if self.spec.images != "unused" and inputs.image is not None else None
        result = self.scorer.score([inputs.caption], images=images,
                                   references=[inputs.references] if inputs.references else None)
        if self.explanation is None:
            return scalar_scores(result), None
        panel = self.explanation.render(self.scorer, result, inputs)
        if self.explanation.kind == "table":
            panel = [[name, value] for name, value in panel.items()]
        return scalar_scores(result), panel


def build_demo(metric: str, *, title: Optional[str] = None, description: Optional[str] = None,
               explanation: Optional[Explanation] = None, scorer_options: Optional[Dict[str, Any]] = None):
    """A ``gradio.Blocks`` app scoring one caption of an uploaded image with the registered scorer ``metric``."""
    import gradio as gr

    demo_scorer = DemoScorer(metric, scorer_options, explanation)
    spec = demo_scorer.spec

    def score(image, caption, references_text):
        try:
            return demo_scorer.score(image, caption, references_text)
        except InputError as exc:
            raise gr.Error(str(exc)) from exc

    with gr.Blocks(title=title or f"capeval: {metric}") as demo:
        gr.Markdown(f"# {title or metric}\n\n{description or spec.help}")
        with gr.Row():
            with gr.Column():
                image = gr.Image(type="pil", label="Image" + ("" if spec.needs_images else " (optional)"),
                                 visible=spec.images != "unused")  # a text metric takes none
                caption = gr.Textbox(label="Caption", placeholder="a dog running on the beach")
                references = gr.Textbox(
                    label="References, one per line" + (" (required)" if spec.needs_references else " (optional)"),
                    lines=4, visible=spec.references != "unused")  # a reference-free metric takes none
                button = gr.Button("Score", variant="primary")
            with gr.Column():
                scores = gr.JSON(label="Scores")
                if explanation is None:
                    panel = gr.Markdown(visible=False)
                elif explanation.kind == "table":
                    panel = gr.Dataframe(headers=["component", "value"], label=explanation.label)
                else:
                    panel = gr.Image(type="pil", label=explanation.label)
        button.click(score, inputs=[image, caption, references], outputs=[scores, panel], api_name="score")
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
        f"{scorer.name} = w * max(cosine, 0)": result[scorer.name],
    }
    if inputs.references:
        ref_cosines = (text_emb[1:] @ text_emb[0]).tolist()
        for j, (reference, cosine) in enumerate(zip(inputs.references, ref_cosines), 1):
            components[f"cosine(caption, reference {j}: {reference!r})"] = float(cosine)
        components["max reference cosine"] = float(max(ref_cosines))
        components[f"ref{scorer.name} = harmonic mean"] = result[f"ref{scorer.name}"]
    return components


def clip_score_breakdown() -> Explanation:
    """CLIP-S / PAC-S components: the image-caption cosine, ``w``, and each reference's cosine."""
    return Explanation("table", "How the score is made", _clip_score_components)


def _hice_overlay(scorer, result: Dict[str, Any], inputs: DemoInputs):
    return scorer.visualize(inputs.image, inputs.caption, inputs.references)


def hice_overlay() -> Explanation:
    """HICE-S: the image with regions outlined green (mentioned) / red (unmentioned) and the phrases listed."""
    return Explanation("image", "Regions and phrases", _hice_overlay)
