"""The scorer contract, checked the same way over every registered scorer, on the real factories and tiny weights."""

import ast
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

import numpy as np
import pytest
from PIL import Image

import capeval
from capeval import InputError, ModelNotAvailableError
from capeval.core.keys import ScoreKey, score_key
from capeval.core.scoring import Scorer, load_scorer, scorers
from capeval.testing import FAST_TINY_OPTIONS

FAST = FAST_TINY_OPTIONS
NAMES = sorted(scorers())
IMAGES = [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (30, 40), "blue")]
CAPTIONS = ["a red square on a table", "a blue square"]
REFERENCES = [["a red picture", "red"], ["a blue picture"]]


@pytest.fixture(scope="module")
def built(tiny_hub):
    cache = {}

    def get(name):
        if name not in cache:
            options = dict(FAST.get(name, {}))
            if name == "cider_fixed_idf":
                from capeval.text.fixed_idf_cider import build_document_frequencies

                options["idf"] = build_document_frequencies(REFERENCES)
            cache[name] = load_scorer(name, device="cpu", **options)
        return cache[name]

    return get


def _inputs(spec, *, images=True, references=True):
    return {"images": IMAGES if images and spec.images != "unused" else None,
            "references": REFERENCES if references and spec.references != "unused" else None}


@pytest.mark.parametrize("name", NAMES)
def test_declared_options_are_exactly_the_factory_keywords(name):
    spec = scorers()[name]
    parameters = inspect.signature(spec.load_factory()).parameters.values()
    assert not any(p.kind is p.VAR_KEYWORD for p in parameters), "a factory takes no **options: declare them"
    assert set(spec.options) == {p.name for p in parameters}
    assert {"device", "dtype", "batch_size"} <= set(spec.options)


@pytest.mark.parametrize("name", NAMES)
def test_every_option_declares_the_values_it_takes(name):
    """Each option's annotation states its values once (capeval.core.option_types), something the one check can
    read and more than Any; its default is one of them; the shared options keep their shared declarations."""
    from capeval.core.option_types import BatchSize, Device, Dtype, Precision, describe, is_checkable, value_problem
    from capeval.core.scoring import REQUIRED, UNDECLARED

    for option in scorers()[name].option_list():
        assert option.declared is not UNDECLARED, f"{name}: option {option.name} has no annotation"
        assert is_checkable(option.declared), f"{name}: {option.name}: {option.declared!r} states no values"
        assert option.values == describe(option.declared) != ""
        if option.default is not REQUIRED:
            assert value_problem(option.declared, option.default) is None, (name, option.name, option.default)
    declared = scorers()[name].declarations()
    for option, shared in (("device", Device), ("dtype", Dtype), ("batch_size", BatchSize), ("precision", Precision)):
        if option in declared:
            assert declared[option] in (shared, Optional[shared]), (name, option, declared[option])


@pytest.mark.parametrize("name", NAMES)
def test_a_value_outside_any_option_declaration_is_refused_by_load_scorer(name, empty_weights_cache):
    """A bare object (no option takes one) for each option: an InputError naming the scorer, the option and the
    value, raised by the declarations' check before the factory runs (a factory would fail otherwise: no weights)."""
    from capeval.core.scoring import REQUIRED

    spec = scorers()[name]
    for option in spec.option_list():
        bad = object()
        required = {o.name: "x" for o in spec.option_list() if o.default is REQUIRED and o.name != option.name}
        with pytest.raises(InputError) as error:
            load_scorer(name, **required, **{option.name: bad})
        message = str(error.value)
        assert message.startswith(f"{name}: {option.name}") and repr(bad) in message, message


@pytest.mark.parametrize("name", NAMES)
def test_every_scorer_class_declares_its_keys_metadata(name):
    """Title, scale and direction of every key, stated on the class (``key_metadata``, capeval.core.keys)."""
    declared = scorers()[name].scorer_class().key_metadata
    assert len(declared) > 0, f"{name}: its scorer class declares no key_metadata"
    for key, metadata in declared.items():
        assert isinstance(key, str) and isinstance(metadata, ScoreKey), (name, key)


