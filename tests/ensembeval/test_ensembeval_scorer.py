"""EnsembEval: the weighted sum with the official weights, component breakdown, shared caches, fixed-IDF CIDEr."""

import json

import numpy as np
import pytest
from PIL import Image

import capeval.core.scoring as scoring
from capeval import InputError
from capeval.core.scoring import ScorerSpec, load_scorer, summarize

# Typed from REFERENCE.md (EnsembEval official weights), not read from the code under test.
OFFICIAL = {"blip2_score": 0.8274333922692476, "polos": 0.6228690619075461, "pac_s": 0.291263618044046,
            "refclip_s": -0.16006389033030913, "exact_noun_overlap": 0.07592364139733229,
            "rouge_l": -0.0724533563543587, "bleu_1": 0.06679993033857672, "cider": -0.021775644060801347,
            "fuzzy_verb_overlap": 0.01857124581057623}
STUB_OUTPUTS = {"blip2_score": ["blip2_score"], "polos": ["polos"], "pac_s": ["pac_s", "refpac_s"],
                "clip_s": ["clip_s", "refclip_s"], "rouge_l": ["rouge_l"], "cider": ["cider"],
                "bleu": ["bleu_1", "bleu_2", "bleu_3", "bleu_4"],
                "noun_verb_overlap": ["exact_noun_overlap", "fuzzy_noun_overlap", "exact_verb_overlap",
                                      "fuzzy_verb_overlap"]}


def _known_value(key, caption):
    return (sum(map(ord, key)) % 17) / 10 + len(caption) / 100


class _StubScorer:
    def __init__(self, keys, calls, **options):
        self.keys, self.calls, self.options = keys, calls, options

    def score(self, predictions, images=None, references=None):
        self.calls.append((self.keys[0], len(predictions), images is not None, references is not None))
        return summarize({k: [_known_value(k, p) for p in predictions] for k in self.keys})


@pytest.fixture
def stub_components(monkeypatch):
    calls = []
    scoring.scorers()  # register the real families first, so that the stubs replace them
    for name, keys in STUB_OUTPUTS.items():
        images = "required" if name in ("blip2_score", "clip_s", "pac_s", "polos") else "unused"
        monkeypatch.setitem(scoring._SCORERS, name, ScorerSpec(name, _stub_factory(keys, calls), images, "optional",
                                                               "stub"))
    return calls


def _stub_factory(keys, calls):
    """A component factory taking the runtime options (its signature states them, as every factory's)."""
    def factory(*, device=None, dtype=None, batch_size=None):
        return _StubScorer(keys, calls, device=device, dtype=dtype, batch_size=batch_size)
    return factory


def test_official_weights_on_known_component_values_equal_hand_computed_sum(stub_components):
    preds = ["a dog", "a cat on a mat", "two people riding bikes down the street"]
    images = [Image.new("RGB", (8, 8), c) for c in ("red", "green", "blue")]
    refs = [["a dog runs"], ["a cat"], ["people ride", "bikes"]]
    result = load_scorer("ensembeval").score(preds, images, refs)
    expected = [sum(w * _known_value(k, p) for k, w in OFFICIAL.items()) for p in preds]
    np.testing.assert_allclose(result["ensembeval_per_sample"], expected, rtol=0, atol=1e-12)
    assert result["ensembeval"] == pytest.approx(np.mean(expected), abs=1e-12)
    for key in OFFICIAL:  # every weighted component is reported per sample
        assert result[f"{key}_per_sample"] == [_known_value(key, p) for p in preds]
    # one call per scorer over the whole input; images only to image scorers
    assert sorted(stub_components) == sorted([
        ("blip2_score", 3, True, True), ("polos", 3, True, True), ("pac_s", 3, True, True),
        ("clip_s", 3, True, True), ("exact_noun_overlap", 3, False, True), ("rouge_l", 3, False, True),
        ("bleu_1", 3, False, True), ("cider", 3, False, True)])


