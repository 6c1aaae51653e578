"""Text-only metrics: pycocoevalcap BLEU/METEOR/ROUGE-L/CIDEr/SPICE and spaCy noun/verb overlap scorers."""

from capeval.scoring import register_scorer


def _coco(metric: str, help: str, corpus_level: bool):
    @register_scorer(metric, needs_images=False, needs_references=True, help=help, corpus_level=corpus_level)
    def factory(**options):
        from capeval.scorers.coco_text import CocoCaptionScorer

        return CocoCaptionScorer(metric, **options)

    return factory


_coco("bleu", "BLEU-1..4 (pycocoevalcap, PTB-tokenised; corpus values are pycocoevalcap's)", True)
_coco("meteor", "METEOR 1.5 (pycocoevalcap; Java)", True)
_coco("rouge_l", "ROUGE-L (pycocoevalcap)", False)
_coco("cider", "CIDEr-D (pycocoevalcap; IDF over the scored corpus)", True)
_coco("spice", "SPICE (pycocoevalcap; needs Stanford CoreNLP jars)", False)


@register_scorer("noun_verb_overlap", needs_images=False, needs_references=True,
                 help="exact/fuzzy noun and verb overlap with the joined references (spaCy)")
def noun_verb_overlap(**options):
    from capeval.scorers.coco_text import NounVerbOverlapScorer

    options = {k: v for k, v in options.items() if k in ("spacy_model", "batch_size")}
    return NounVerbOverlapScorer(**options)
