"""The input contract through every door: the evaluate modules, ``load_scorer`` and the CLI refuse bad input with an
:class:`capeval.InputError` (CLI: exit code 2 and one stderr line) naming the field, the sample index (CLI: the
record number over the whole input) and the problem, before any model runs; 16-bit images and half-precision
tensors score like their 8-bit / float32 equivalents; captions over a token limit are counted and warned about once.

Everything runs on the real factories, modules and CLI with the tiny hub weights. Each scorer and module is built
once per metric (module-scoped); the CLI gets the same scorer through a memoising wrapper around the real
``load_scorer`` (with the fast tiny settings of ``FAST``), so its validation, chunking and scoring are its own.
Forwards are counted with a global forward pre-hook, which replaces nothing.
"""

import io
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from capeval import InputError, ModelNotAvailableError
from capeval.cli import main
from capeval.core import scoring

REPO = Path(__file__).resolve().parents[1]
MODULE_METRICS = ["clip_s", "ensembeval", "expert", "fleur", "hice_s", "image_roundtrip", "pac_s", "polos", "vcrscore"]
TEXT_METRICS = ["bleu", "capture", "cider", "mpnet_score", "noun_verb_overlap", "rouge_l"]
TEXT_MODULE_METRICS = ["capture"]  # text metrics with an evaluate module (the image doors do not apply)
METRICS = MODULE_METRICS + TEXT_METRICS
NO_TOKEN_LIMIT = ("bleu", "cider", "expert", "fleur", "noun_verb_overlap", "rouge_l")  # LLaVA reads 4,096 tokens
TOKEN_LIMITED = [m for m in METRICS if m not in NO_TOKEN_LIMIT]
FAST = {  # fast settings of the slow tiny pipelines (options the scorers declare anyway)
    "hice_s": {"phrase_parser": "spacy", "region_settings": {"points_per_side": 4, "pred_iou_thresh": 0.0,
                                                             "stability_score_thresh": 0.0}},
    "image_roundtrip": {"steps": 1, "height": 32, "width": 32, "use_image_cache": False},
    "fleur": {"max_new_tokens": 8},
    "expert": {"max_new_tokens": 8},
}
BATCH = 8  # > a CLI chunk's distinct texts (captions and references are encoded together): one batch, no progress bar
CHUNK = 3
H, W = 12, 16
# PIL.Image.MAX_IMAGE_PIXELS in the bomb cases: bomb.png has 600 * 600 = 360000 > 2 * 150000 pixels; images the models
# open themselves (up to 336 * 336) stay below the limit
BOMB_LIMIT = 150_000
LONG = " ".join(["a green field with a dog"] * 130)  # ~780 tokens: over every limit (CLIP 77 ... SimCSE 512)


def _spec(metric):
    return scoring.scorers()[metric]


def _uses(metric, field):
    return getattr(_spec(metric), field) != "unused"


# --------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Good, broken and 16-bit image files."""
    folder = tmp_path_factory.mktemp("contract-images")
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (H, W, 3), dtype=np.uint8)).save(folder / "good.png")
    big = Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    for name, fmt in (("truncated.jpg", "JPEG"), ("truncated.png", "PNG")):
        buffer = io.BytesIO()
        big.save(buffer, format=fmt)
        (folder / name).write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])  # a valid file cut in half
    (folder / "notes.txt").write_text("these are notes, not an image\n")
    (folder / "folder").mkdir()
    Image.new("L", (600, 600), 128).save(folder / "bomb.png")
    sixteen = np.linspace(0, 65535, H * W).round().astype(np.uint16).reshape(H, W)
    Image.fromarray(sixteen).save(folder / "sixteen.png")  # a real 16-bit PNG
    Image.fromarray(_eight_bit(sixteen)).save(folder / "eight.png")
    Image.new("L", (W, H), 255).save(folder / "white.png")  # what convert("RGB") alone makes of a 16-bit image
    return folder


def _eight_bit(sixteen):
    return np.round(sixteen / 257.0).astype(np.uint8)


@pytest.fixture(scope="module")
def build(tiny_hub):
    """``build(metric, **options)``: the real ``load_scorer``, memoised, with ``FAST`` and cpu / ``BATCH``."""
    real, built = scoring.load_scorer, {}

    def get(metric, **options):
        options = {"device": "cpu", "batch_size": BATCH, **FAST.get(metric, {}), **options}
        key = (metric, repr(sorted(options.items())))
        if key not in built:
            built[key] = real(metric, **options)
        return built[key]

    return get


@pytest.fixture(scope="module")
def module_of(tiny_hub):
    """The evaluate module of a metric, loaded once from the checkout."""
    import evaluate

    loaded = {}

    def get(metric):
        if metric not in loaded:
            loaded[metric] = evaluate.load(str(REPO / "metrics" / metric), device="cpu", batch_size=BATCH,
                                           scorer_options=FAST.get(metric))
        return loaded[metric]

    return get


