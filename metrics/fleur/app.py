"""FLEUR demo (Hugging Face Space): LLaVA-1.5-13B rates a caption of an uploaded image and says why."""

from pathlib import Path

from capeval.demo import Explanation, build_demo


def judge_answer(scorer, result, inputs):
    """The judge's answer, the number read from it, the smoothed score and the judge's explanation."""
    return {"judge's answer": result["fleur_texts"][0], "number written": result["fleur_raw_per_sample"][0],
            "smoothed score (FLEUR)": result["fleur_per_sample"][0],
            "explanation": result["fleur_explanations"][0] or "(no score: nothing to explain)"}


demo = build_demo("fleur", title="FLEUR", explanation=Explanation("table", "What the judge said", judge_answer),
                  scorer_options={"explanation": True}, card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
