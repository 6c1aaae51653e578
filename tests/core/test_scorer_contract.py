"""The scorer contract, checked the same way over every registered scorer, on the real factories and tiny weights."""

import inspect

import pytest
from PIL import Image

from capeval import InputError, ModelNotAvailableError
from capeval.core.scoring import Scorer, import_attr, load_scorer, scorers

# fast settings of the slow tiny pipelines (options every scorer declares anyway)
FAST = {
    "hice_s": {"phrase_parser": "spacy", "region_settings": {"points_per_side": 4, "pred_iou_thresh": 0.0,
                                                             "stability_score_thresh": 0.0, "max_regions": 3}},
    "image_roundtrip": {"steps": 1, "height": 32, "width": 32, "use_image_cache": False},
}
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
def test_unknown_options_are_an_error(name):
    with pytest.raises(InputError, match=rf"{name}: unknown option\(s\) \['no_such_option'\]"):
        load_scorer(name, no_such_option=1)


@pytest.mark.parametrize("name", [n for n in NAMES if scorers()[n].shares])
def test_shared_backbones_name_the_weights_the_scorer_would_load(name, tiny_hub):
    spec = scorers()[name]
    for option, weights_of in spec.shares:
        assert option in spec.options
        assert isinstance(import_attr(weights_of)({}), str)


@pytest.mark.parametrize("name", NAMES)
def test_every_scorer_validates_before_any_model_call(name, built, forwards):
    spec, scorer = scorers()[name], built(name)
    assert isinstance(scorer, Scorer)
    assert (scorer.images, scorer.references) == (spec.images, spec.references)
    forwards.clear()
    with pytest.raises(InputError, match=r"predictions\[1\] is an empty caption"):
        scorer.score(["fine", " "], **_inputs(spec))
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
    if name == "spice":
        with pytest.raises(ModelNotAvailableError, match="CoreNLP"):
            scorer.score(CAPTIONS, **_inputs(spec))
        return
    result = scorer.score(CAPTIONS, **_inputs(spec))
    keys = [k[: -len("_per_sample")] for k in result if k.endswith("_per_sample")]
    assert keys and all(len(result[f"{k}_per_sample"]) == 2 for k in keys)
    for key in keys:
        values = result[f"{key}_per_sample"]
        assert all(isinstance(v, float) for v in values)
        if not spec.is_corpus_level({}) and all(v == v for v in values):  # corpus values: pycocoevalcap's own
            assert result[key] == pytest.approx(sum(values) / 2)
    if spec.references == "optional":  # reference-free scores do not change when references are given
        free = scorer.score(CAPTIONS, **_inputs(spec, references=False))
        assert free[name] == pytest.approx(result[name], abs=1e-6)