@pytest.mark.parametrize("name", NAMES)
def test_unknown_options_are_an_error(name):
    with pytest.raises(InputError, match=rf"{name}: unknown option\(s\) \['no_such_option'\]"):
        load_scorer(name, no_such_option=1)


@pytest.mark.parametrize("name", [n for n in NAMES if scorers()[n].shares])
def test_shared_backbones_name_the_weights_the_scorer_would_load(name, tiny_hub):
    spec = scorers()[name]
    for option in spec.shares:
        assert option in spec.options
    assert isinstance(spec.shared_weights({}), str)


@pytest.mark.parametrize("name", NAMES)
def test_every_scorer_validates_before_any_model_call(name, built, forwards):
    spec, scorer = scorers()[name], built(name)
    assert isinstance(scorer, Scorer)
    assert (scorer.images, scorer.references) == (spec.images, spec.references)
    forwards.clear()
    # the default policy ("score") refuses an empty caption where the scorer does not score it; "error" everywhere
    for policy in ({"empty_caption": "error"}, {}) if not scorer.scores_empty_text else ({"empty_caption": "error"},):
        with pytest.raises(InputError, match=r"predictions\[1\] is an empty caption"):
            scorer.score(["fine", " "], **_inputs(spec), **policy)
    with pytest.raises(InputError, match="mismatched lengths|got 1 predictions but 2"):
        scorer.score(CAPTIONS[:1], **_inputs(spec))
    if spec.references != "unused":
        with pytest.raises(InputError, match=r"references\[1\]\[0\] is an int \(7\)"):
            scorer.score(CAPTIONS, **{**_inputs(spec), "references": [["ok"], [7]]})
    for field, need in (("images", spec.images), ("references", spec.references)):
        given = {**_inputs(spec), field: None}
        if need == "required":
            with pytest.raises(InputError, match=f"needs ({'one image' if field == 'images' else field}|{field} for)"):
                scorer.score(CAPTIONS, **given)
        if need == "unused":
            with pytest.raises(InputError, match=f"takes no {field}"):
                scorer.score(CAPTIONS, **{**given, field: IMAGES if field == "images" else REFERENCES})
    if spec.images != "unused":
        with pytest.raises(InputError, match=r"images\[1\]: image file not found"):
            scorer.score(CAPTIONS, **{**_inputs(spec), "images": [IMAGES[0], "/no/such/image.png"]})
    assert forwards == []


@pytest.mark.parametrize("name", NAMES)
def test_every_scorer_returns_per_sample_lists_and_their_means(name, built):
    spec, scorer = scorers()[name], built(name)
    announced = scorer.score_keys(scorer.validate(CAPTIONS, **_inputs(spec)))
    assert all(isinstance(score_key(scorer, key), ScoreKey) for key in announced)  # every key has its metadata
    if name == "spice":
        with pytest.raises(ModelNotAvailableError, match="CoreNLP"):
            scorer.score(CAPTIONS, **_inputs(spec))
        return
    result = scorer.score(CAPTIONS, **_inputs(spec))
    keys = [k[: -len("_per_sample")] for k in result if k.endswith("_per_sample")]
    assert keys and all(len(result[f"{k}_per_sample"]) == 2 for k in keys)
    assert set(keys) == set(announced)
    assert all(isinstance(score_key(scorer, key), ScoreKey) for key in keys)
    for key in keys:
        values = result[f"{key}_per_sample"]
        assert all(isinstance(v, float) for v in values)
        if not spec.is_corpus_level({}) and all(v == v for v in values):  # corpus values: pycocoevalcap's own
            assert result[key] == pytest.approx(sum(values) / 2)
    if spec.references == "optional":  # reference-free scores do not change when references are given
        free = scorer.score(CAPTIONS, **_inputs(spec, references=False))
        assert free[name] == pytest.approx(result[name], abs=1e-6)
    for key, records in scorer.detail_keys.items():  # one record per sample, beside the key's values
        assert key in announced and len(result[records]) == 2, (name, key)
        assert all(isinstance(record, Mapping) for record in result[records]), (name, key)