@pytest.fixture
def cli(build, monkeypatch, capsys, tmp_path, files):
    """``cli(metric, records, *extra)`` → (exit code, stdout, stderr lines)."""
    def load_scorer(metric, **options):
        scoring.get_scorer_spec(metric).check_options(options)
        return build(metric, **options)

    monkeypatch.setattr(scoring, "load_scorer", load_scorer)  # cmd_score imports it from capeval.core.scoring

    def run(metric, records, *extra):
        path = tmp_path / "records.jsonl"
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
        capsys.readouterr()
        argv = ["score", metric, "--input", str(path), "--device", "cpu", "--batch-size", str(BATCH), *extra]
        if _uses(metric, "images"):
            argv += ["--images", str(files)]
        if not _spec(metric).is_corpus_level({"device": "cpu"}):
            argv += ["--chunk-size", str(CHUNK)]
        code = main(argv)
        out, err = capsys.readouterr()
        return code, out, err.splitlines()

    return run


def _good(metric, files, n=3):
    """n valid samples of ``metric``: {predictions, images, references} (None where the metric takes none)."""
    return {"predictions": [f"a photo of thing {i}" for i in range(n)],
            "images": [str(files / "good.png")] * n if _uses(metric, "images") else None,
            "references": [[f"a reference {i}", "a picture"] for i in range(n)] if _uses(metric, "references")
            else None}


def _call(door, metric, build, module_of, inputs, **kwargs):
    if door == "module":
        return module_of(metric).compute(**{k: v for k, v in inputs.items() if v is not None}, **kwargs)
    return build(metric).score(inputs["predictions"], images=inputs["images"], references=inputs["references"],
                               **kwargs)


def _refused(door, metric, build, module_of, inputs, forwards, expected):
    forwards.clear()
    with pytest.raises(InputError) as error:
        _call(door, metric, build, module_of, inputs)
    assert forwards == [], f"{len(forwards)} forwards ran before the error"
    message = str(error.value)
    assert re.search(expected, message), message
    assert "\n" not in message
    return message


def _replace(values, index, value):
    return [value if i == index else v for i, v in enumerate(values)]


DOORS = [pytest.param(metric, door, id=f"{metric}-{door}") for metric in METRICS
         for door in (("module", "scorer") if metric in MODULE_METRICS else ("scorer",))]
IMAGE_DOORS = [p for p in DOORS if p.values[0] in MODULE_METRICS]
# the tiny random judges answer few readable numbers (most FLEUR and EXPERT scores are NaN), so no score of theirs
# can tell two images apart: the pixel-equivalence checks run on the metrics whose tiny models give scores (the
# judges' pixels, one preprocessing for both, are checked against the official one in tests/judges/test_judge_pixels.py)
JUDGES = ("expert", "fleur")
SCORING_IMAGE_DOORS = [p for p in IMAGE_DOORS if p.values[0] not in JUDGES]


def test_the_matrix_covers_every_evaluate_module():
    modules = sorted(p.name for p in (REPO / "metrics").iterdir() if (p / f"{p.name}.py").is_file())
    assert modules == sorted(MODULE_METRICS + TEXT_MODULE_METRICS)
    assert all(_spec(m).images == "unused" and _spec(m).references == "required" for m in TEXT_METRICS)


# ------------------------------------------------------------------------------- bad images (Python doors)

BAD_IMAGES = {  # case: (the bad image, given its folder; what the message must say after "images[1]")
    "truncated_jpeg": (lambda f: str(f / "truncated.jpg"), r"truncated"),
    "truncated_png": (lambda f: str(f / "truncated.png"), r"truncated"),
    "truncated_bytes_dict": (lambda f: {"bytes": (f / "truncated.png").read_bytes(), "path": None}, r"truncated"),
    "text_file": (lambda f: str(f / "notes.txt"), r"not an image"),
    "directory": (lambda f: str(f / "folder"), r"is a directory"),
    "missing_path": (lambda f: str(f / "missing.png"), r"not found"),
    "decompression_bomb": (lambda f: str(f / "bomb.png"), r"decompression bomb"),
    "float_array_0_255": (lambda f: np.full((H, W, 3), 200.0, np.float32), r"\[0, 1\]"),
    "float_tensor_0_255": (lambda f: torch.full((3, H, W), 200.0), r"\[0, 1\]"),
    "hwc_tensor": (lambda f: torch.rand(H, W, 3), r"HWC array\? permute it to CHW"),
    "chw_array": (lambda f: np.random.default_rng(0).random((3, H, W)), r"CHW array\? transpose it to HWC"),
    "nan_array": (lambda f: np.full((H, W, 3), np.nan, np.float32), r"NaN"),
    "nan_bfloat16_tensor": (lambda f: torch.full((3, H, W), float("nan"), dtype=torch.bfloat16), r"NaN"),
}


