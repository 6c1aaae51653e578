"""EnsembEval registration: the ``ensembeval`` scorer and the ``capeval train ensembeval`` / ``cider-idf`` trainers."""

from __future__ import annotations

from capeval.core.module_card import ModuleCard
from capeval.core.scoring import register_scorer
from capeval.core.training import register_trainer

ENSEMBEVAL_CARD = ModuleCard(
    description="""\
EnsembEval scores a caption as a weighted sum of nine metrics, with the official weights fitted on Polaris:
0.827 BLIP2Score + 0.623 Polos + 0.291 PAC-S - 0.160 RefCLIP-S + 0.076 exact noun overlap - 0.072 ROUGE-L
+ 0.067 BLEU-1 - 0.022 CIDEr + 0.019 fuzzy verb overlap (no intercept, no rescaling of the components).
Every component's per-sample score is returned beside the ensemble. Weights refitted with
`capeval train ensembeval` (optionally with your own metrics) load with `weights=<folder or JSON file>`.
""",
    citation="""\
@article{berger2025surveying,
  title={Surveying the Landscape of Image Captioning Evaluation: A Comprehensive Taxonomy, Trends and Metrics Analysis},
  author={Berger, Uri and Stanovsky, Gabriel and Abend, Omri and Frermann, Lea},
  journal={arXiv preprint arXiv:2408.04909},
  year={2025}
}
""",
    returns="""\
ensembeval (`float`): corpus mean; ensembeval_per_sample (`list` of `float`);
for every component k (blip2_score, polos, pac_s, refclip_s, exact_noun_overlap, rouge_l, bleu_1, cider,
fuzzy_verb_overlap with the official weights): k (corpus mean) and k_per_sample.
""",
    examples="""\
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
""",
    references_note="the official weights include reference-based components.",
    codebase_urls=("https://github.com/uriberger/caption_evaluation",),
    reference_urls=("https://arxiv.org/abs/2408.04909",),
)
register_scorer("ensembeval", factory="capeval.ensembeval.scorer:EnsembleScorer", images="required",
                references="required",
                option_help={
                    "weights": "'official', a weights JSON written by `capeval train ensembeval`, its folder, or a "
                               "hub repo holding ensembeval_weights.json",
                    "component_options": "per component scorer, its own options ({'polos': {'statistics': 'batch'}})",
                    "extra_components": "more components: name -> scorer or fn(predictions, images, references)",
                    "cider_idf": "fixed CIDEr document frequencies (folder of `capeval train cider-idf`): CIDEr, "
                                 "and so EnsembEval, no longer depends on the scored corpus"},
                help="EnsembEval: weighted sum of caption metrics (Berger et al. 2025) with every component",
                card=ENSEMBEVAL_CARD)
register_trainer("ensembeval", configure="capeval.ensembeval.fit:configure_fit", run="capeval.ensembeval.fit:run_fit_command",
                 help="refit EnsembEval weights (forward feature selection + linear regression) on cached scores")
register_trainer("cider-idf", configure="capeval.ensembeval.fit:configure_idf", run="capeval.ensembeval.fit:run_idf_command",
                 help="build fixed CIDEr document frequencies from a reference corpus (for cider_fixed_idf)")