@pytest.mark.parametrize("name", [name for name in NAMES if scorers()[name].scorer_class().detail_keys])
def test_score_systems_gives_each_system_its_own_detail_records(name, built):
    """The default score_systems (one call for every system) splits a declared detail key's records by system:
    each system's records are those of the scorer on its captions alone (records that differ by system, on hand-written
    parses: tests/suite/test_details_flow.py)."""
    spec, scorer = scorers()[name], built(name)
    inputs = scorer.validate(CAPTIONS, **_inputs(spec))
    other = ["a blue square on a red table", "a red square"]
    by_system = scorer.score_systems([CAPTIONS, other], inputs.images, inputs.references)
    for captions, scores in zip([CAPTIONS, other], by_system):
        alone = scorer.score(captions, **_inputs(spec))
        for key, records in scorer.detail_keys.items():
            assert scores[key].details == alone[records] and scores[key].per_sample == alone[f"{key}_per_sample"]


EMPTY_AT = [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (36, 36), "green"), Image.new("RGB", (30, 40), "blue")]
WITH_EMPTY = ["a red square on a table", "  ", "a blue square"]
REFERENCES_3 = [["a red picture", "red"], ["a green picture"], ["a blue picture"]]


def _three(spec):
    return {"images": EMPTY_AT if spec.images != "unused" else None,
            "references": REFERENCES_3 if spec.references != "unused" else None}


def _kept(spec):
    return {k: None if v is None else [v[0], v[2]] for k, v in _three(spec).items()}


@pytest.mark.parametrize("name", NAMES)
def test_skipped_empty_captions_get_no_score_and_the_rest_is_scored_as_its_own_corpus(name, built):
    spec, scorer = scorers()[name], built(name)
    if name == "spice":
        pytest.skip("SPICE needs the CoreNLP jars")
    refused = {"empty_caption": "error"} if scorer.scores_empty_text else {}  # else the default policy refuses it
    with pytest.raises(InputError, match=r"predictions\[1\] is an empty caption"):
        scorer.score(WITH_EMPTY, **_three(spec), **refused)
    skipped = scorer.score(WITH_EMPTY, **_three(spec), empty_caption="skip")
    alone = scorer.score([WITH_EMPTY[0], WITH_EMPTY[2]], **_kept(spec))
    assert skipped["skipped_empty_captions"] == 1
    for key, value in alone.items():
        if key.endswith("_per_sample"):
            assert skipped[key] == [value[0], None, value[1]]
        elif isinstance(value, float):  # corpus values (BLEU's, CIDEr's IDF) of the non-empty captions
            assert skipped[key] == value or (value != value and skipped[key] != skipped[key])


@pytest.mark.parametrize("name", NAMES)
def test_a_fixed_empty_caption_score_counts_in_the_means_and_is_refused_by_corpus_level_scorers(name, built):
    spec, scorer = scorers()[name], built(name)
    if spec.is_corpus_level({}):
        with pytest.raises(InputError, match=f"{name} is corpus-level.*empty_caption='skip'"):
            scorer.score(WITH_EMPTY, **_three(spec), empty_caption=0.0)
        return
    if name == "spice":
        pytest.skip("SPICE needs the CoreNLP jars")
    fixed = scorer.score(WITH_EMPTY, **_three(spec), empty_caption=-1)
    alone = scorer.score([WITH_EMPTY[0], WITH_EMPTY[2]], **_kept(spec))
    assert fixed["empty_captions"] == 1
    for key, value in alone.items():
        if key.endswith("_per_sample"):
            column = [value[0], -1.0, value[1]]
            assert fixed[key] == column
            mean = fixed[key[: -len("_per_sample")]]
            own = alone[key[: -len("_per_sample")]]
            if own == own:  # a defined mean counts the fixed score (HICE-S's local terms leave NaN values out)
                assert mean == pytest.approx(np.mean([v for v in column if v == v]), abs=0, rel=1e-12)
                assert np.isfinite(mean)