@pytest.mark.parametrize("case", sorted(BAD_IMAGES))
@pytest.mark.parametrize("metric, door", IMAGE_DOORS)
def test_bad_image_is_refused_before_any_model_runs(metric, door, case, files, build, module_of, forwards,
                                                    monkeypatch):
    if case == "decompression_bomb":
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", BOMB_LIMIT)
    make, problem = BAD_IMAGES[case]
    inputs = _good(metric, files)
    inputs["images"] = _replace(inputs["images"], 1, make(files))
    message = _refused(door, metric, build, module_of, inputs, forwards, r"^images\[1\]: .*" + problem)
    if case.startswith("truncated"):
        assert "not an image" not in message
    if case == "text_file":
        assert "truncated" not in message


# ------------------------------------------------------------------- bad captions / references (Python doors)

CAPTION_CASES = {  # case: (applies to metric, inputs -> bad inputs, the message)
    "predictions_dict": (None, lambda x: {**x, "predictions": dict(enumerate(x["predictions"]))},
                         r"^predictions must be a list .*not a dict"),
    "predictions_set": (None, lambda x: {**x, "predictions": set(x["predictions"])},
                        r"^predictions must be a list .*not a set"),
    "predictions_bare_string": (None, lambda x: {**x, "predictions": "a dog on the grass"},
                                r"^predictions must be a list .*not a single string"),
    "empty_caption": (None, lambda x: {**x, "predictions": _replace(x["predictions"], 1, "")},
                      r"^predictions\[1\] is an empty caption"),
    "blank_caption": (None, lambda x: {**x, "predictions": _replace(x["predictions"], 1, " \n ")},
                      r"^predictions\[1\] is an empty caption"),
    "int_caption": (None, lambda x: {**x, "predictions": _replace(x["predictions"], 1, 7)},
                    r"^predictions\[1\] is an int .*expected a string"),
    "none_caption": (None, lambda x: {**x, "predictions": _replace(x["predictions"], 1, None)},
                     r"^predictions\[1\] is a NoneType .*expected a string"),
    "fewer_images": ("images", lambda x: {**x, "images": x["images"][:2]},
                     r"mismatched lengths: predictions=3, images=2"),
    "images_bare_path": ("images", lambda x: {**x, "images": x["images"][0]},
                         r"^images must be a list .*not a single string"),
    "images_missing": ("images", lambda x: {**x, "images": None}, r"needs .*images"),
    "references_dict": ("references", lambda x: {**x, "references": dict(enumerate(x["references"]))},
                        r"^references must be a list .*not a dict"),
    "references_set": ("references", lambda x: {**x, "references": {"a dog", "a cat", "a bird"}},
                       r"^references must be a list .*not a set"),
    "references_bare_string": ("references", lambda x: {**x, "references": "a dog on the grass"},
                               r"^references must be a list .*not a single string"),
    "reference_int": ("references", lambda x: {**x, "references": _replace(x["references"], 1, ["a dog", 7])},
                      r"^references\[1\]\[1\] is an int \(7\), expected a string"),
    "reference_none": ("references", lambda x: {**x, "references": _replace(x["references"], 1, ["a dog", None])},
                       r"^references\[1\]\[1\] is a NoneType .*expected a string"),
    "reference_entry_none": ("references", lambda x: {**x, "references": _replace(x["references"], 1, None)},
                             r"^references\[1\] is missing"),
    "reference_entry_int": ("references", lambda x: {**x, "references": _replace(x["references"], 1, 7)},
                            r"^references\[1\] must be a list .*not an int"),
    "reference_entry_set": ("references", lambda x: {**x, "references": _replace(x["references"], 1, {"a", "b"})},
                            r"^references\[1\] must be a list .*not a set"),
    "reference_entry_dict": ("references", lambda x: {**x, "references": _replace(x["references"], 1, {"r": "a"})},
                             r"^references\[1\] must be a list .*not a dict"),
    "empty_reference_list": ("references", lambda x: {**x, "references": _replace(x["references"], 1, [])},
                             r"^references\[1\] is an empty reference list"),
    "empty_reference": ("references", lambda x: {**x, "references": _replace(x["references"], 1, ["a dog", ""])},
                        r"^references\[1\]\[1\] is an empty caption"),
    "fewer_references": ("references", lambda x: {**x, "references": x["references"][:2]},
                         r"(references=2|3 predictions but 2 reference entries)"),
    "references_missing": ("required references", lambda x: {**x, "references": None}, r"needs references"),
    "references_given": ("unused references", lambda x: {**x, "references": [["a dog"]] * 3}, r"takes no references"),
    "images_given": ("unused images", lambda x: {**x, "images": [Image.new("RGB", (W, H))] * 3}, r"takes no images"),
}


def _applies(metric, needs):
    if needs is None:
        return True
    *need, field = needs.split()
    if need:
        return getattr(_spec(metric), field) == need[0]
    return _uses(metric, field)


# empty and whitespace-only texts: refused by the metrics that do not score them; the COCO metrics score them as
# pycocoevalcap does by default, and refuse them under empty_caption="error" (tests/text/test_coco_empty_texts.py)
EMPTY_TEXT_CASES = ("empty_caption", "blank_caption", "empty_reference")


