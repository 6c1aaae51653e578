"""FLEUR (Lee et al., ACL 2024) as an evaluate metric, backed by capeval."""

import evaluate

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module

_CITATION = """\
@inproceedings{lee2024fleur,
  title={{FLEUR}: An Explainable Reference-Free Evaluation Metric for Image Captioning Using a Large Multimodal
         Model},
  author={Lee, Yebin and Park, Imseong and Kang, Myungjoo},
  booktitle={Proceedings of the 62nd Annual Meeting of the Association for Computational Linguistics (Volume 1: Long
             Papers)},
  pages={3732--3746},
  address={Bangkok, Thailand},
  year={2024}
}
"""

_DESCRIPTION = """\
FLEUR is a reference-free image-captioning metric: LLaVA-1.5-13B is asked to rate the caption of the image from
0.0 to 1.0 (FLEUR's prompt, greedy answer), and the number it writes is smoothed over the probabilities of the
digit tokens at the number's positions (sum of digit x 0.1 x p(first decimal) + digit x 0.01 x p(second decimal)).
With `explanation=True` the judge also says why (FLEUR's second turn, "Why? Tell me the reason.").
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate captions.
    images (`list`): one image per caption: PIL image, file path, numpy array, or `datasets.Image` dict.
""" + evaluate_module.init_options_description("fleur") + """
Returns:
    fleur (`float`): mean of the defined scores; fleur_per_sample (`list` of `float`, NaN where the answer holds
        no readable number in [0, 1]); fleur_raw, fleur_raw_per_sample: the numbers the judge wrote;
    fleur_texts: the judge's answers; fleur_explanations with `explanation=True`; undefined_scores (`int`).
Examples:
    >>> import evaluate
    >>> from PIL import Image
    >>> fleur = evaluate.load("capeval/fleur", max_new_tokens=16)  # 16 to be quick; official 512
    >>> image = Image.new("RGB", (64, 48), "red")
    >>> result = fleur.compute(predictions=["a red square"], images=[image])
    >>> len(result["fleur_per_sample"]), len(result["fleur_texts"])  # the score lies in [0, 1]
    (1, 1)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Fleur(evaluate_module.CaptionMetric):
    scorer_name = "fleur"

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=evaluate_module.caption_features(images=True, references=False),
            codebase_urls=["https://github.com/Yebin46/FLEUR"],
            reference_urls=["https://aclanthology.org/2024.acl-long.205", "https://arxiv.org/abs/2406.06004"],
        )