@pytest.mark.parametrize("policy", [float("nan"), float("inf"), True, "zero", None, "Skip"])
def test_empty_caption_policy_must_be_error_skip_or_a_finite_score(policy, built):
    with pytest.raises(InputError, match="empty_caption must be 'score', 'error', 'skip' or a finite score"):
        built("rouge_l").score(WITH_EMPTY, references=REFERENCES_3, empty_caption=policy)


def test_skipped_samples_are_still_validated_and_all_empty_scores_nothing(built):
    scorer = built("clip_s")
    with pytest.raises(InputError, match=r"images\[1\]: image file not found"):
        scorer.score(WITH_EMPTY, images=[EMPTY_AT[0], "/no/such/image.png", EMPTY_AT[2]], empty_caption="skip")
    with pytest.raises(InputError, match=r"references\[1\] is an empty reference list"):
        scorer.score(WITH_EMPTY, images=EMPTY_AT, references=[["a"], [], ["b"]], empty_caption=0)
    nothing = scorer.score(["", " "], images=EMPTY_AT[:2], empty_caption="skip")  # no score, in every score column
    rest = {k: v for k, v in nothing.items() if k not in ("provenance", "hashcode")}
    assert rest == {"clip_s": None, "clip_s_per_sample": [None, None], "skipped_empty_captions": 2}


# The contract states itself (capeval.core.scoring.Scorer's docstring): what a scorer must define, what it may
# declare and the defaults; every capability is declared, none discovered.
CAPABILITIES = ("corpus_level", "corpus_level_of", "states_corpus_statistics", "text_rule", "clip_weights_of",
                "provenance_parts", "scores_empty_text", "mean_over_defined", "detail_keys", "score_keys",
                "score_systems", "components", "compose", "composed_provenance", "check_text")
# the attributes scorers keep their models under: a model is described because its scorer names it (provenance_parts)
MODEL_ATTRIBUTES = ("backbone", "clip", "extractor")
PACKAGE = Path(capeval.__file__).parent
# the modules that read scorers' declarations: here not even a hasattr on anything
READERS = ("core/scoring.py", "core/provenance.py", "suite")


def test_every_scorer_class_declares_what_it_must_and_types_what_it_may():
    """Musts: ``_score`` (the class is not abstract) and ``key_metadata``; each optional capability of its declared
    type; ``states_corpus_statistics`` exactly when the class states its own ``score_systems`` (and every member of a
    group, scored with its peers, states it)."""
    for name, spec in scorers().items():
        cls = spec.scorer_class()
        assert issubclass(cls, Scorer) and not inspect.isabstract(cls), f"{name}: {cls.__name__} defines no _score"
        assert isinstance(cls.key_metadata, Mapping) and cls.key_metadata, f"{name}: no key_metadata"
        for flag in ("corpus_level", "states_corpus_statistics", "scores_empty_text"):
            assert isinstance(getattr(cls, flag), bool), (name, flag)
        assert isinstance(cls.corpus_level_of({}), bool) and isinstance(spec.is_corpus_level({}), bool), name
        assert cls.text_rule is None or callable(cls.text_rule), name
        assert isinstance(cls.mean_over_defined, tuple) and set(cls.mean_over_defined) <= set(cls.key_metadata), name
        assert isinstance(cls.detail_keys, Mapping) and set(cls.detail_keys) <= set(cls.key_metadata), name
        assert all(isinstance(records, str) and records for records in cls.detail_keys.values()), name
        assert cls.states_corpus_statistics is (cls.score_systems is not Scorer.score_systems), (
            f"{name}: states_corpus_statistics declares that its scorer states its own score_systems")
        if spec.group is not None:
            assert cls.states_corpus_statistics, f"{name} is scored with its group's peers: it states score_systems"


