"""EXPERT (Kim et al., Findings of ACL 2025) as an evaluate metric, backed by capeval."""

import evaluate

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module

_CITATION = """\
@inproceedings{kim2025expert,
  title={{EXPERT}: An Explainable Image Captioning Evaluation Metric with Structured Explanations},
  author={Kim, Hyunjong and Kim, Sangyeop and Jeong, Jongheon and Cho, Yeongjae and Cho, Sungzoon},
  booktitle={Findings of the Association for Computational Linguistics: ACL 2025},
  year={2025}
}
"""

_DESCRIPTION = """\
EXPERT is a reference-free image-captioning metric: LLaVA-1.5-13B fine-tuned with the authors' LoRA adapter is asked
to score the caption of the image from 0.0 to 1.0 (EXPERT's prompt, greedy answer), and the number it writes is
smoothed over the probabilities of the digit tokens at the number's positions (FLEUR's smoothing). With
`explanation=True` the judge also explains the score along three criteria: fluency, relevance, descriptiveness.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate captions.
    images (`list`): one image per caption: PIL image, file path, numpy array, or `datasets.Image` dict.
""" + evaluate_module.init_options_description("expert") + """
Returns:
    expert (`float`): mean of the defined scores; expert_per_sample (`list` of `float`, NaN where the answer holds
        no readable number in [0, 1]); expert_raw, expert_raw_per_sample: the numbers the judge wrote;
    expert_texts: the judge's answers; with `explanation=True` expert_explanations (the texts) and expert_criteria
        ({"fluency", "relevance", "descriptiveness"}, None where the text has not the official format);
    undefined_scores (`int`).
Examples:
    >>> import evaluate
    >>> from PIL import Image
    >>> expert = evaluate.load("capeval/expert", max_new_tokens=16)  # 16 to be quick; official 512
    >>> image = Image.new("RGB", (64, 48), "red")
    >>> result = expert.compute(predictions=["a red square"], images=[image])
    >>> len(result["expert_per_sample"]), len(result["expert_texts"])  # the score lies in [0, 1]
    (1, 1)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Expert(evaluate_module.CaptionMetric):
    scorer_name = "expert"

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=evaluate_module.caption_features(images=True, references=False),
            codebase_urls=["https://github.com/hjkim811/EXPERT"],
            reference_urls=["https://arxiv.org/abs/2506.24016"],
        )