def _refused_case(metric, case):
    return case not in EMPTY_TEXT_CASES or not _spec(metric).scorer_class().scores_empty_text


CAPTION_PARAMS = [pytest.param(metric, door, case, id=f"{metric}-{door}-{case}") for metric, door in
                  (p.values for p in DOORS) for case, (needs, _, _) in sorted(CAPTION_CASES.items())
                  if _applies(metric, needs) and _refused_case(metric, case)]


@pytest.mark.parametrize("metric, door, case", CAPTION_PARAMS)
def test_bad_captions_and_references_are_refused_before_any_model_runs(metric, door, case, files, build,
                                                                       module_of, forwards):
    _, mutate, expected = CAPTION_CASES[case]
    _refused(door, metric, build, module_of, mutate(_good(metric, files)), forwards, expected)


@pytest.mark.parametrize("metric", MODULE_METRICS)
def test_module_indices_count_every_batch_added_and_restart_after_compute(metric, files, module_of, forwards):
    """add_batch / add errors name the index over all batches added; a refused batch leaves the added ones
    intact; compute() starts a new input."""
    module, good = module_of(metric), _good(metric, files)
    bad = {**good, "images": _replace(good["images"], 1, str(files / "truncated.jpg"))}
    module.add_batch(**{k: v for k, v in good.items() if v is not None})
    forwards.clear()
    with pytest.raises(InputError, match=r"^images\[4\]: .*truncated"):
        module.add_batch(**{k: v for k, v in bad.items() if v is not None})
    with pytest.raises(InputError, match=r"^predictions\[3\] is an empty caption"):
        module.add(prediction="", images=good["images"][0], reference=["a dog"] if good["references"] else None)
    assert forwards == []
    result = module.compute()
    assert len(result[f"{metric}_per_sample"]) == 3
    with pytest.raises(InputError, match=r"^images\[1\]: .*truncated"):
        module.compute(**{k: v for k, v in bad.items() if v is not None})


# ----------------------------------------------------------------- 16-bit images and half-precision tensors


def _same_text(metric, files, images, caption):
    """One caption (and the same references) for every image: per-sample scores differ only by the image."""
    n = len(images)
    return {"predictions": [caption] * n, "images": images,
            "references": [["a reference", "a picture"]] * n if _uses(metric, "references") else None}


def _per_sample(result):
    """Every per-sample score list of a result, as arrays (NaN where undefined)."""
    return {k: np.array(v, dtype=np.float64) for k, v in result.items()
            if k.endswith("_per_sample") and all(isinstance(x, (int, float)) for x in v)}


def _assert_same_scores(result, sample, like, metric):
    for key, values in _per_sample(result).items():
        np.testing.assert_allclose(values[sample], values[like], rtol=0, atol=1e-6, equal_nan=True,
                                   err_msg=f"{metric}: {key} of sample {sample} vs sample {like}")


@pytest.mark.parametrize("metric, door", SCORING_IMAGE_DOORS)
def test_sixteen_bit_images_score_like_their_eight_bit_values(metric, door, files, build, module_of):
    sixteen = np.asarray(Image.open(files / "sixteen.png"))
    assert Image.fromarray(sixteen).mode.startswith("I;16")
    images = [str(files / "eight.png"), Image.fromarray(sixteen), str(files / "sixteen.png"),
              str(files / "white.png")]
    result = _call(door, metric, build, module_of, _same_text(metric, files, images, "a dog on the grass"))
    _assert_same_scores(result, 1, 0, metric)  # an I;16 PIL image
    _assert_same_scores(result, 2, 0, metric)  # a 16-bit PNG file
    assert any(abs(v[3] - v[0]) > 1e-6 for v in _per_sample(result).values()), \
        "no score tells the 8-bit image from a white one: the check is blind"


