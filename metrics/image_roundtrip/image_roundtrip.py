"""Image round-trip (Huang et al., 2024) as an evaluate metric, backed by capeval."""

import evaluate

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module

_CITATION = """\
@article{huang2024novel,
  title={A Novel Evaluation Framework for Image2Text Generation},
  author={Huang, Jia-Hong and Zhu, Hongyi and Shen, Yixian and Rudinac, Stevan and Pacces, Alessio M. and
          Kanoulas, Evangelos},
  journal={arXiv preprint arXiv:2408.01723},
  year={2024}
}
"""

_DESCRIPTION = """\
Image round-trip is a reference-free image-captioning metric: a text-to-image model renders the candidate
caption, an image encoder embeds the original and the rendered image, and the score is their cosine
similarity (averaged over the images rendered per caption). Defaults: SD-Turbo (1 step, guidance 0, 512 px)
and the OpenCLIP ViT-g/14 image tower; DINOv2 and negative L2 distance are options.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate captions.
    images (`list`): one image per caption: PIL image, file path, numpy array, or `datasets.Image` dict.
    return_images (`bool`, optional): also return the generated images (`generated_images`, one list per caption).
""" + evaluate_module.init_options_description("image_roundtrip") + """
Returns:
    image_roundtrip (`float`): corpus mean; image_roundtrip_per_sample (`list` of `float`);
    truncated_texts (`int`): captions over the generator's text-encoder limit (77 CLIP tokens for Stable
        Diffusion), truncated before generation, with one warning per call (left out for a plugged-in generator
        that cannot tell); generated_images with `return_images=True`.
Examples:
    >>> import evaluate
    >>> from PIL import Image
    >>> roundtrip = evaluate.load("capeval/image_roundtrip",  # 256 px to be quick; default 512
    ...                           scorer_options={"height": 256, "width": 256})
    >>> image = Image.new("RGB", (64, 48), "red")
    >>> result = roundtrip.compute(predictions=["a red square"], images=[image], return_images=True)
    >>> -1 <= result["image_roundtrip"] <= 1, result["truncated_texts"]  # cosine of image features
    (True, 0)
    >>> result["generated_images"][0][0].size
    (256, 256)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ImageRoundtrip(evaluate_module.CaptionMetric):
    scorer_name = "image_roundtrip"

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=evaluate_module.caption_features(images=True, references=False),
            reference_urls=["https://arxiv.org/abs/2408.01723"],
        )