def test_missing_inputs_are_named(stub_components):
    scorer = load_scorer("ensembeval")
    with pytest.raises(InputError, match="needs references for .*refclip_s"):
        scorer.score(["a dog"], [Image.new("RGB", (8, 8))])
    with pytest.raises(InputError, match="needs images for .*blip2_score"):
        scorer.score(["a dog"], None, [["a dog"]])
    with pytest.raises(InputError, match="mismatched lengths"):
        scorer.score(["a dog", "a cat"], [Image.new("RGB", (8, 8))], [["x"], ["y"]])
    with pytest.raises(InputError, match="empty reference list"):
        scorer.score(["a dog"], [Image.new("RGB", (8, 8))], [[]])


def test_user_components_callable_and_scorer(stub_components):
    class Length:
        def score(self, predictions, images=None, references=None):
            return summarize({"length": [len(p.split()) for p in predictions]})

    weights = {"weights": {"pac_s": 2.0, "length": 0.5, "shout": -1.0}}
    extras = {"length": Length(), "shout": lambda preds, images, refs: [p.count("!") for p in preds]}
    result = load_scorer("ensembeval", weights=weights, extra_components=extras).score(
        ["wow! a dog!", "a cat"], [Image.new("RGB", (4, 4))] * 2)  # no reference-based component: none needed
    expected = [2.0 * _known_value("pac_s", "wow! a dog!") + 0.5 * 3 - 2, 2.0 * _known_value("pac_s", "a cat") + 1]
    np.testing.assert_allclose(result["ensembeval_per_sample"], expected, atol=1e-12)
    assert result["shout_per_sample"] == [2.0, 0.0]


def test_refclip_s_and_polos_share_one_clip_backbone_on_the_real_factories(tiny_hub, monkeypatch):
    """The real registered factories: one OpenAI CLIP load and one image forward per distinct image serve RefCLIP-S
    and Polos; PAC-S (other weights) keeps its own; the scores equal separately loaded scorers."""
    from capeval.backbones.clip import ClipBackbone

    loads, encoded = [], []
    init, encode = ClipBackbone.__init__, ClipBackbone._encode_image_batch

    def counting_init(self, weights, **options):
        loads.append(weights)
        init(self, weights, **options)

    def counting_encode(self, images):
        encoded.append((self.weights, len(images)))
        return encode(self, images)

    monkeypatch.setattr(ClipBackbone, "__init__", counting_init)
    monkeypatch.setattr(ClipBackbone, "_encode_image_batch", counting_encode)
    scorer = load_scorer("ensembeval", weights={"weights": {"refclip_s": 1.0, "polos": 1.0, "pac_s": 1.0}},
                         device="cpu")
    assert sorted(loads) == ["openai-clip-vit-b-32", "pacs-clip-vit-b-32"]
    assert scorer.scorers["polos"].clip is scorer.scorers["clip_s"].backbone
    assert scorer.scorers["pac_s"].backbone is not scorer.scorers["clip_s"].backbone
    rng = np.random.default_rng(1)
    distinct = [Image.fromarray(rng.integers(0, 256, (30 + i, 40, 3), dtype=np.uint8)) for i in range(3)]
    images = [distinct[0], distinct[1], distinct[2], distinct[0]]
    preds = ["a dog", "a red car", "two people", "a dog on grass"]
    refs = [["a dog runs"], ["a car", "red"], ["people"], ["grass", "a dog"]]
    result = scorer.score(preds, images, refs)
    assert sum(n for weights, n in encoded if weights == "openai-clip-vit-b-32") == 3
    assert sum(n for weights, n in encoded if weights == "pacs-clip-vit-b-32") == 3
    alone = {"polos": load_scorer("polos", device="cpu").score(preds, images, refs)["polos_per_sample"],
             "refclip_s": load_scorer("clip_s", device="cpu").score(preds, images, refs)["refclip_s_per_sample"]}
    for key, values in alone.items():
        np.testing.assert_allclose(result[f"{key}_per_sample"], values, rtol=0, atol=1e-6)