@pytest.mark.parametrize("metric", MODULE_METRICS)
def test_a_repeated_image_file_is_decoded_once_and_no_scorer_changes_it(metric, files, build, monkeypatch):
    """The input layer hands every sample of a repeated file the same decoded object: scoring must leave its pixels,
    mode, size and metadata as they were (an in-place change would leak into the other samples)."""
    from capeval.core import inputs

    shared = []
    original = inputs.load_images

    def recording(*args, **kwargs):
        loaded = original(*args, **kwargs)
        shared.extend((image, image.mode, image.size, image.tobytes(), dict(image.info)) for image in loaded)
        return loaded

    monkeypatch.setattr(inputs, "load_images", recording)
    images = [str(files / "good.png"), str(files / "eight.png"), str(files / "good.png"), str(files / "good.png")]
    per_sample = _per_sample(build(metric).score(**_same_text(metric, files, images, "a dog on the grass")))
    assert shared[0][0] is shared[2][0] is shared[3][0]
    for image, mode, size, pixels, info in shared:
        assert (image.mode, image.size, image.tobytes(), dict(image.info)) == (mode, size, pixels, info), metric
    for values in per_sample.values():  # and its samples score alike
        np.testing.assert_allclose(values[[2, 3]], values[[0, 0]], rtol=0, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("metric, door", IMAGE_DOORS)
def test_half_precision_tensors_score_like_the_float32_tensor(metric, door, files, build, module_of):
    full = (torch.arange(3 * H * W) % 256).reshape(3, H, W).float() / 256  # exact in bfloat16 and float16
    halves = [full.to(torch.bfloat16), full.to(torch.float16)]
    assert all(torch.equal(h.float(), full) for h in halves)
    result = _call(door, metric, build, module_of, _same_text(metric, files, [full, *halves], "a pattern"))
    _assert_same_scores(result, 1, 0, metric)  # bfloat16
    _assert_same_scores(result, 2, 0, metric)  # float16


@pytest.mark.parametrize("metric", MODULE_METRICS)
def test_module_scores_the_pixels_that_load_scorer_scores(metric, files, build, module_of, tmp_path):
    """Images reach the scorer undecoded through evaluate's Arrow table: no lossy JPEG re-encoding of a PIL image
    read from bytes, no EXIF transposition, no re-reading the file of an image edited in memory."""
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=40)
    from_bytes = Image.open(io.BytesIO(buffer.getvalue()))
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 degrees
    Image.fromarray(pixels).save(tmp_path / "rotated.jpg", exif=exif.tobytes())
    Image.fromarray(pixels).save(tmp_path / "edited.png")
    edited = Image.open(tmp_path / "edited.png")
    edited.load()
    edited.paste((255, 0, 0), (0, 0, W // 2, H))
    images = [from_bytes, str(tmp_path / "rotated.jpg"), edited,
              *(Image.fromarray(pixels).convert(mode) for mode in ("1", "LA", "P", "RGBA", "CMYK", "YCbCr", "LAB"))]
    inputs = _same_text(metric, files, images, "a noisy picture")
    via_module, direct = (_per_sample(_call(door, metric, build, module_of, inputs)) for door in ("module", "scorer"))
    assert sorted(via_module) == sorted(direct)
    for key in direct:
        np.testing.assert_allclose(via_module[key], direct[key], rtol=0, atol=1e-6, equal_nan=True, err_msg=key)


@pytest.mark.parametrize("metric", [m for m in MODULE_METRICS if _spec(m).references == "optional"])
def test_module_scores_without_references_where_they_are_optional(metric, files, build, module_of):
    inputs = {**_good(metric, files), "references": None}
    via_module, direct = (_per_sample(_call(door, metric, build, module_of, inputs)) for door in ("module", "scorer"))
    assert sorted(via_module) == sorted(direct) and not any(k.startswith("ref") for k in direct)
    for key in direct:
        np.testing.assert_allclose(via_module[key], direct[key], rtol=0, atol=1e-6, equal_nan=True, err_msg=key)


# -------------------------------------------------------------------------------- token limits


def _truncation_warnings(caught):
    """Truncation warnings, grouped by their text without numbers (one group per tokenizer and limit)."""
    groups = {}
    for w in caught:
        text = str(w.message)
        if "truncat" in text:
            groups.setdefault(re.sub(r"\d+", "#", text), []).append(text)
    return groups


def _warned_once(caught):
    groups = _truncation_warnings(caught)
    assert groups, "no truncation warning"
    repeated = {k: v for k, v in groups.items() if len(v) > 1}
    assert not repeated, f"truncation warned more than once per call: {repeated}"


TRUNCATION_DOORS = [pytest.param(m, d, id=f"{m}-{d}") for m, d in (p.values for p in DOORS) if m in TOKEN_LIMITED]


def _truncating_call(metric, door, build, module_of, files, tag, long=True):
    """A call with two captions over the limit of three (new texts: ``tag``; ``long=False``: none over it); the
    scorer door's scorer has batch_size=1, so they fall in different batches. Returns (truncated_texts, warnings)."""
    text = LONG if long else "and a short tail"
    inputs = {**_good(metric, files), "predictions": [f"{tag} one {text}", "a short caption", f"{tag} two {text}"]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if door == "scorer":
            result = build(metric, batch_size=1).score(inputs["predictions"], images=inputs["images"],
                                                       references=inputs["references"])
        else:
            result = _call("module", metric, build, module_of, inputs)
    return result.get("truncated_texts"), caught


@pytest.mark.parametrize("metric, door", TRUNCATION_DOORS)
def test_captions_over_the_token_limit_are_counted_and_warned_once(metric, door, files, build, module_of):
    count, caught = _truncating_call(metric, door, build, module_of, files, f"{door} first")
    assert count is not None and count > 0, f"truncated_texts not counted: {count}"
    _warned_once(caught)


@pytest.mark.parametrize("metric, door", TRUNCATION_DOORS)
def test_a_repeated_call_counts_and_warns_again(metric, door, files, build, module_of):
    """The count is of the call's texts, whether their embeddings come from a cache or not, and of this call only."""
    first, _ = _truncating_call(metric, door, build, module_of, files, f"{door} repeated")
    again, warned_again = _truncating_call(metric, door, build, module_of, files, f"{door} repeated")
    none, warned_none = _truncating_call(metric, door, build, module_of, files, f"{door} repeated", long=False)
    assert none == 0, f"a call without long captions counts {none} truncated texts (those of earlier calls?)"
    assert first and again == first, f"the same input counts {first} truncated texts, then {again}"
    _warned_once(warned_again)
    assert not _truncation_warnings(warned_none)


# ------------------------------------------------------------------------------------------------- CLI


def _records(metric, n=10):
    records = []
    for i in range(n):
        record = {"caption": f"caption number {i}"}
        if _uses(metric, "images"):
            record["image"] = "good.png"
        if _uses(metric, "references"):
            record["references"] = [f"reference {i}", "a picture"]
        records.append(record)
    return records


def _set(key, value):
    return lambda record: {**record, key: value}


def _drop(key):
    return lambda record: {k: v for k, v in record.items() if k != key}


CLI_CASES = {  # case: (applies to metric, record 7 -> bad record 7, the message)
    "truncated_jpeg": ("images", _set("image", "truncated.jpg"), r"images\[7\]: .*truncated"),
    "truncated_png": ("images", _set("image", "truncated.png"), r"images\[7\]: .*truncated"),
    "text_file": ("images", _set("image", "notes.txt"), r"images\[7\]: .*not an image"),
    "directory": ("images", _set("image", "folder"), r"images\[7\]: .*is a directory"),
    "missing_path": ("images", _set("image", "missing.png"), r"images\[7\]: image file not found"),
    "decompression_bomb": ("images", _set("image", "bomb.png"), r"images\[7\]: refused as a decompression bomb"),
    "image_number": ("images", _set("image", 7), r"images\[7\]: unsupported image type int"),
    "no_image_field": ("images", _drop("image"), r"record 7: no 'image' field"),
    "image_null": ("images", _set("image", None), r"record 7: 'image' is null"),
    "image_dict_path_int": ("images", _set("image", {"path": 7}), r"images\[7\]: image dict 'path' is an int"),
    "empty_caption": (None, _set("caption", ""), r"predictions\[7\] is an empty caption"),
    "blank_caption": (None, _set("caption", "  \t"), r"predictions\[7\] is an empty caption"),
    "int_caption": (None, _set("caption", 7), r"predictions\[7\] is an int \(7\)"),
    "dict_caption": (None, _set("caption", {"text": "a dog"}), r"predictions\[7\] is a dict"),
    "list_caption": (None, _set("caption", ["a dog", "a cat"]), r"predictions\[7\] is a list"),
    "no_caption_field": (None, _drop("caption"), r"record 7: no 'caption' field"),
    "caption_null": (None, _set("caption", None), r"record 7: 'caption' is null"),
    "reference_int": ("references", _set("references", ["a dog", 7]), r"references\[7\]\[1\] is an int \(7\)"),
    "reference_null": ("references", _set("references", ["a dog", None]), r"references\[7\]\[1\] is a NoneType"),
    "references_dict": ("references", _set("references", {"a": "a dog"}),
                        r"references\[7\] must be a list .*not a dict"),
    "references_int": ("references", _set("references", 7), r"references\[7\] must be a list .*not an int"),
    "empty_reference_list": ("references", _set("references", []), r"references\[7\] is an empty reference list"),
    "empty_reference": ("references", _set("references", [""]), r"references\[7\]\[0\] is an empty caption"),
    "no_references_field": ("references", _drop("references"), r"record 7: no 'references' field"),
}
CLI_PARAMS = [pytest.param(metric, case, id=f"{metric}-{case}") for metric in METRICS
              for case, (needs, _, _) in sorted(CLI_CASES.items())
              if _applies(metric, needs) and _refused_case(metric, case)]


@pytest.mark.parametrize("metric, case", CLI_PARAMS)
def test_cli_refuses_bad_record_with_its_number_over_the_whole_input(metric, case, cli, build, forwards,
                                                                     monkeypatch):
    """Record 7 of 10 is bad; chunks of 3 (corpus-level metrics: one chunk). The message names record 7, and no
    model runs on its chunk (the chunks before it are scored: streaming)."""
    if case == "decompression_bomb":
        monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", BOMB_LIMIT)
    _, mutate, expected = CLI_CASES[case]
    records = _records(metric)
    records[7] = mutate(records[7])
    after_chunk = []  # forwards so far at the end of each chunk scored
    scorer = build(metric)  # the scorer the CLI gets (same options: cpu, --batch-size BATCH)
    score_inputs = scorer.score_inputs

    def spy(*args, **kwargs):
        result = score_inputs(*args, **kwargs)
        after_chunk.append(len(forwards))
        return result

    monkeypatch.setattr(scorer, "score_inputs", spy)
    forwards.clear()
    code, out, err = cli(metric, records)
    assert code == 2, (out, err)
    assert len(err) == 1, err
    assert err[0].startswith("capeval score: error: "), err
    assert re.search(expected, err[0]), err[0]
    chunks_before = 0 if _spec(metric).is_corpus_level({"device": "cpu"}) else 7 // CHUNK
    assert len(after_chunk) == chunks_before  # chunks [0-2], [3-5] scored (streaming); [6-8] refused
    assert len(forwards) == (after_chunk[-1] if after_chunk else 0), "a model ran on the bad record's chunk"


@pytest.mark.parametrize("metric", [m for m in MODULE_METRICS if m not in JUDGES])  # see SCORING_IMAGE_DOORS
def test_cli_sixteen_bit_png_scores_like_its_eight_bit_values(metric, cli, tmp_path):
    same = {"caption": "a dog on the grass", **({"references": ["a reference", "a picture"]}
                                                if _uses(metric, "references") else {})}
    records = [{**record, **same, "image": image}
               for record, image in zip(_records(metric, 3), ("eight.png", "sixteen.png", "white.png"))]
    code, out, err = cli(metric, records, "--output", str(tmp_path / "scores.jsonl"))
    assert code == 0, err
    rows = [json.loads(line)["scores"] for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    assert set(rows[1]) == set(rows[0])
    for key in rows[0]:
        assert rows[1][key] == pytest.approx(rows[0][key], abs=1e-6, nan_ok=True), key
    assert any(rows[2][key] != pytest.approx(rows[0][key], abs=1e-6, nan_ok=True) for key in rows[0]), \
        "no score tells the 8-bit image from a white one: the check is blind"


@pytest.mark.parametrize("metric", TOKEN_LIMITED)
def test_cli_counts_and_warns_once_about_captions_over_the_token_limit(metric, cli):
    records = _records(metric)
    records[7]["caption"] = f"cli {LONG}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, out, err = cli(metric, records)
    assert code == 0, err
    summary = json.loads(out)
    assert summary.get("truncated_texts", 0) > 0, summary
    _warned_once(caught)


# ------------------------------------------------------------------- bad options and runtime (every door)
#
# Each case gives CLIP-S a bad option or runtime value; a suite asks for PAC-S first, so a refusal that came only
# when CLIP-S loads would come after PAC-S loaded. The hub cache is empty: any model load fails with another error
# (ModelNotAvailableError), which the control test below shows at every door that loads.

SUITE = ["pac_s", "clip_s"]
BAD_OPTIONS = {  # case: (CLIP-S's options, the runtime, what the message says)
    "precision_misspelt": ({"precision": "offcial"}, {},
                           r"clip_s: precision must be one of \(None, 'official'\), not 'offcial'"),
    "definition_unknown": ({"definition": "papers"}, {},
                           r"clip_s: definition must be one of \('paper', 'torchmetrics'\), not 'papers'"),
    "batch_size_as_text": ({"batch_size": "8"}, {}, r"clip_s: batch_size must be a positive integer, not '8'"),
    "device_gpu": ({}, {"device": "gpu"}, r"device='gpu': unknown device 'gpu'"),
    "dtype_float64": ({}, {"dtype": "float64"}, r"dtype='float64': unsupported dtype 'float64'"),
    "negative_batch_size": ({}, {"batch_size": -3}, r"batch_size must be a positive integer, not -3"),
    "precision_with_dtype": ({"precision": "official"}, {"dtype": "float16"},
                             r"clip_s: precision='official' sets the dtypes itself"),
}
SINGLE_DOORS = ("load_scorer", "evaluate_load", "trainer_hook", "cli_score")
SUITE_DOORS = ("resolve_plan", "evaluate_captions", "cocoevalcap", "trainer_suite", "cli_evaluate")


@pytest.fixture
def evaluation_files(tmp_path, files):
    """COCO annotations and results of two images (both ``good.png``) under ``tmp_path``."""
    annotations = {"images": [{"id": i, "file_name": "good.png"} for i in (1, 2)],
                   "annotations": [{"id": i, "image_id": i, "caption": f"a reference {i}"} for i in (1, 2)]}
    (tmp_path / "annotations.json").write_text(json.dumps(annotations))
    (tmp_path / "results.json").write_text(json.dumps([{"image_id": i, "caption": f"a caption {i}"} for i in (1, 2)]))
    (tmp_path / "records.jsonl").write_text(json.dumps({"caption": "a dog", "image": "good.png"}) + "\n")
    return tmp_path


def _cli(argv, capsys):
    """(exit code, stderr) of the CLI."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err


def _written(value) -> str:
    """A value as ``--option`` takes it: text that would not parse as JSON as itself, anything else as JSON."""
    from capeval.cli.options import json_or_text

    return value if isinstance(value, str) and json_or_text(value) == value else json.dumps(value)


def _through_door(door, options, runtime, where, files, capsys):
    """Call ``door`` with CLIP-S's ``options`` and the ``runtime`` (a single-metric door: both as CLIP-S's options;
    a suite: the runtime for the suite, ``options`` a mapping of metric → options); a CLI's error line is raised as
    the InputError it reports."""
    from capeval.cocoevalcap import COCOEvalCap
    from capeval.integrations.transformers import make_compute_metrics
    from capeval.suite.plan import resolve_plan
    from capeval.suite.run import evaluate_captions

    annotations, results = str(where / "annotations.json"), str(where / "results.json")
    if door == "load_scorer":
        return scoring.load_scorer("clip_s", **runtime, **options)
    if door == "evaluate_load":
        import evaluate

        return evaluate.load(str(REPO / "metrics" / "clip_s"), **runtime, **options)
    if door == "trainer_hook":
        return make_compute_metrics("clip_s", None, None, metric_options={**runtime, **options})
    if door == "resolve_plan":
        return resolve_plan(SUITE, options, **runtime)
    if door == "evaluate_captions":
        return evaluate_captions([results], annotations=annotations, images=str(files), metrics=SUITE,
                                 options=options, **runtime)
    if door == "cocoevalcap":
        return COCOEvalCap(annotations, results, metrics=SUITE, images=str(files), quiet=True, **runtime,
                           **options).evaluate()
    if door == "trainer_suite":
        return make_compute_metrics(SUITE, None, None, metric_options={**runtime, **options})
    settings = [a for option, value in runtime.items() for a in ("--option", f"clip_s.{option}={_written(value)}")]
    if door == "cli_score":
        settings += [a for option, value in options.items() for a in ("--option", f"{option}={_written(value)}")]
        argv = ["score", "clip_s", "--input", str(where / "records.jsonl"), "--images", str(files), *settings]
    else:
        (where / "options.json").write_text(json.dumps(options))
        argv = ["evaluate", "--annotations", annotations, "--results", results, "--images", str(files),
                "--metrics", *SUITE, "--options", str(where / "options.json"), *settings]
    code, err = _cli(argv, capsys)
    assert code == 2 and ": error: " in err, err
    raise InputError(err.strip().split(": error: ", 1)[1])


@pytest.mark.parametrize("case", sorted(BAD_OPTIONS))
@pytest.mark.parametrize("door", SINGLE_DOORS + SUITE_DOORS)
def test_bad_options_and_runtime_are_refused_at_every_door_before_any_model_loads(
        door, case, evaluation_files, files, empty_weights_cache, clip_loads, capsys):
    options, runtime, expected = BAD_OPTIONS[case]
    if door in SUITE_DOORS:
        options = {"clip_s": options} if options else {}
    with pytest.raises(InputError) as error:
        _through_door(door, options, runtime, evaluation_files, files, capsys)
    message = str(error.value)
    assert re.search(expected, message) and "\n" not in message, message
    if door in SINGLE_DOORS or options:  # the metric is named (a suite's runtime is no metric's)
        assert "clip_s" in message, message
    assert clip_loads == []


@pytest.mark.parametrize("door", SUITE_DOORS)
def test_one_metric_under_two_spellings_is_refused_naming_both(door, evaluation_files, files, empty_weights_cache,
                                                               clip_loads, capsys):
    options = {"clip_s": {"precision": "official"}, "CLIPScore": {}}
    with pytest.raises(InputError, match=r"clip_s is given twice, as 'clip_s' and 'CLIPScore'"):
        _through_door(door, options, {}, evaluation_files, files, capsys)
    assert clip_loads == []


def test_cocoevalcap_takes_a_metric_s_options_under_another_spelling(evaluation_files):
    """Its ``coco_backend`` joins the options under the spelling given, so one spelling is not mistaken for two."""
    from capeval.cocoevalcap import COCOEvalCap

    scored = COCOEvalCap(str(evaluation_files / "annotations.json"), str(evaluation_files / "results.json"),
                         metrics=["cider"], quiet=True, **{"CIDEr-D": {"coco_backend": "python"}})
    scored.evaluate()
    assert set(scored.eval) == {"CIDEr"}


@pytest.mark.parametrize("door", [d for d in SINGLE_DOORS + SUITE_DOORS if d not in ("resolve_plan", "trainer_suite")])
def test_the_doors_with_good_options_reach_a_model_load(door, evaluation_files, files, empty_weights_cache, capsys):
    """The control of the refusals above: with good options every door that loads gets as far as a load, which the
    empty hub cache fails (a ModelNotAvailableError, or the CLI's one line naming the weights)."""
    options = {"definition": "paper"}
    if door in SUITE_DOORS:
        options = {"clip_s": options}
    with pytest.raises((ModelNotAvailableError, InputError)) as error:
        _through_door(door, options, {"device": "cpu"}, evaluation_files, files, capsys)
    assert isinstance(error.value, ModelNotAvailableError) or re.search(r"could not load|not in the Hugging Face cache",
                                                                        str(error.value)), error.value
