"""A scorer's options are stated once: its factory's signature gives their names and defaults, one help table (shared
options) or its registration (its own) their help; the registry, ``load_scorer``, the evaluate modules and the cards
read them from there. Corpus level and backbone sharing are attributes of the scorer class, not strings."""

import inspect
import re
from pathlib import Path

import pytest

from capeval import InputError
from capeval.core.option_help import OPTION_HELP
from capeval.core.scoring import REQUIRED, Scorer, ScorerSpec, load_scorer, options_markdown, register_scorer, scorers

NAMES = sorted(scorers())
METRICS = Path(__file__).resolve().parents[2] / "metrics"
CARDS = sorted(d.name for d in METRICS.iterdir() if (d / "README.md").is_file())


def test_a_registration_states_no_option_list_and_no_module_strings():
    parameters = inspect.signature(register_scorer).parameters
    assert not {"options", "shares", "corpus_level"} & set(parameters)
    assert not {"options", "shares", "corpus_level"} & {f.name for f in ScorerSpec.__dataclass_fields__.values()}


@pytest.mark.parametrize("name", NAMES)
def test_options_and_defaults_are_the_factory_signature_and_each_has_help(name):
    spec = scorers()[name]
    signature = inspect.signature(spec.load_factory()).parameters
    listed = spec.option_list()
    assert [o.name for o in listed] == list(signature) == list(spec.options)
    for option in listed:
        given = signature[option.name].default
        assert option.default == (REQUIRED if given is inspect.Parameter.empty else given)
        assert option.help and option.help == spec.option_help(option.name)
    assert set(dict(spec.own_option_help)) <= set(spec.options), "help for an option the factory does not take"


@pytest.mark.parametrize("name", NAMES)
def test_factories_are_named_where_they_are_defined(name):
    """``grep "def bleu"`` / ``grep "class BleuScorer"`` finds every factory: none is generated."""
    spec = scorers()[name]
    factory = spec.load_factory()
    attribute = spec.factory.partition(":")[2]
    assert factory.__qualname__ == attribute
    assert re.match(rf"(class|def) {attribute}\b", inspect.getsource(factory).lstrip())
    assert issubclass(spec.scorer_class(), Scorer)


@pytest.mark.parametrize("name", NAMES)
def test_corpus_level_is_the_scorer_class_attribute(name):
    spec = scorers()[name]
    scorer_class = spec.scorer_class()
    expected = scorer_class.corpus_level_of({})  # the class's corpus_level unless its options decide it
    assert isinstance(scorer_class.__dict__.get("corpus_level", False), bool) or name == "ensembeval"
    assert spec.is_corpus_level({}) is expected
    assert spec.is_corpus_level({}) is (name in ("bleu", "meteor", "cider", "ensembeval"))


def test_a_scorer_named_like_another_keeps_its_own_corpus_level():
    """cider_fixed_idf's scorer is named ``cider`` (its key) but, IDF fixed, is not corpus-level: its class says so,
    built directly too (not the registry entry of its name)."""
    from capeval.text.coco import CiderScorer
    from capeval.text.fixed_idf_cider import FixedIdfCiderScorer, build_document_frequencies

    scorer = FixedIdfCiderScorer(idf=build_document_frequencies([["a dog"], ["a cat"]]))
    assert scorer.name == "cider" and scorer.corpus_level is False
    assert CiderScorer().corpus_level is True


@pytest.mark.parametrize("name", [n for n in NAMES if scorers()[n].shares])
def test_shared_backbones_are_factory_options_and_name_the_weights_loaded(name, tiny_hub):
    spec = scorers()[name]
    assert spec.shares == ("clip_backbone",) and "clip_backbone" in spec.options
    weights = spec.shared_weights({})
    assert isinstance(weights, str)
    loaded = [w["ref"] for w in load_scorer(name, device="cpu").provenance["weights"]]
    assert weights in loaded


@pytest.mark.parametrize("name", ["blip2_score", "clip_s", "ensembeval", "pac_s", "polos"])
def test_one_precision_check_refuses_the_same_way_everywhere(name, tiny_hub):
    with pytest.raises(InputError, match=rf"^{name}: precision must be one of \(None, 'official'\), not 'fp16'$"):
        load_scorer(name, device="cpu", precision="fp16")
    with pytest.raises(InputError, match=rf"^{name}: precision='official' sets the dtypes itself: leave dtype unset$"):
        load_scorer(name, device="cpu", precision="official", dtype="float16")


def test_the_precision_check_is_written_once():
    package = Path(__file__).resolve().parents[2] / "shared" / "capeval"
    copies = [str(p.relative_to(package)) for p in package.rglob("*.py")
              if "precision must be" in p.read_text(encoding="utf-8")]
    assert copies == ["core/scoring.py"]


@pytest.mark.parametrize("card", CARDS)
def test_each_card_lists_its_scorer_options_as_the_signature_states_them(card):
    text = (METRICS / card / "README.md").read_text(encoding="utf-8")
    assert options_markdown(card) in text, f"paste print(capeval.core.scoring.options_markdown({card!r})) in the card"


@pytest.mark.parametrize("card", CARDS)
def test_each_evaluate_module_describes_its_scorer_options_from_the_signature(card):
    from capeval.evaluate_module import init_options_description, inputs_description

    module = (METRICS / card / f"{card}.py").read_text(encoding="utf-8")
    assert f'scorer_name = "{card}"' in module  # its info is built from the registration (module_info)
    described = init_options_description(scorers()[card])
    assert described in inputs_description(scorers()[card])
    for option in scorers()[card].option_list():
        assert f"{option.name} (default {option.default!r})" in described or (
            option.default is REQUIRED and f"{option.name} (required)" in described)


def test_an_evaluate_module_passes_only_the_options_given_and_the_scorer_defaults_apply():
    """No second table of defaults in the evaluate modules: blip2_score's batch size is its factory's (32)."""
    import evaluate

    from capeval.evaluate_module import CaptionMetric, caption_features

    class Blip2Module(CaptionMetric):
        scorer_name = "blip2_score"

        def _info(self):
            return evaluate.MetricInfo(description="", citation="", inputs_description="",
                                       features=caption_features(references=False))

    assert Blip2Module().scorer_options == {}
    assert Blip2Module(device="cpu", scorer_options={"cache_bytes": 1}).scorer_options == {"device": "cpu",
                                                                                          "cache_bytes": 1}
