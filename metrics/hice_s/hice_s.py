"""HICE-S / RefHICE-S (Zeng et al., ACM MM 2024) as an evaluate metric, backed by capeval."""

import evaluate

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module

_CITATION = """\
@inproceedings{zeng2024hicescore,
  title={{HICEScore}: A Hierarchical Metric for Image Captioning Evaluation},
  author={Zeng, Zequn and Sun, Jianqiao and Zhang, Hao and Wen, Tiansheng and Su, Yudi and Xie, Yan and
          Wang, Zhengjue and Chen, Bo},
  booktitle={ACM Multimedia},
  year={2024}
}
"""

_DESCRIPTION = """\
HICE-S scores a caption at two levels with Alpha-CLIP: globally (image vs caption, CLIP-S style
w·max(cos, 0)) and locally (segment-everything regions vs the caption's scene-graph phrases: precision over
phrases, recall over regions, harmonic mean). HICE-S = hMean(gITC, lITC). With references, RefHICE-S adds the
global and local text–text terms: hMean(gITC, lITC, gTTC, lTTC). With `return_report=True` each sample also
gets its wrong phrases (precision < 0.5) and unmentioned regions (recall < 0.5).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate captions.
    images (`list`): one image per caption (PIL image, path, numpy array or `datasets.Image` dict).
    references (`list` of `list` of `str`, optional): references per caption; given → RefHICE-S too.
    return_report (`bool`, compute kwarg): add `reports` (per phrase: precision, correct; per region: area,
        bbox, recall, mentioned, best phrase).
""" + evaluate_module.init_options_description("hice_s") + """
Returns:
    hice_s, global_itc, local_itc (`float`) and their `*_per_sample` lists; with references also refhice_s,
    global_ttc, local_ttc; no_phrase_captions, no_region_images (`int`); truncated_texts (`int`: captions,
    references and phrases over Alpha-CLIP's 77 tokens); parser_truncated_texts (`int`: captions and references
    over the phrase parser's input limit, 64 tokens with the prompt for FACTUAL, 0 for spaCy); one warning per call
    when any is truncated; timings (seconds per stage: segmentation, parsing, encoding, scoring).
Examples:
    >>> import evaluate
    >>> from PIL import Image
    >>> hice = evaluate.load("capeval/hice_s", scorer_options={  # quick settings; defaults: FACTUAL, 32×32
    ...     "phrase_parser": "spacy", "region_settings": {"points_per_side": 8}})
    >>> image = Image.new("RGB", (64, 48), "red")
    >>> result = hice.compute(predictions=["a red square"], images=[image],
    ...                       references=[["a red image"]], return_report=True)
    >>> result["hice_s"], result["refhice_s"]  # in [0, 2.5]; the digits depend on the weights
    (..., ...)
    >>> report = result["reports"][0]
    >>> report["caption"], [phrase["phrase"] for phrase in report["phrases"]]
    ('a red square', ['red square'])
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class HiceS(evaluate_module.CaptionMetric):
    scorer_name = "hice_s"

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=evaluate_module.caption_features(images=True, references=True),
            codebase_urls=["https://github.com/joeyz0z/HICE", "https://github.com/SunzeY/AlphaCLIP"],
            reference_urls=["https://arxiv.org/abs/2407.18589"],
        )
