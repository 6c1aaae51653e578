"""Shared fixtures: an offline tiny hub cache, and the reference data beside the repository; the fast loop's tests."""

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

for _var in ("HF_HUB_OFFLINE", "HF_EVALUATE_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_var] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):  # `-n 2` on 2 cores: one thread per worker, not two workers of two threads
    os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# The fast loop, `python -m pytest -q -n 2 --dist worksteal -m "not slow" tests`, runs the tests named here (the one
# place they are named): a module path keeps the whole module, a node id one test (all its parameters); every other
# test is marked slow.
# The scorer contract leaves out the scorers that start Java per call (pycocoevalcap's PTB tokenizer, METEOR, SPICE).
# tests/test_fast_subset.py checks that the loop keeps the architecture test, a contract of every family and a test
# of every test folder; a new test folder needs an entry here.
FAST_TESTS = (
    "tests/test_architecture.py",
    "tests/test_fast_subset.py",
    "tests/backbones/test_clip_tokenize.py",
    "tests/benchmarks/test_dataset_cards.py",
    "tests/blip2/test_blip2_scorer.py",
    "tests/clip_s/test_clip_s_scorer.py",
    "tests/core/test_inputs.py",
    "tests/core/test_option_types.py",
    "tests/core/test_scorer_contract.py",
    "tests/detail/test_capture_scorer.py::test_capture_equals_the_pure_functions_on_the_same_parses",
    "tests/ensembeval/test_ensembeval_fit.py::test_selection_matches_sklearn_default_cv_and_is_unshuffled",
    "tests/functional/test_agreement.py",
    "tests/functional/test_fleur.py",
    "tests/functional/test_hice_functional.py",
    "tests/functional/test_polos_functional.py",
    "tests/functional/test_roundtrip_functional.py",
    "tests/functional/test_similarity.py",
    "tests/functional/test_vcrscore_functional.py",
    "tests/hice_s/test_phrases.py::test_spacy_fallback_phrases",
    "tests/image_roundtrip/test_roundtrip_pipeline.py",
    "tests/judges/test_judge_options.py",
    "tests/meta_eval/test_resampled.py",
    "tests/polos/test_head_rows.py",
    "tests/report/test_markdown_table.py",
    "tests/report/test_report_details.py",
    "tests/report/test_report_set.py",
    "tests/statistics/test_clusters.py",
    "tests/statistics/test_systems_no_test.py",
    "tests/suite/test_run_evaluate_captions.py",
    "tests/surfaces/test_capture_demo.py::test_the_view_marks_both_sides_and_escapes_every_text",
    "tests/surfaces/test_module_cards.py",
    "tests/text/test_fixed_idf_cider.py",
    "tests/text/test_meteor_index_sharing.py",
    "tests/text/test_mpnet.py",
    "tests/vcrscore/test_vcrscore_models.py",
)
SLOW_PARAMETERS = {
    "tests/core/test_scorer_contract.py": ("bleu", "cider", "cider_fixed_idf", "meteor", "rouge_l", "spice"),
}


def _named(nodeid: str) -> bool:
    return any(nodeid == fast or nodeid.startswith((fast + "::", fast + "[")) for fast in FAST_TESTS)


def is_slow(nodeid: str) -> bool:
    """Whether a node id (``tests/x.py::test_y[param]``) is left out of the fast loop."""
    module, _, test = nodeid.partition("::")
    parameter = test.partition("[")[2][:-1]
    return not _named(nodeid) or parameter in SLOW_PARAMETERS.get(module, ())


def pytest_ignore_collect(collection_path, config):
    """With exactly ``-m "not slow"``, a module without a fast test is not even imported."""
    if (config.getoption("markexpr", "").strip() == "not slow" and collection_path.match("test_*.py")
            and collection_path.is_relative_to(config.rootpath)):
        module = collection_path.relative_to(config.rootpath).as_posix()
        return not any(fast == module or fast.startswith(module + "::") for fast in FAST_TESTS) or None
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def fast_loop():
    """``FAST_TESTS``, ``SLOW_PARAMETERS`` and ``is_slow``, for the test that checks what the fast loop keeps."""
    return SimpleNamespace(fast_tests=FAST_TESTS, slow_parameters=SLOW_PARAMETERS, is_slow=is_slow)


def run_folder(tmp_path_factory, config) -> Path:
    """A folder of this test run that its pytest-xdist workers share (each worker's base temp folder is a child of
    the run's); the session's base temp folder without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


@pytest.fixture(scope="session", autouse=True)
def run_capeval_cache(tmp_path_factory, pytestconfig):
    """``$CAPEVAL_CACHE`` as given, else a fresh folder for the run (shared by its workers), never the user's
    ~/.cache/capeval: what one run writes (the METEOR index, benchmark scores, converted weights) no other sees. Set
    it to reuse one across runs (the METEOR paraphrase index takes about 20 s to build)."""
    if not os.environ.get("CAPEVAL_CACHE"):
        os.environ["CAPEVAL_CACHE"] = str(run_folder(tmp_path_factory, pytestconfig) / "capeval-cache")
    return Path(os.environ["CAPEVAL_CACHE"])


@pytest.fixture(scope="session")
def source_tree_lock():
    """Held (``with source_tree_lock:``) by a test while it builds a wheel from the checkout: the build writes
    build/ and capeval.egg-info in place, which another build at the same time (an xdist worker, another run) would
    share."""
    import hashlib
    import tempfile

    from filelock import FileLock

    checkout = hashlib.sha256(str(REPO).encode()).hexdigest()[:16]
    return FileLock(str(Path(tempfile.gettempdir()) / f"capeval-source-build-{checkout}.lock"))


@pytest.fixture(scope="session")
def tiny_hub(tmp_path_factory):
    """A hub cache holding a tiny random model for every registered weight; set as HF_HUB_CACHE (one per xdist
    worker; a ``CAPEVAL_TEST_HUB_CACHE`` that several processes share is filled by one at a time)."""
    from filelock import FileLock

    from capeval.testing import populate_tiny_hub_cache

    cache = Path(os.environ.get("CAPEVAL_TEST_HUB_CACHE") or tmp_path_factory.mktemp("hub"))
    with FileLock(str(cache) + ".lock"):
        populate_tiny_hub_cache(cache)
    old = os.environ.get("HF_HUB_CACHE")
    os.environ["HF_HUB_CACHE"] = str(cache)
    import huggingface_hub.constants as hub_constants

    old_const = hub_constants.HF_HUB_CACHE
    hub_constants.HF_HUB_CACHE = str(cache)
    yield cache
    hub_constants.HF_HUB_CACHE = old_const
    if old is None:
        os.environ.pop("HF_HUB_CACHE", None)
    else:
        os.environ["HF_HUB_CACHE"] = old


@pytest.fixture(scope="session")
def pycocoevalcap_meteor():
    """pycocoevalcap 1.2's own ``Meteor`` (its jar and options), started once per test process: each SCORE line is
    answered from that line alone and each ``compute_score`` sends its own EVAL line, so tests can share it (its JVM starts in about 6-13 s)."""
    from pycocoevalcap.meteor.meteor import Meteor

    from capeval.text.coco_jars import require_java

    require_java("the pycocoevalcap METEOR oracle")  # the jar is the oracle: no Java fails
    meteor = Meteor()
    yield meteor
    meteor.meteor_p.stdin.close()
    meteor.meteor_p.kill()
    meteor.meteor_p.wait()


@pytest.fixture
def empty_weights_cache(tmp_path, monkeypatch):
    """An empty offline hub cache: any model load fails (with a ModelNotAvailableError naming the weights)."""
    import huggingface_hub.constants as hub_constants

    cache = tmp_path / "empty-hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def shared_data():
    """``../shared/data``: required in CI (fails loudly), skipped with a reason elsewhere."""
    if not SHARED_DATA.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"reference data {SHARED_DATA} is missing in CI")
        pytest.skip(f"reference data {SHARED_DATA} not available")
    return SHARED_DATA


@pytest.fixture
def segments_each_image_once():
    """Check a ``SegmentEverything``: one generator call per distinct image, ≤ 5 boolean masks of the image's size,
    largest first, the same masks again from the cache."""
    import numpy as np
    from PIL import Image

    def check(regions):
        image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8))
        calls = []
        original = regions.generator.generate
        regions.generator.generate = lambda array: calls.append(array.shape) or original(array)
        masks = regions.masks(image)
        again = regions.masks(image.copy())
        assert calls == [(48, 64, 3)]
        assert 1 <= len(masks) <= 5 and all(m.shape == (48, 64) and m.dtype == bool for m in masks)
        areas = [int(m.sum()) for m in masks]
        assert areas == sorted(areas, reverse=True)
        assert all(np.array_equal(a, b) for a, b in zip(masks, again))

    return check


@pytest.fixture(scope="module")
def forwards():
    """Every torch module forward in the process, recorded by a global pre-hook (nothing is replaced); tests
    ``clear()`` it before the calls they check."""
    import torch

    calls = []
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda module, args: calls.append(module))
    yield calls
    handle.remove()


@pytest.fixture
def clip_loads(monkeypatch):
    """The weights of every ClipBackbone built (the real constructor runs)."""
    from capeval.backbones.clip import ClipBackbone

    loads = []
    init = ClipBackbone.__init__

    def counting_init(self, weights, **options):
        loads.append(weights)
        init(self, weights, **options)

    monkeypatch.setattr(ClipBackbone, "__init__", counting_init)
    return loads


@pytest.fixture(scope="session", autouse=True)
def reports_follow_their_schema():
    """In every test, each report document the suite builds (``capeval.suite.run.build_report``) and each
    report.json written for a document that names a schema are validated against ``report.schema.json``: the real
    builder and writer run unchanged, the check follows them (``capeval.report.schema.validate_report``)."""
    import json

    import capeval.report.write as write
    import capeval.suite.run as run
    from capeval.report.schema import validate_report

    build_report, write_report = run.build_report, write.write_report

    def build_and_validate(*args, **kwargs):
        document = build_report(*args, **kwargs)
        validate_report(document)
        return document

    def write_and_validate(report, *args, **kwargs):
        paths = write_report(report, *args, **kwargs)
        if "schema" in report:
            validate_report(json.loads(paths["json"].read_text(encoding="utf-8")))
        return paths

    run.build_report, write.write_report = build_and_validate, write_and_validate
    yield
    run.build_report, write.write_report = build_report, write_report
