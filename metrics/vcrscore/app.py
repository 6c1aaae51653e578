"""VCRScore demo (Hugging Face Space): the score, its three features and the objects the detectors found."""

from pathlib import Path

from capeval.demo import Explanation, build_demo


def feature_breakdown(scorer, result, inputs):
    """The regressor's three inputs and the detected object names that entered the word pool (from the one
    scoring call, made with ``return_features=True``)."""
    objects = result["detected_objects"][0]
    return {
        "(1) word precision vs references + detected objects, %": result["word_precision_per_sample"][0],
        "(2) ViLT image-text retrieval logit": result["vilt_logit_per_sample"][0],
        "(3) MCIP RefCLIP-S": result["mcip_refclip_s_per_sample"][0],
        "VCRScore = regressor(1, 2, 3)": result["vcrscore_per_sample"][0],
        "objects found by DETR": ", ".join(sorted(set(objects["detr"]))) or "(none)",
        "objects found by the YOLO-family detector": ", ".join(sorted(set(objects["yolo"]))) or "(none)",
    }


demo = build_demo("vcrscore", title="VCRScore",
                  explanation=Explanation("table", "Features and detected objects", feature_breakdown,
                                          {"return_features": True}),
                  card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
