"""Metric-comparison demo (Hugging Face Space): paste two metrics' scores and the human scores, get the paired
bootstrap CI and p-value, the permutation test and (Pearson) Williams' test of the difference."""

from pathlib import Path

import gradio as gr

from capeval.core.errors import InputError
from capeval.demo import blocks, card_markdown, markdown_table
from capeval.functional.correlation import STATISTICS
from capeval.meta_eval import significance

EXAMPLES = [["0.9 0.1 0.4 0.8 0.3 0.7 0.2 0.6", "0.5 0.4 0.1 0.9 0.6 0.2 0.3 0.8", "4 1 2 4 1 3 1 3", "pearson"]]


def _numbers(text: str, field: str):
    try:
        return [float(x) for x in (text or "").replace(",", " ").split()]
    except ValueError as exc:
        raise gr.Error(f"{field}: numbers separated by spaces or commas: {exc}") from exc


def compare(metric_a_text: str, metric_b_text: str, human_text: str, statistic: str, resamples: float = 1000):
    """The paired tests of A vs B (``capeval.meta_eval.significance``), seed 0."""
    a, b = _numbers(metric_a_text, "metric A"), _numbers(metric_b_text, "metric B")
    human = _numbers(human_text, "human")
    options = dict(statistic=statistic, resamples=int(resamples or 1000), seed=0)
    try:
        boot = significance.paired_bootstrap(a, b, human, **options)
        perm = significance.paired_permutation(a, b, human, **options)
        out = {"value_a": boot["value_a"], "value_b": boot["value_b"], "delta": boot["delta"],
               "delta_ci_low": boot["ci"][0], "delta_ci_high": boot["ci"][1], "p_bootstrap": boot["p_value"],
               "p_permutation": perm["p_value"]}
        if "undefined" in boot:
            out["undefined"] = boot["undefined"]
        if statistic == "pearson":
            out["p_williams"] = significance.williams(a, b, human)["p_value"]
    except (InputError, ValueError) as exc:
        raise gr.Error(str(exc)) from exc
    return out


def table(values):
    return markdown_table(list((values or {}).items()), ("", "value"))


first = compare(*EXAMPLES[0])  # the page opens with the example computed
with blocks("capeval: metric comparison") as demo:
    gr.Markdown("# Metric comparison\n\nIs metric A better than metric B on the same human judgments? Paste one "
                "score per judgment for each metric and the human scores, in the same order.")
    with gr.Row():
        with gr.Column(min_width=300):
            metric_a = gr.Textbox(EXAMPLES[0][0], label="Metric A scores")
            metric_b = gr.Textbox(EXAMPLES[0][1], label="Metric B scores")
            human = gr.Textbox(EXAMPLES[0][2], label="Human scores")
            statistic = gr.Dropdown(sorted(STATISTICS), value=EXAMPLES[0][3], label="Statistic")
            button = gr.Button("Compare", variant="primary")
        with gr.Column(min_width=300):
            raw = gr.JSON(first, visible=False)
            shown = gr.Markdown(table(first), elem_classes=["capeval-table"])
    with gr.Accordion("Measurement card: the tests, their units and p-values", open=False):
        gr.Markdown(card_markdown(Path(__file__).with_name("README.md")))
    button.click(compare, [metric_a, metric_b, human, statistic], raw, api_name="compare").then(
        table, raw, shown, api_name=False)

if __name__ == "__main__":
    demo.launch()
