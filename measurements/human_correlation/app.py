"""Human-correlation demo (Hugging Face Space): paste metric and human scores, get τ-b/τ-c/Pearson/Spearman."""

from pathlib import Path

import gradio as gr

import warnings

from capeval.core.errors import InputError
from capeval.demo import blocks, card_markdown, markdown_table
from capeval.functional.correlation import STATISTICS, UndefinedStatisticWarning

EXAMPLES = [["0.1 0.4 0.35 0.8 0.62", "1, 2, 2, 4, 3"], ["0.9 0.7 0.5 0.3 0.1", "1 2 3 4 5"]]


def correlate(metric_text: str, human_text: str):
    """Every statistic of ``STATISTICS`` between the pasted metric and human scores (full precision)."""
    try:
        metric = [float(x) for x in (metric_text or "").replace(",", " ").split()]
        human = [float(x) for x in (human_text or "").replace(",", " ").split()]
    except ValueError as exc:
        raise gr.Error(f"scores must be numbers separated by spaces or commas: {exc}") from exc
    if len(metric) != len(human) or len(metric) < 3:
        raise gr.Error(f"need the same number (at least 3) of metric and human scores: {len(metric)} vs {len(human)}")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UndefinedStatisticWarning)
            values = {name: statistic(metric, human) for name, statistic in STATISTICS.items()}
    except InputError as exc:
        raise gr.Error(str(exc)) from exc
    reasons = iter(str(w.message) for w in caught if issubclass(w.category, UndefinedStatisticWarning))
    return {name: next(reasons) if value != value else value for name, value in values.items()}


def table(values):
    return markdown_table(list((values or {}).items()), ("statistic", "value"))


first = correlate(*EXAMPLES[0])  # the page opens with the first example computed
with blocks("capeval: human correlation") as demo:
    gr.Markdown("# Human correlation\n\nHow well a caption metric agrees with human judgments: paste one metric "
                "score and one human score per caption, in the same order.")
    with gr.Row():
        with gr.Column(min_width=300):
            metric_scores = gr.Textbox(EXAMPLES[0][0], label="Metric scores", placeholder="0.1 0.4 0.35 0.8")
            human_scores = gr.Textbox(EXAMPLES[0][1], label="Human scores", placeholder="1, 2, 2, 4")
            button = gr.Button("Correlate", variant="primary")
            gr.Examples(EXAMPLES, inputs=[metric_scores, human_scores])
        with gr.Column(min_width=300):
            raw = gr.JSON(first, visible=False)
            shown = gr.Markdown(table(first), elem_classes=["capeval-table"])
    card = card_markdown(Path(__file__).with_name("README.md"))
    with gr.Accordion("Measurement card: the statistics, their ties and intervals", open=False):
        gr.Markdown(card)
    button.click(correlate, [metric_scores, human_scores], raw, api_name="correlate").then(
        table, raw, shown, api_name=False)

if __name__ == "__main__":
    demo.launch()
