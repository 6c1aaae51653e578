"""EnsembEval (Berger et al., 2025): a learned linear ensemble of caption metrics, as an evaluate metric."""

import evaluate

# Import the module, not its classes: evaluate picks the first Metric subclass in this file's namespace.
from capeval import evaluate_module

_CITATION = """\
@article{berger2025surveying,
  title={Surveying the Landscape of Image Captioning Evaluation: A Comprehensive Taxonomy, Trends and Metrics Analysis},
  author={Berger, Uri and Stanovsky, Gabriel and Abend, Omri and Frermann, Lea},
  journal={arXiv preprint arXiv:2408.04909},
  year={2025}
}
"""

_DESCRIPTION = """\
EnsembEval scores a caption as a weighted sum of nine metrics, with the official weights fitted on Polaris:
0.827 BLIP2Score + 0.623 Polos + 0.291 PAC-S - 0.160 RefCLIP-S + 0.076 exact noun overlap - 0.072 ROUGE-L
+ 0.067 BLEU-1 - 0.022 CIDEr + 0.019 fuzzy verb overlap (no intercept, no rescaling of the components).
Every component's per-sample score is returned beside the ensemble. Weights refitted with
`capeval train ensembeval` (optionally with your own metrics) load with `weights=<folder or JSON file>`.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): candidate captions.
    images (`list`): one image per caption: PIL image, file path, numpy array, or `datasets.Image` dict.
    references (`list` of `list` of `str`): references per caption (at least one each; the official
        weights include reference-based components).
""" + evaluate_module.init_options_description("ensembeval") + """
Returns:
    ensembeval (`float`): corpus mean; ensembeval_per_sample (`list` of `float`);
    for every component k (blip2_score, polos, pac_s, refclip_s, exact_noun_overlap, rouge_l, bleu_1, cider,
    fuzzy_verb_overlap with the official weights): k (corpus mean) and k_per_sample.
Examples:
    >>> import evaluate
    >>> from PIL import Image
    >>> ensembeval = evaluate.load("capeval/ensembeval")
    >>> image = Image.new("RGB", (64, 48), "red")
    >>> result = ensembeval.compute(predictions=["a red square"], images=[image],
    ...                             references=[["a red image", "red"]])
    >>> round(result["bleu_1"], 4), round(result["rouge_l"], 4)  # model-free components: exact
    (0.6667, 0.8299)
    >>> round(result["ensembeval"], 4) == round(sum(w * result[k] for k, w in [  # the official weights
    ...     ("blip2_score", 0.8274333922692476), ("polos", 0.6228690619075461), ("pac_s", 0.291263618044046),
    ...     ("refclip_s", -0.16006389033030913), ("exact_noun_overlap", 0.07592364139733229),
    ...     ("rouge_l", -0.0724533563543587), ("bleu_1", 0.06679993033857672),
    ...     ("cider", -0.021775644060801347), ("fuzzy_verb_overlap", 0.01857124581057623)]), 4)
    True
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class EnsembEval(evaluate_module.CaptionMetric):
    scorer_name = "ensembeval"

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=evaluate_module.caption_features(images=True, references=True),
            codebase_urls=["https://github.com/uriberger/caption_evaluation"],
            reference_urls=["https://arxiv.org/abs/2408.04909"],
        )
