"""Image round-trip demo (Hugging Face Space): the caption is rendered by a text-to-image model and compared
with the uploaded image; the generated image is shown beside the score."""

from pathlib import Path

from capeval.demo import Explanation, build_demo


def generated_image(scorer, result, inputs):
    """The first image generated for the caption (from the on-disk cache: no second generation)."""
    return scorer.generated_images([inputs.caption], show_progress=False)[0][0]


demo = build_demo("image_roundtrip", title="Image round-trip",
                  explanation=Explanation("image", "Image generated from the caption", generated_image),
                  card=Path(__file__).with_name("README.md"))

if __name__ == "__main__":
    demo.launch()