def test_component_options_and_caches_reach_every_component(tiny_hub, tmp_path):
    scorer = load_scorer("ensembeval", weights={"weights": {"polos": 1.0, "refclip_s": 1.0}}, device="cpu",
                         persist_dir=tmp_path, component_options={"polos": {"statistics": "batch"}})
    assert scorer.scorers["polos"].statistics == "batch"
    assert scorer.scorers["polos"].encoder._persist_dir == tmp_path  # dropped for Polos before (its SimCSE encoder persists)
    with pytest.raises(InputError, match=r"polos: unknown option\(s\) \['no_such'\]"):
        load_scorer("ensembeval", weights={"weights": {"polos": 1.0}}, device="cpu",
                    component_options={"polos": {"no_such": 1}})
    with pytest.raises(KeyError, match="component_options for \\['pac_s'\\]"):
        load_scorer("ensembeval", weights={"weights": {"polos": 1.0}}, device="cpu",
                    component_options={"pac_s": {}})


def test_tiny_models_end_to_end_with_every_official_component(tiny_hub, tmp_path):
    """Real component scorers on tiny random models, for all nine official components."""
    from capeval.ensembeval.components import COMPONENTS

    available = scoring.scorers()
    weights = {k: w for k, w in OFFICIAL.items() if COMPONENTS[k].scorer in available}
    assert weights == OFFICIAL  # every official component is a registered scorer
    rng = np.random.default_rng(0)
    images = [Image.fromarray(rng.integers(0, 256, (32 + i, 40, 3), dtype=np.uint8)) for i in range(3)]
    preds = ["a dog runs on the grass", "a red car on the street", "two people riding a bike"]
    refs = [["a dog in a field", "an animal running"], ["a car"], ["people on bikes", "a street", "cyclists"]]
    path = tmp_path / "weights.json"
    path.write_text(json.dumps({"name": "available-official", "weights": weights}))
    result = load_scorer("ensembeval", weights=str(path), device="cpu").score(preds, images, refs)
    separately = {}
    for name in {COMPONENTS[k].scorer for k in weights}:
        spec = scoring.scorers()[name]
        separately.update(load_scorer(name, device="cpu").score(preds, images if spec.images != "unused" else None,
                                                                refs if spec.references != "unused" else None))
    expected = sum(w * np.array(separately[f"{k}_per_sample"]) for k, w in weights.items())
    np.testing.assert_allclose(result["ensembeval_per_sample"], expected, atol=1e-5)
    for key in weights:
        np.testing.assert_allclose(result[f"{key}_per_sample"], separately[f"{key}_per_sample"], atol=1e-6)

    import evaluate

    from capeval.modules import module_dir

    metric = evaluate.load(str(module_dir("ensembeval")), weights=str(path), device="cpu")
    out = metric.compute(predictions=preds, images=images, references=refs)
    np.testing.assert_allclose(out["ensembeval_per_sample"], expected, atol=1e-5)
    assert set(weights) <= {k[:-len("_per_sample")] for k in out if k.endswith("_per_sample")}


def _pycocoevalcap_cider(candidates, reference_sets):
    from pycocoevalcap.cider.cider import Cider

    _, scores = Cider().compute_score({i: refs for i, refs in enumerate(reference_sets)},
                                      {i: [c] for i, c in enumerate(candidates)})
    return scores


TOKENIZED_CANDS = ["a dog runs on the grass", "a man rides a red bike", "two cats", "a dog and a man"]
TOKENIZED_REFS = [["a dog running on grass", "the dog runs"], ["a man riding a bike", "a red bicycle", "man"],
                  ["two cats sleeping"], ["a man and his dog", "a dog with a man on the grass"]]


def test_fixed_idf_cider_equals_pycocoevalcap_when_idf_corpus_is_the_scored_corpus():
    from capeval.functional.fixed_idf_cider import DocumentFrequencies
    from capeval.text.cider import CiderReferences

    df = DocumentFrequencies.from_reference_sets(TOKENIZED_REFS)
    ours = CiderReferences(TOKENIZED_REFS, df).scores(TOKENIZED_CANDS)
    np.testing.assert_allclose(ours, _pycocoevalcap_cider(TOKENIZED_CANDS, TOKENIZED_REFS), rtol=1e-12, atol=1e-12)
    restored = DocumentFrequencies.from_json(json.loads(json.dumps(df.to_json())))
    assert restored == df


