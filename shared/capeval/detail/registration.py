"""Detailed-caption scene-graph metrics: the NLTK data and SPICE synonym files they read, their converters, and the
``capture``, ``spice_factual`` and ``soft_spice`` scorers (the FACTUAL parser and all-mpnet-base-v2 are registered by
their own families)."""

from __future__ import annotations

from capeval.core.convert import register_converter
from capeval.core.hub import Upstream, WeightSpec, register
from capeval.core.scoring import register_scorer
from capeval.detail.language import (PUNKT_FILES, PUNKT_WEIGHTS, SPICE_SYNONYM_FILES, SPICE_SYNONYM_WEIGHTS,
                                     TAGGER_FILES, TAGGER_WEIGHTS, WORDNET_FILES, WORDNET_WEIGHTS)

# nltk_data's packages at a fixed commit of its gh-pages branch (index.xml there gives each zip's sha256)
NLTK_DATA_COMMIT = "550b6625bcef1f2abff2ff770a5a0d272c9c6b2a"
NLTK_DATA_URL = f"https://raw.githubusercontent.com/nltk/nltk_data/{NLTK_DATA_COMMIT}/packages"
NLTK_INDEX = f"https://github.com/nltk/nltk_data/blob/{NLTK_DATA_COMMIT}/index.xml"

for _name, _path, _sha256, _files, _converter, _license, _description in (
        (PUNKT_WEIGHTS, "tokenizers/punkt_tab.zip",
         "e57f64187974277726a3417ca6f181ec5403676c717672eef6a748a7b20e0106", PUNKT_FILES, "nltk-tokenizers",
         "not stated in nltk_data's index",
         "NLTK's Punkt sentence tokenizer models (punkt_tab), as nltk.sent_tokenize loads them"),
        (TAGGER_WEIGHTS, "taggers/averaged_perceptron_tagger_eng.zip",
         "6025f530624335c67d6547d44757b357b4e79bae030a0383e9887a92c1718f0b", TAGGER_FILES, "nltk-taggers", "mit",
         "NLTK's English averaged perceptron tagger (JSON), as nltk.pos_tag loads it"),
        (WORDNET_WEIGHTS, "corpora/wordnet.zip",
         "cbda5ea6eef7f36a97a43d4a75f85e07fccbb4f23657d27b4ccbc93e2646ab59", WORDNET_FILES, "nltk-corpora",
         "Princeton WordNet License", "WordNet 3.0, as nltk.corpus.wordnet loads it")):
    register(WeightSpec(
        name=_name, repo_id=f"capeval/{_name}", revision="main", files=_files, format="nltk_data",
        license=_license, source_url=f"{NLTK_DATA_URL}/{_path}", description=_description,
        upstream=Upstream(_path.rsplit("/", 1)[1], _converter, url=f"{NLTK_DATA_URL}/{_path}", sha256=_sha256,
                          page=NLTK_INDEX)))

FACTUAL_WHEEL = "FactualSceneGraph-0.7.3-py3-none-any.whl"
register(WeightSpec(
    name=SPICE_SYNONYM_WEIGHTS, repo_id=f"capeval/{SPICE_SYNONYM_WEIGHTS}", revision="main",
    files=SPICE_SYNONYM_FILES, format="text", license="mit",
    source_url="https://pypi.org/project/FactualSceneGraph/0.7.3/",
    description="SPICE's WordNet synonym dictionary (english.synsets, english.exceptions) as FactualSceneGraph "
                "0.7.3 ships it, read by spice_factual",
    upstream=Upstream(FACTUAL_WHEEL, "factual-spice-synonyms",
                      url=f"https://files.pythonhosted.org/packages/py3/F/FactualSceneGraph/{FACTUAL_WHEEL}",
                      sha256="0b4f7a0d8d32dc056447b45ede7468af857919ddcb851e75744f6f1cfdf1d685",
                      page="https://pypi.org/project/FactualSceneGraph/0.7.3/#files", member="english.synsets",
                      beside=("english.exceptions",))))

for _converter, _subdir in (("nltk-tokenizers", "tokenizers"), ("nltk-taggers", "taggers"),
                            ("nltk-corpora", "corpora")):
    register_converter(_converter, converter=f"capeval.detail.language:convert_nltk_{_subdir}",
                       help=f"an nltk_data package zip of {_subdir}/ (unpacked as NLTK's downloader does)")
register_converter("factual-spice-synonyms", converter="capeval.detail.language:convert_spice_synonyms",
                   help="english.synsets (with english.exceptions beside it) from FactualSceneGraph's wheel")

_CARD = "capeval.detail:module_cards.toml"
register_scorer("capture", factory="capeval.detail.scorer:CaptureScorer", images="unused", references="required",
                help="CAPTURE (Dong et al. 2024): object, attribute and relation F1 of FACTUAL scene graphs, exact, "
                     "WordNet-synonym and all-mpnet-base-v2 soft matching; per sample what was matched, missed and "
                     "invented", card=_CARD)
register_scorer("spice_factual", factory="capeval.detail.scorer:SpiceFactualScorer", images="unused",
                references="required",
                help="SPICE (FACTUAL parser): FactualSceneGraph's SPICE on FACTUAL scene graphs; not the SPICE jar "
                     "(coco's spice)", card=_CARD)
register_scorer("soft_spice", factory="capeval.detail.scorer:SoftSpiceScorer", images="unused",
                references="required",
                help="Soft-SPICE (FACTUAL parser): FactualSceneGraph's embedding-matched SPICE on FACTUAL scene "
                     "graphs (all-mpnet-base-v2); not the SPICE jar", card=_CARD)
