"""VCRScore (Ruiz et al. 2024) as an evaluate metric, backed by capeval."""

import evaluate

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module

_CITATION = """\
@misc{ruiz2025vcrscore,
  title={{VCRScore}: Image captioning metric based on {V\\&L} Transformers, {CLIP}, and precision-recall},
  author={Ruiz, Guillermo and Ram{\\'\\i}rez, Tania and Moctezuma, Daniela},
  year={2025},
  eprint={2501.09155},
  archivePrefix={arXiv}
}
"""

_DESCRIPTION = """\
VCRScore is a learned caption metric: a gradient-boosted regressor (the official one, converted to JSON trees)
maps three features of a candidate caption to a score: (1) the percentage of the caption's distinct words found in
a pool made of the references and the names of the objects that DETR and a YOLO-family detector find in the image,
(2) the raw image-text retrieval logit of ViLT (dandelin/vilt-b32-finetuned-coco), and (3) RefCLIP-S computed with
the retrieval-optimised MCIP OpenCLIP ViT-L-14-336 (no text prefix, reference side clipped at 0).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate captions.
    images (`list`): one image per caption (PIL image, path, numpy array or `datasets.Image` dict).
    references (`list` of `list` of `str`): at least one reference per caption; all are used unless
        `max_references` is set (the official code uses three).
    return_features (`bool`, compute kwarg): also return `features` (one [f1, f2, f3] row per caption, the
        input of `capeval train vcrscore` / `capeval score vcrscore --from-features`) and `detected_objects`.
""" + evaluate_module.init_options_description("vcrscore") + """
Returns:
    vcrscore (`float`): corpus mean; vcrscore_per_sample (`list` of `float`);
    word_precision, vilt_logit, mcip_refclip_s (`float`): feature means, with their `*_per_sample` lists;
    truncated_texts (`int`): captions over 39 ViLT tokens (truncated, as officially);
    clip_truncated_texts (`int`): texts over 77 CLIP tokens (truncated, as officially).
Examples:
    >>> import evaluate
    >>> from PIL import Image
    >>> vcrscore = evaluate.load("capeval/vcrscore")
    >>> image = Image.new("RGB", (64, 48), "blue")
    >>> result = vcrscore.compute(predictions=["a blueberry cake on a plate"], images=[image],
    ...                           references=[["a large piece of blueberry cake on a plate"]], return_features=True)
    >>> result["vcrscore"]  # the regressor's output; the digits depend on the weights
    0...
    >>> result["features"][0] == [result["word_precision"], result["vilt_logit"], result["mcip_refclip_s"]]
    True
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class VCRScore(evaluate_module.CaptionMetric):
    scorer_name = "vcrscore"

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=evaluate_module.caption_features(images=True, references=True),
            codebase_urls=["https://github.com/ResearchInfoGeo/VCRScore"],
            reference_urls=["https://arxiv.org/abs/2501.09155"],
        )