def test_fixed_idf_scores_one_caption_alone_like_inside_its_corpus(tmp_path):
    from capeval.text.fixed_idf_cider import build_document_frequencies, save_document_frequencies

    raw_refs = [["A dog running on grass.", "The dog runs!"], ["A man riding a bike", "A red bicycle."],
                ["Two cats sleeping"], ["A man and his dog"]]
    raw_cands = ["A dog runs on the grass.", "A man rides a red bike", "Two cats", "A dog and a man"]
    path = save_document_frequencies(build_document_frequencies(raw_refs), tmp_path / "idf.json", {"data": "test"})
    scorer = load_scorer("cider_fixed_idf", idf=str(path))
    corpus = scorer.score(raw_cands, references=raw_refs)["cider_per_sample"]
    alone = scorer.score(raw_cands[1:2], references=raw_refs[1:2])["cider_per_sample"]
    assert alone == pytest.approx(corpus[1:2], abs=1e-12)
    expected = _pycocoevalcap_cider([c.lower().rstrip(".") for c in raw_cands],
                                    [[r.lower().rstrip(".!") for r in refs] for refs in raw_refs])
    np.testing.assert_allclose(corpus, expected, atol=1e-12)  # PTB tokenisation drops the punctuation
    assert _pycocoevalcap_cider(raw_cands[1:2], raw_refs[1:2])[0] == 0  # official: one caption alone scores 0


def test_ensemble_uses_fixed_idf_cider_when_asked(stub_components, tmp_path):
    from capeval.text.fixed_idf_cider import build_document_frequencies, save_document_frequencies

    refs = [["a dog running on grass"], ["a man riding a bike"]]
    path = save_document_frequencies(build_document_frequencies(refs), tmp_path / "idf.json", {})
    weights = {"weights": {"cider": 1.0, "pac_s": 0.0}}
    result = load_scorer("ensembeval", weights=weights, cider_idf=str(path)).score(
        ["a dog runs"], [Image.new("RGB", (4, 4))], [refs[0]])
    assert result["ensembeval_per_sample"] == result["cider_per_sample"]
    assert result["cider"] > 0 and ("cider", 1, False, True) not in stub_components


def test_only_official_cider_makes_the_ensemble_corpus_level():
    """Sharding/streaming is allowed exactly when no per-sample value depends on the other samples."""
    spec = scoring.scorers()["ensembeval"]
    assert spec.is_corpus_level({}) is True  # official weights hold CIDEr with the scored corpus's IDF
    assert spec.is_corpus_level({"cider_idf": "idf-folder"}) is False
    assert spec.is_corpus_level({"weights": {"weights": {"pac_s": 1.0, "bleu_1": 0.5}}}) is False


def test_a_components_own_runtime_options_are_honoured_not_shared_over(tiny_hub):
    scorer = load_scorer("ensembeval", weights={"weights": {"refclip_s": 1.0, "polos": 1.0}}, device="cpu",
                         component_options={"clip_s": {"batch_size": 3}})
    assert scorer.scorers["clip_s"].backbone.batch_size == 3  # was silently 64 with a shared backbone
    assert scorer.scorers["polos"].clip.batch_size == 64 and scorer.scorers["polos"].clip is not \
        scorer.scorers["clip_s"].backbone


def test_a_borrowed_backbone_must_hold_the_borrowers_weights(tiny_hub):
    from capeval.backbones.clip import ClipBackbone

    openai = ClipBackbone("openai-clip-vit-b-32", device="cpu")
    with pytest.raises(InputError, match="clip_backbone holds 'openai-clip-vit-b-32'.*need 'pacs-clip-vit-b-32'"):
        load_scorer("clip_s", weights="pacs-clip-vit-b-32", clip_backbone=openai, device="cpu")
    polos = load_scorer("polos", clip_backbone=openai, device="cpu")
    openai.encode_images([Image.new("RGB", (8, 8))])
    polos.reset_caches()  # Polos' own caches only: the lender's stay
    assert len(openai.image_cache) == 1


