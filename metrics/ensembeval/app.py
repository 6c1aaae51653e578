"""EnsembEval demo (Hugging Face Space): the ensemble score and every weighted component behind it."""

from pathlib import Path

from capeval.demo import Explanation, build_demo


def component_breakdown(scorer, result, inputs):
    """Each component's value, its official weight, and its contribution to the ensemble."""
    rows = {}
    for name, weight in scorer.weights.items():
        value = result[f"{name}_per_sample"][0]
        rows[f"{name} = {value:.4f} × {weight:+.4f}"] = value * weight
    return rows


demo = build_demo("ensembeval", title="EnsembEval",
                  explanation=Explanation("table", "Component × weight = contribution", component_breakdown),
                  card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
