"""VCRScore demo (Hugging Face Space): the score, its three features and the objects the detectors found."""

from capeval.demo import Explanation, build_demo


def feature_breakdown(scorer, result, inputs):
    """The regressor's three inputs and the detected object names that entered the word pool."""
    detr, yolo = scorer.detect([inputs.image])
    return {
        "(1) word precision vs references + detected objects, %": result["word_precision_per_sample"][0],
        "(2) ViLT image-text retrieval logit": result["vilt_logit_per_sample"][0],
        "(3) MCIP RefCLIP-S": result["mcip_refclip_s_per_sample"][0],
        "VCRScore = regressor(1, 2, 3)": result["vcrscore_per_sample"][0],
        "objects found by DETR": ", ".join(sorted(set(detr[0]))) or "(none)",
        "objects found by the YOLO-family detector": ", ".join(sorted(set(yolo[0]))) or "(none)",
    }


demo = build_demo("vcrscore", title="VCRScore",
                  explanation=Explanation("table", "Features and detected objects", feature_breakdown))

if __name__ == "__main__":
    demo.launch()