def test_every_scorer_class_summarises_its_keys_as_it_declares():
    """A suite summarises each key with the class's ``key_scores``, which reads ``mean_over_defined`` on the class:
    a key declared there averages over its defined samples (a judge's unreadable answers left out), any other is
    NaN when a sample is."""
    for name, spec in scorers().items():
        cls = spec.scorer_class()
        for key in cls.key_metadata:
            mean = cls.key_scores(key, [0.5, float("nan"), 1.0]).corpus
            assert mean == 0.75 if key in cls.mean_over_defined else mean != mean, (name, key, mean)


@pytest.mark.parametrize("name", NAMES)
def test_a_built_scorer_states_its_musts_corpus_level_and_provenance_parts(name, built):
    """A loaded scorer's name and needs (its registration's), its corpus level (what its registry entry answers for
    its options), and the parts its provenance describes: itself first, then the models it wraps."""
    spec, scorer = scorers()[name], built(name)
    assert isinstance(scorer.name, str) and scorer.name, name
    assert (scorer.images, scorer.references) == (spec.images, spec.references)
    assert isinstance(scorer.corpus_level, bool) and scorer.corpus_level is spec.is_corpus_level(FAST.get(name, {}))
    parts = scorer.provenance_parts()
    assert parts[0] is scorer and all(part is not None for part in parts)
    assert isinstance(scorer.provenance_extras(), Mapping)


def _modules():
    for module in sorted(PACKAGE.rglob("*.py")):
        relative = module.relative_to(PACKAGE).as_posix()
        yield relative, relative.startswith(READERS), ast.parse(module.read_text(encoding="utf-8"))


def test_no_capability_of_a_scorer_is_discovered():
    """Nowhere in the package is a scorer's capability found by ``hasattr``/``getattr`` of a contract name or of a
    model attribute, or by method identity (``is Scorer.x``, ``__func__``); and the modules that read the declarations
    call no ``hasattr`` at all and name no model attribute (a scorer names its models: ``provenance_parts``)."""
    found = []
    for module, reader, tree in _modules():
        for node in ast.walk(tree):
            where = f"{module}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr",
                                                                                                   "getattr"):
                named = node.args[1] if len(node.args) > 1 else None
                if isinstance(named, ast.Constant) and named.value in (*CAPABILITIES, *MODEL_ATTRIBUTES):
                    found.append(f"{where}: {node.func.id}(..., {named.value!r})")
                elif reader and node.func.id == "hasattr":
                    found.append(f"{where}: hasattr in a module that reads scorers' declarations")
            if reader and isinstance(node, ast.Constant) and node.value in MODEL_ATTRIBUTES:
                found.append(f"{where}: a wrapped model found by its attribute name {node.value!r}")
            if isinstance(node, ast.Attribute) and node.attr == "__func__":
                found.append(f"{where}: method identity (__func__)")
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
                operands = [node.left, *node.comparators]
                if any(isinstance(o, ast.Attribute) and isinstance(o.value, ast.Name) and o.value.id == "Scorer"
                       for o in operands):
                    found.append(f"{where}: method identity (is Scorer.…)")
    assert not found, "capabilities are declared on the scorer class (Scorer's contract), not discovered:\n" + \
        "\n".join(found)


def test_one_is_corpus_level():
    """One definition, the registry entry's (ScorerSpec.is_corpus_level); a loaded scorer says it as corpus_level."""
    definitions = []
    for module, _, tree in _modules():
        owners = {id(node): cls.name for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) for node in cls.body}
        definitions += [(module, owners.get(id(node), "<function>")) for node in ast.walk(tree)
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "is_corpus_level"]
    assert definitions == [("core/scoring.py", "ScorerSpec")], definitions
