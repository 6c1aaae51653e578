"""A suite in one pass, on the production path (tiny random models, real factories; spies call through): each image
file decoded once, each backbone loaded once, each distinct text encoded once per encoder, and every score bitwise
the metric's own when run alone."""

import numpy as np
import pytest
from PIL import Image

from capeval.core.evaluation_sets import EvalImage, GroundTruth, SystemCaptions

IMAGE_METRICS = ["clip_s", "pac_s", "polos"]
PREFIX = "A photo depicts "


@pytest.fixture
def evaluation_set(tmp_path):
    """Seven JPEG images (one file named by two image ids), five references each, three systems with captions
    repeated across systems and equal to some references."""
    rng = np.random.default_rng(7)
    root = tmp_path / "images"
    root.mkdir()
    for i in range(6):
        Image.fromarray(rng.integers(0, 256, (36 + 3 * i, 48, 3), dtype=np.uint8)).save(root / f"{i}.jpg")
    Image.fromarray(rng.integers(0, 256, (30, 30), dtype=np.uint8)).save(root / "grey.png")  # mode L
    files = [f"{i}.jpg" for i in range(6)] + ["grey.png", "2.jpg"]
    words = ["dog", "cat", "car", "tree", "boat", "bird", "house", "horse"]
    images = {100 + i: EvalImage(100 + i, file, tuple(f"a {words[i]} {k} near a {words[(i + k) % 8]}"
                                                       for k in range(5)) + ("a picture",))
              for i, file in enumerate(files)}
    truth = GroundTruth(images, "annotations.json")
    systems = [
        SystemCaptions("base", {i: f"a {words[i - 100]} in the picture" for i in images}, "base.json"),
        SystemCaptions("new", {i: ("a picture" if i % 2 else f"a {words[i - 100]} in the picture") for i in images},
                       "new.json"),
        SystemCaptions("long", {i: f"a photo of a {words[(i + 3) % 8]} and a {words[i - 100]} outside"
                                for i in images}, "long.json"),
    ]
    return truth, systems, root


def _alone(name, system, truth, root, **options):
    from capeval.core.scoring import load_scorer

    ids = list(system.captions)
    return load_scorer(name, **options).score([system.captions[i] for i in ids],
                                              [str(truth.image_path(i, root)) for i in ids],
                                              [list(truth.images[i].references) for i in ids])


@pytest.fixture
def spies(monkeypatch):
    """Counting wrappers around the real image loader, CLIP / SimCSE loads and CLIP / SimCSE text and image
    forwards (each calls the original)."""
    import capeval.core.inputs as inputs
    from capeval.backbones.clip import ClipBackbone
    from capeval.polos.scorer import SimcseEncoder

    seen = {"decoded": [], "clip_loads": [], "simcse_loads": 0, "clip_texts": [], "clip_images": [],
            "simcse_texts": []}
    load_image, clip_init, simcse_init = inputs.load_image, ClipBackbone.__init__, SimcseEncoder.__init__
    encode_texts, encode_images = ClipBackbone._encode_text_batch, ClipBackbone._encode_image_batch
    simcse_batch = SimcseEncoder._encode_text_batch

    def counting_load_image(image, **kwargs):
        if not isinstance(image, Image.Image):
            seen["decoded"].append(str(image))
        return load_image(image, **kwargs)

    def counting_clip_init(self, weights, **options):
        seen["clip_loads"].append(weights)
        clip_init(self, weights, **options)

    def counting_simcse_init(self, *args, **kwargs):
        seen["simcse_loads"] += 1
        simcse_init(self, *args, **kwargs)

    def counting_texts(self, texts):
        seen["clip_texts"].extend((self.weights, text) for text in texts)
        return encode_texts(self, texts)

    def counting_images(self, images):
        seen["clip_images"].extend((self.weights, image.tobytes()) for image in images)
        return encode_images(self, images)

    def counting_simcse(self, texts):
        seen["simcse_texts"].extend(texts)
        return simcse_batch(self, texts)

    monkeypatch.setattr(inputs, "load_image", counting_load_image)
    monkeypatch.setattr(ClipBackbone, "__init__", counting_clip_init)
    monkeypatch.setattr(SimcseEncoder, "__init__", counting_simcse_init)
    monkeypatch.setattr(ClipBackbone, "_encode_text_batch", counting_texts)
    monkeypatch.setattr(ClipBackbone, "_encode_image_batch", counting_images)
    monkeypatch.setattr(SimcseEncoder, "_encode_text_batch", counting_simcse)
    return seen


def test_each_file_decoded_each_backbone_loaded_each_text_encoded_once(tiny_hub, evaluation_set, spies):
    from capeval.suite import resolve_plan, score_suite

    truth, systems, root = evaluation_set
    scores = score_suite(truth, systems, resolve_plan(IMAGE_METRICS), images_root=root, chunk_images=3)
    # 7 distinct files (2.jpg named by two ids), each decoded once for 3 metrics x 3 systems
    assert sorted(spies["decoded"]) == sorted(str(root / f) for f in [*(f"{i}.jpg" for i in range(6)), "grey.png"])
    assert sorted(spies["clip_loads"]) == ["openai-clip-vit-b-32", "pacs-clip-vit-b-32"]  # CLIP-S and Polos share
    assert spies["simcse_loads"] == 1
    texts = {t for s in systems for t in s.captions.values()} | {r for im in truth.images.values()
                                                                 for r in im.references}
    for weights in ("openai-clip-vit-b-32", "pacs-clip-vit-b-32"):
        encoded = [text for owner, text in spies["clip_texts"] if owner == weights]
        assert sorted(encoded) == sorted(PREFIX + t for t in texts)  # each distinct text once, none missing
        images = [pixels for owner, pixels in spies["clip_images"] if owner == weights]
        # 7 distinct pictures; Polos converts the grey one to RGB first (its official loading), CLIP-S does not
        expected = 8 if weights == "openai-clip-vit-b-32" else 7
        assert len(images) == expected and len(set(images)) == expected
    assert sorted(spies["simcse_texts"]) == sorted(texts)
    assert scores.counts == {"images": 8, "systems": 3, "image_decodes": 7, "scorer_loads": 3,
                             "clip_backbone_loads": 2, "clip_image_features": 15,
                             "clip_text_features": 2 * len(texts)}


