"""Polos (Wada et al., CVPR 2024) as an evaluate metric, backed by capeval."""

import evaluate

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module

_CITATION = """\
@inproceedings{wada2024polos,
  title={{Polos}: Multimodal Metric Learning from Human Feedback for Image Captioning},
  author={Wada, Yuiga and Kaneda, Kanta and Saito, Daichi and Sugiura, Komei},
  booktitle={CVPR},
  year={2024}
}
"""

_DESCRIPTION = """\
Polos is a supervised caption metric: CLIP ViT-B/32 image/text features ("A photo depicts " + text, not
normalised) and SimCSE-RoBERTa sentence features (a layer-normalised scalar mix of all 13 hidden states, first
position) are combined per reference into a 6144-dim vector, an MLP with a sigmoid maps it to [0, 1], and the
score is the maximum over the references.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate captions.
    images (`list`): one image per caption (PIL image, path, numpy array or `datasets.Image` dict).
    references (`list` of `list` of `str`): at least one reference per caption; all are used.
""" + evaluate_module.init_options_description("polos") + """
Returns:
    polos (`float`): corpus mean; polos_per_sample (`list` of `float`, each in [0, 1]);
    truncated_texts (`int`): texts over 512 SimCSE tokens (truncated, with a warning);
    clip_truncated_texts (`int`): texts over 77 CLIP tokens (truncated, as the official code does).
Examples:
    >>> import evaluate
    >>> from PIL import Image
    >>> polos = evaluate.load("capeval/polos")
    >>> image = Image.new("RGB", (64, 48), "green")
    >>> result = polos.compute(predictions=["a green field"], images=[image],
    ...                        references=[["a green lawn", "grass"]])
    >>> result["polos"]  # in [0, 1]; the digits depend on the weights
    0...
    >>> result["polos_per_sample"] == [result["polos"]], result["truncated_texts"]
    (True, 0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Polos(evaluate_module.CaptionMetric):
    scorer_name = "polos"

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=evaluate_module.caption_features(images=True, references=True),
            codebase_urls=["https://github.com/keio-smilab24/Polos"],
            reference_urls=["https://arxiv.org/abs/2402.18091"],
        )
