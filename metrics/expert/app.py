"""EXPERT demo (Hugging Face Space): LLaVA-1.5-13B with EXPERT's adapter scores a caption of an uploaded image and
explains the score by fluency, relevance and descriptiveness."""

from pathlib import Path

from capeval.demo import Explanation, build_demo


def judge_answer(scorer, result, inputs):
    """The judge's answer, the number read from it, the smoothed score and the three criteria of its explanation."""
    criteria = result["expert_criteria"][0] or {}
    return {"judge's answer": result["expert_texts"][0], "number written": result["expert_raw_per_sample"][0],
            "smoothed score (EXPERT)": result["expert_per_sample"][0],
            **{name: criteria.get(name, "") for name in ("fluency", "relevance", "descriptiveness")},
            "explanation": result["expert_explanations"][0] or "(no score: nothing to explain)"}


demo = build_demo("expert", title="EXPERT", explanation=Explanation("table", "What the judge said", judge_answer),
                  scorer_options={"explanation": True}, card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