def test_text_only_weights_need_no_images_through_every_door(tiny_hub, tmp_path, capsys):
    from capeval.cli import main

    weights = {"weights": {"bleu_1": 0.5, "rouge_l": 0.5}}
    scorer = load_scorer("ensembeval", weights=weights)
    assert (scorer.images, scorer.references) == ("optional", "required")
    result = scorer.score(["a dog runs"], references=[["a dog running"]])
    (tmp_path / "w.json").write_text(json.dumps(weights))
    (tmp_path / "in.jsonl").write_text(json.dumps({"caption": "a dog runs", "references": ["a dog running"]}) + "\n")
    assert main(["score", "ensembeval", "--input", str(tmp_path / "in.jsonl"), "--weights", str(tmp_path / "w.json"),
                 "--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out)["ensembeval"] == pytest.approx(result["ensembeval"])
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["score", "ensembeval", "--input", str(tmp_path / "in.jsonl"), "--weights",
                 str(tmp_path / "bad.json")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "bad.json: not a JSON weights file" in error


def test_each_distinct_clip_text_is_encoded_once_across_components_sharing_a_backbone(tiny_hub, monkeypatch):
    """RefCLIP-S and Polos share OpenAI CLIP: every distinct "A photo depicts " + text (candidates and references
    of both components) runs through its text encoder once; PAC-S's own CLIP encodes them once more."""
    from capeval.backbones.clip import ClipBackbone

    encoded = []
    encode = ClipBackbone._encode_text_batch

    def counting_encode(self, texts):
        encoded.extend((self.weights, text) for text in texts)
        return encode(self, texts)

    monkeypatch.setattr(ClipBackbone, "_encode_text_batch", counting_encode)
    scorer = load_scorer("ensembeval", weights={"weights": {"refclip_s": 1.0, "polos": 1.0, "pac_s": 1.0}},
                         device="cpu", batch_size=2)
    preds = ["a dog", "a red car", "two people", "a dog on grass"]
    refs = [["a dog runs", "a dog"], ["a car", "red"], ["people"], ["grass", "a dog"]]
    images = [np.full((20, 30, 3), 40 * i, np.uint8) for i in range(4)]
    scorer.score(preds, images, refs)
    distinct = {"A photo depicts " + t for t in preds + [r for rs in refs for r in rs]}
    for weights in ("openai-clip-vit-b-32", "pacs-clip-vit-b-32"):
        texts = [text for owner, text in encoded if owner == weights]
        assert sorted(texts) == sorted(distinct)  # each once, none missing


def test_official_precision_reaches_each_component_and_equals_it_alone(tiny_hub):
    scorer = load_scorer("ensembeval", weights={"weights": {"refclip_s": 1.0, "polos": 1.0, "pac_s": 1.0,
                                                            "bleu_1": 1.0}}, device="cpu", precision="official")
    assert scorer.scorers["clip_s"].backbone.precision == "openai-fp16"
    assert scorer.scorers["polos"].clip.precision == "openai-fp16"
    assert scorer.scorers["pac_s"].backbone.precision == "uniform" and scorer.scorers["pac_s"].official_dtype
    rng = np.random.default_rng(3)
    images = [Image.fromarray(rng.integers(0, 256, (30 + i, 40, 3), dtype=np.uint8)) for i in range(2)]
    preds, refs = ["a dog", "a red car"], [["a dog runs"], ["a car", "red"]]
    result = scorer.score(preds, images, refs)
    for key, name in (("refclip_s", "clip_s"), ("polos", "polos"), ("pac_s", "pac_s")):
        alone = load_scorer(name, device="cpu", precision="official").score(preds, images, refs)
        assert result[f"{key}_per_sample"] == alone[f"{key}_per_sample"]