@pytest.mark.parametrize("name", IMAGE_METRICS)
def test_every_score_equals_the_metric_run_alone_bitwise(tiny_hub, evaluation_set, name):
    from capeval.suite import resolve_plan, score_suite

    truth, systems, root = evaluation_set
    scores = score_suite(truth, systems, resolve_plan(["clip_s", "pac_s", "polos"]), images_root=root,
                         chunk_images=3)
    keys = [key for key in scores.keys if scores.metrics[key]["scorer"] == name]
    assert keys == {"clip_s": ["clip_s", "refclip_s"], "pac_s": ["pac_s", "refpac_s"], "polos": ["polos"]}[name]
    for system in systems:
        alone = _alone(name, system, truth, root)
        for key in keys:
            assert scores.per_image[system.name][key] == alone[f"{key}_per_sample"]
            assert scores.corpus[system.name][key] == alone[key]
            assert scores.statistics[system.name][key].value() == pytest.approx(alone[key], rel=1e-12)
            assert scores.metrics[key]["hashcode"] == alone["hashcode"]
            assert scores.metrics[key]["provenance"] == alone["provenance"]
            assert scores.metrics[key]["corpus_level"] is False


def test_chunk_size_changes_no_score(tiny_hub, evaluation_set):
    from capeval.suite import resolve_plan, score_suite

    truth, systems, root = evaluation_set
    runs = [score_suite(truth, systems, resolve_plan(IMAGE_METRICS), images_root=root, chunk_images=size)
            for size in (1, 3, 1000)]
    for run in runs[1:]:
        assert run.keys == runs[0].keys
        assert run.per_image == runs[0].per_image
        assert run.corpus == runs[0].corpus


def test_ensembeval_is_the_weighted_sum_of_the_suites_own_component_scores(tiny_hub, evaluation_set, spies):
    from capeval.core.scoring import load_scorer
    from capeval.suite import resolve_plan, score_suite

    truth, systems, root = evaluation_set
    weights = {"weights": {"refclip_s": -0.25, "polos": 0.75, "pac_s": 0.5}}
    scores = score_suite(truth, systems, resolve_plan(["clip_s", "ensembeval"], {"ensembeval": {"weights": weights}}),
                         images_root=root)
    assert scores.keys == ["clip_s", "refclip_s", "ensembeval"]  # its other components run, not shown
    texts = {t for s in systems for t in s.captions.values()} | {r for im in truth.images.values()
                                                                 for r in im.references}
    assert sorted(spies["clip_loads"]) == ["openai-clip-vit-b-32", "pacs-clip-vit-b-32"]
    for weights_name in ("openai-clip-vit-b-32", "pacs-clip-vit-b-32"):  # components not scored a second time
        assert len([t for owner, t in spies["clip_texts"] if owner == weights_name]) == len(texts)
    assert len(spies["simcse_texts"]) == len(texts)
    ensemble = load_scorer("ensembeval", weights=weights)
    for system in systems:
        ids = list(system.captions)
        alone = ensemble.score([system.captions[i] for i in ids], [str(truth.image_path(i, root)) for i in ids],
                               [list(truth.images[i].references) for i in ids])
        assert scores.per_image[system.name]["ensembeval"] == alone["ensembeval_per_sample"]
        assert scores.corpus[system.name]["ensembeval"] == alone["ensembeval"]
    assert scores.metrics["ensembeval"]["provenance"]["components"]["refclip_s"] == scores.metrics["refclip_s"][
        "hashcode"]


def test_progress_per_stage_on_stderr(tiny_hub, evaluation_set, capsys):
    from capeval.suite import resolve_plan, score_suite

    truth, systems, root = evaluation_set
    score_suite(truth, systems[:1], resolve_plan(["clip_s"]), images_root=root, show_progress=True)
    err = capsys.readouterr().err
    assert "decoding images" in err and "scoring clip_s" in err


def test_images_given_by_id_and_reference_free_metrics(tiny_hub, evaluation_set):
    """``images``: image id → a decoded image (the Trainer hook's case), none decoded again; no references
    anywhere: CLIP-S without RefCLIP-S, equal to CLIP-S alone on the same images."""
    from capeval.core.scoring import load_scorer
    from capeval.suite import resolve_plan, score_suite

    truth, systems, root = evaluation_set
    bare = GroundTruth({i: EvalImage(i, None, ()) for i in truth.images}, "rows")
    pictures = {i: Image.open(truth.image_path(i, root)).convert("RGB") for i in truth.images}
    scores = score_suite(bare, systems[:1], resolve_plan(["clip_s"]), images=pictures)
    assert scores.keys == ["clip_s"] and scores.counts["image_decodes"] == 0
    ids = list(systems[0].captions)
    alone = load_scorer("clip_s").score([systems[0].captions[i] for i in ids], [pictures[i] for i in ids])
    assert scores.per_image["base"]["clip_s"] == alone["clip_s_per_sample"]
