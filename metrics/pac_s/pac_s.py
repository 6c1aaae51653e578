"""PAC-S and RefPAC-S (Sarto et al., 2023) as an evaluate metric, backed by capeval."""

import evaluate

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module

_CITATION = """\
@inproceedings{sarto2023positive,
  title={Positive-Augmented Contrastive Learning for Image and Video Captioning Evaluation},
  author={Sarto, Sara and Barraco, Manuele and Cornia, Marcella and Baraldi, Lorenzo and Cucchiara, Rita},
  booktitle={CVPR},
  year={2023}
}
"""

_DESCRIPTION = """\
PAC-S is CLIP-S computed with the positive-augmented contrastive CLIP ViT-B/32 of Sarto et al. and w = 2.0:
2.0 * max(cos(PAC-CLIP(image), PAC-CLIP("A photo depicts " + caption)), 0), in float32. With references,
RefPAC-S is the harmonic mean of PAC-S and the maximum (unclipped, unscaled) candidate-reference cosine.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate captions.
    images (`list`): one image per caption: PIL image, file path, numpy array, or `datasets.Image` dict.
    references (`list` of `list` of `str`, optional): references per caption (any number, at least one);
        when given, RefPAC-S is returned too.
""" + evaluate_module.init_options_description("pac_s") + """
Returns:
    pac_s (`float`): corpus mean; pac_s_per_sample (`list` of `float`);
    refpac_s, refpac_s_per_sample: when references are given;
    truncated_texts (`int`): texts longer than 77 CLIP tokens (truncated, with a warning).
Examples:
    >>> import evaluate
    >>> from PIL import Image
    >>> pac_s = evaluate.load("capeval/pac_s")
    >>> image = Image.new("RGB", (64, 48), "red")
    >>> result = pac_s.compute(predictions=["a red square"], images=[image],
    ...                        references=[["a red image", "red"]])
    >>> result["pac_s"]  # PAC-S lies in [0, 2]; the digits depend on the weights
    0...
    >>> len(result["refpac_s_per_sample"]), result["truncated_texts"]
    (1, 0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class PacS(evaluate_module.CaptionMetric):
    scorer_name = "pac_s"

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=evaluate_module.caption_features(images=True, references=True),
            codebase_urls=["https://github.com/aimagelab/pacscore"],
            reference_urls=["https://arxiv.org/abs/2303.12112"],
        )
