"""CLIP-S and RefCLIP-S (Hessel et al., 2021) as an evaluate metric, backed by capeval."""

import evaluate

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module

_CITATION = """\
@inproceedings{hessel2021clipscore,
  title={{CLIPScore}: A Reference-free Evaluation Metric for Image Captioning},
  author={Hessel, Jack and Holtzman, Ari and Forbes, Maxwell and Le Bras, Ronan and Choi, Yejin},
  booktitle={EMNLP},
  year={2021}
}
"""

_DESCRIPTION = """\
CLIP-S is a reference-free image-captioning metric: 2.5 * max(cos(CLIP(image), CLIP("A photo depicts " +
caption)), 0) with OpenAI CLIP ViT-B/32. With references, RefCLIP-S is the harmonic mean of CLIP-S and the
maximum cosine between the candidate and its references (official semantics: the reference side is neither
clipped nor rescaled, and references get the same prefix).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate captions.
    images (`list`): one image per caption: PIL image, file path, numpy array, or `datasets.Image` dict.
    references (`list` of `list` of `str`, optional): references per caption (any number, at least one);
        when given, RefCLIP-S is returned too.
""" + evaluate_module.init_options_description("clip_s") + """
Returns:
    clip_s (`float`): corpus mean; clip_s_per_sample (`list` of `float`);
    refclip_s, refclip_s_per_sample: when references are given;
    truncated_texts (`int`): texts longer than 77 CLIP tokens (truncated, with a warning).
Examples:
    >>> import evaluate
    >>> from PIL import Image
    >>> clip_s = evaluate.load("capeval/clip_s")
    >>> image = Image.new("RGB", (64, 48), "red")
    >>> result = clip_s.compute(predictions=["a red square"], images=[image],
    ...                         references=[["a red image", "red"]])
    >>> result["clip_s"]  # CLIP-S lies in [0, 2.5]; the digits depend on the weights
    0...
    >>> len(result["refclip_s_per_sample"]), result["truncated_texts"]
    (1, 0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ClipS(evaluate_module.CaptionMetric):
    scorer_name = "clip_s"

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=evaluate_module.caption_features(images=True, references=True),
            codebase_urls=["https://github.com/jmhessel/clipscore"],
            reference_urls=["https://arxiv.org/abs/2104.08718"],
        )
