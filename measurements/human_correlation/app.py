"""Human-correlation demo (Hugging Face Space): paste metric and human scores, get τ-b/τ-c/Pearson/Spearman."""

import gradio as gr

from capeval.functional.correlation import STATISTICS


def correlate(metric_text: str, human_text: str):
    metric = [float(x) for x in metric_text.replace(",", " ").split()]
    human = [float(x) for x in human_text.replace(",", " ").split()]
    if len(metric) != len(human) or len(metric) < 3:
        raise gr.Error(f"need the same number (at least 3) of metric and human scores: {len(metric)} vs {len(human)}")
    return {name: statistic(metric, human) for name, statistic in STATISTICS.items()}


demo = gr.Interface(correlate, [gr.Textbox(label="Metric scores"), gr.Textbox(label="Human scores")],
                    gr.JSON(label="Correlations"), title="Human correlation", api_name="correlate")

if __name__ == "__main__":
    demo.launch()
