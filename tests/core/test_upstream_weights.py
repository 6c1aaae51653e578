"""Weights converted from the authors' files: a real HTTP server on 127.0.0.1 serves fabricated official files (the
tiny models of ``capeval.testing`` in each official key layout and container); ``resolve`` downloads, checks,
converts and caches them, and scorers load them with the server stopped. Bad files are refused with nothing
executed and nothing half-written left behind."""

import dataclasses
import hashlib
import http.server
import io
import json
import os
import pickle
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from capeval.core import hub
from capeval.core.constants import PROVENANCE_FILE, TINY_MARKER_FILE
from capeval.core.errors import ConversionError, ModelNotAvailableError
from capeval.core.hub import MIRROR_ENV, converted_dir, downloads_dir, load_safetensors, registered_weights, resolve
from capeval.core.scoring import load_scorer
from capeval.testing import TINY_BUILDERS, populate_tiny_hub_cache
from capeval.testing.tiny_long_clip import tiny_long_clip_state_dict

from memo import memoised

UPSTREAM = sorted(name for name, spec in registered_weights().items() if spec.upstream is not None)
PUBLISHED_SHA256 = {name: registered_weights()[name].upstream.sha256 for name in UPSTREAM}
REGIONS = {"points_per_side": 4, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0, "max_regions": 3}


class Server:
    """``http.server`` in a thread on 127.0.0.1 (random port) serving ``files`` (name → bytes) with HTTP Range
    support; names in ``truncate`` announce their full length but send half; names in ``html`` are sent as an HTML
    page. Each version of a file has an ``ETag`` (its sha256's head) and ``If-Range`` is honoured, as by the hub and
    GitHub; ``validators = False`` sends no ETag, ``honour_if_range = False`` sends the range whatever the version;
    with ``held`` (a ``threading.Event``) set on the server, each body stops after its first half until it is set.
    ``requests`` records (name, Range header) of every GET."""

    def __init__(self):
        self.files, self.truncate, self.html, self.requests = {}, set(), set(), []
        self.validators, self.honour_if_range, self.held = True, True, None
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                name = self.path.lstrip("/")
                server.requests.append((name, self.headers.get("Range")))
                if name not in server.files:
                    self.send_error(404)
                    return
                data, start = server.files[name], 0
                etag = f'"{hashlib.sha256(data).hexdigest()[:16]}"'
                wanted = self.headers.get("Range")
                if wanted and server.honour_if_range and self.headers.get("If-Range") not in (None, etag):
                    wanted = None  # another version than the client's: the whole file
                if wanted:
                    start = int(wanted.split("=")[1].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                if server.validators:
                    self.send_header("ETag", etag)
                self.send_header("Content-Type", "text/html" if name in server.html else "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                body = body[: len(body) // 2] if name in server.truncate else body
                self.wfile.write(body[: len(body) // 2])
                if server.held is not None:
                    self.wfile.flush()
                    server.held.wait(timeout=600)
                self.wfile.write(body[len(body) // 2:])

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # ``stop`` waits for the loop's next poll: 0.05 s, not the default 0.5 s, at the end of every test
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _saved(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _polos_zip(head_dir: Path) -> bytes:
    """``reprod.zip``: a PyTorch-Lightning checkpoint with the official Polos keys (+ encoder tensors whose shapes
    give the feature sizes) and ``hparams.yaml`` beside it."""
    head = load_safetensors(head_dir / "polos_head.safetensors")
    config = json.loads((head_dir / "polos_config.json").read_text())
    state = {f"scalar_mix.scalar_parameters.{i}": v.reshape(1) for i, v in enumerate(head["scalar_parameters"])}
    state["scalar_mix.gamma"] = head["gamma"]
    for ours, i in (("mlp.0", 1), ("mlp.3", 2), ("mlp.6", 3)):
        for part in ("weight", "bias"):
            state[f"ff.0.ff.linear_{i}.{part}"] = head[f"{ours}.{part}"]
    state["encoder.model.embeddings.word_embeddings.weight"] = torch.zeros(8, config["text_dim"])
    state["clip.text_projection"] = torch.zeros(64, config["clip_dim"])
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("reprod/checkpoints/epoch=3-step=1200.ckpt", _saved({"epoch": 3, "state_dict": state}))
        archive.writestr("reprod/hparams.yaml", "layer: mix\npool: cls\nactivations: Tanh\nfinal_activation: false\n"
                                                "pretrained_model: princeton-nlp/sup-simcse-roberta-base\n")
    return buffer.getvalue()


def fitted_gbr():
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(0, 100, 120), rng.normal(0, 3, 120), rng.uniform(0, 1, 120)])
    return GradientBoostingRegressor(n_estimators=6, random_state=0).fit(x, 0.004 * x[:, 0] + 0.3 * x[:, 2]), x


# the detailed-caption family's nltk_data packages: the folder their zip unpacks under
NLTK_PACKAGES = {"nltk-punkt-tab": "tokenizers", "nltk-averaged-perceptron-tagger-eng": "taggers",
                 "nltk-wordnet": "corpora"}


def _zipped(folder: Path, prefix: str) -> bytes:
    """Every file under ``folder`` in a zip, at ``prefix`` + its path there."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            archive.writestr(prefix + path.relative_to(folder).as_posix(), path.read_bytes())
    return buffer.getvalue()


def fabricate(name: str, tiny_dir: Path) -> bytes:
    """The official file of upstream weight ``name``, made from its tiny stand-in (written to ``tiny_dir``)."""
    if name == "mobile-sam":  # SAM's decoder and a MobileSAM-sized TinyViT: the converter accepts only that
        from capeval.backbones.sam import SAM_ARCHITECTURES, build_sam

        torch.manual_seed(0)
        return _saved(build_sam(SAM_ARCHITECTURES["mobile_sam"]).state_dict())
    if name == "vcrscore-gbr":
        return pickle.dumps(fitted_gbr()[0])
    if name.startswith("long-clip-"):  # the authors' plain state dict with its two 248-row positional embeddings
        return _saved(tiny_long_clip_state_dict(patch_size=16 if name == "long-clip-b" else 14))
    TINY_BUILDERS[name](tiny_dir)
    if name in NLTK_PACKAGES:  # nltk_data's zip: the package folder at the top (its subdir left out)
        return _zipped(tiny_dir / NLTK_PACKAGES[name], "")
    if name == "factual-spice-synonyms":  # FactualSceneGraph's wheel: the files deep in the package
        return _zipped(tiny_dir, "factual_scene_graph/evaluation/resources/")
    if name == "polos":
        return _polos_zip(tiny_dir)
    if name.startswith("sam-"):  # a plain state dict, official keys
        return _saved(load_safetensors(tiny_dir / "sam_model.safetensors"))
    state = load_safetensors(tiny_dir / "open_clip_model.safetensors")
    if name.startswith("pacs-"):  # {"state_dict": OpenAI-format CLIP}, DataParallel "module." keys
        return _saved({"state_dict": {f"module.{k}": v for k, v in state.items()}, "epoch": 7})
    if name.startswith("alpha-clip-"):  # the visual tower only, official attention parameter names
        return _saved({k[len("visual."):].replace("in_proj_weight", "in_proj.weight").replace("in_proj_bias",
                                                                                              "in_proj.bias"): v
                       for k, v in state.items() if k.startswith("visual.")})
    return _saved(state)  # MCIP: an OpenCLIP state dict


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def with_sha256(monkeypatch, name: str, digest) -> None:
    """Register ``name`` with another expected sha256 (the fabricated file's: the published one is the real file's)."""
    spec = registered_weights()[name]
    monkeypatch.setitem(hub._REGISTRY, name, dataclasses.replace(
        spec, upstream=dataclasses.replace(spec.upstream, sha256=digest)))


def hub_without_capeval_repos(tiny_hub: Path, out: Path) -> Path:
    """A hub cache with every tiny repo except capeval's own (which are not published yet)."""
    out.mkdir()
    for repo in tiny_hub.iterdir():
        if not repo.name.startswith("models--capeval--"):
            (out / repo.name).symlink_to(repo, target_is_directory=True)
    return out


def use_caches(monkeypatch, hub_cache: Path, capeval_cache: Path) -> None:
    import huggingface_hub.constants as hub_constants

    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setenv("CAPEVAL_CACHE", str(capeval_cache))


def tiny_sam_architecture(monkeypatch, tmp: Path) -> None:
    """The SAM converter accepts segment-anything's registry architectures only: add the tiny one to them."""
    from capeval.backbones.sam import SAM_ARCHITECTURES

    TINY_BUILDERS["sam-vit-b"](tmp / "sam-arch")
    monkeypatch.setitem(SAM_ARCHITECTURES, "tiny_test", json.loads((tmp / "sam-arch" / "sam_config.json").read_text()))


@pytest.fixture(scope="module")
def fetched(tiny_hub, tmp_path_factory):
    """Every upstream weight downloaded from the local server and converted; then the server is stopped and
    ``HF_HUB_OFFLINE=1`` is set again."""
    tmp = tmp_path_factory.mktemp("upstream")
    official = {name: fabricate(name, tmp / "tiny" / name) for name in UPSTREAM}
    server = Server()
    with pytest.MonkeyPatch.context() as mp:
        use_caches(mp, hub_without_capeval_repos(tiny_hub, tmp / "hub"), tmp / "capeval-cache")
        tiny_sam_architecture(mp, tmp)
        mp.delenv("HF_HUB_OFFLINE")
        mp.setenv(MIRROR_ENV, server.url)
        for name, data in official.items():
            server.files[registered_weights()[name].upstream.filename] = data
            if registered_weights()[name].upstream.sha256:
                with_sha256(mp, name, sha256(data))
        directories = {name: resolve(name) for name in UPSTREAM}
        server.stop()
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield SimpleNamespace(directories=directories, official=official, requests=list(server.requests), tmp=tmp)


def test_every_capeval_artifact_names_an_upstream_file_and_a_registered_converter():
    from capeval.core.convert import converters

    specs = registered_weights()
    assert UPSTREAM == sorted(n for n, s in specs.items() if s.repo_id.startswith("capeval/"))
    assert len(UPSTREAM) == 18
    for name in UPSTREAM:
        upstream = specs[name].upstream
        assert upstream.converter in converters(), name
        assert upstream.url is None or upstream.url.startswith("https://"), name
        assert upstream.url or upstream.page, name
        assert upstream.sha256 is None or len(upstream.sha256) == 64 and int(upstream.sha256, 16) >= 0, name
    assert len({specs[n].upstream.filename for n in UPSTREAM}) == len(UPSTREAM)  # one flat mirror serves them all


@pytest.mark.parametrize("name", UPSTREAM)
def test_upstream_file_is_downloaded_once_checked_converted_and_cached_with_provenance(fetched, name):
    spec = registered_weights()[name]
    directory = fetched.directories[name]
    assert directory == converted_dir(name) and all((directory / f).is_file() for f in spec.files)
    assert [r for r in fetched.requests if r[0] == spec.upstream.filename] == [(spec.upstream.filename, None)]
    provenance = json.loads((directory / PROVENANCE_FILE).read_text())
    assert provenance["sha256"] == sha256(fetched.official[name])
    assert provenance["converter"] == spec.upstream.converter and provenance["capeval_version"]
    assert provenance["source"] == (spec.upstream.url or spec.upstream.page)
    assert not (directory / TINY_MARKER_FILE).exists()
    assert not any(downloads_dir().iterdir())  # the official file is dropped once converted
    assert resolve(name) == directory  # again: offline, server stopped, from capeval's cache


def _image(seed=0):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 255, (40, 56, 3), dtype=np.uint8))


def _score(metric, **options):
    """(result, weights directories loaded) of ``metric`` on two captions of one small random image (one image:
    segment-everything runs once)."""
    with hub.recording_resolutions() as loaded:
        scorer = load_scorer(metric, device="cpu", **options)
    images = None if scorer.images == "unused" else [_image(0), _image(0)]
    result = scorer.score(["two dogs run on the grass", "a man rides a horse"], images,
                          [["dogs on a lawn", "two brown dogs"], ["a rider on a horse"]])
    return result, [Path(directory) for _, directory in loaded]


# how each converted weight is used by a scorer: (metric, option naming it, other options)
USES = {"pacs-clip-vit-b-32": ("pac_s", "weights", {}), "pacs-openclip-vit-l-14": ("pac_s", "weights", {}),
        "polos": ("polos", "weights", {}), "mcip-vit-l-14-336": ("vcrscore", "mcip", {}),
        "vcrscore-gbr": ("vcrscore", "weights", {}),
        "long-clip-b": ("clip_s", "weights", {}), "long-clip-l": ("clip_s", "weights", {}),
        **{n: ("hice_s", "weights", {"sam": "sam-vit-b", "region_settings": REGIONS})
           for n in UPSTREAM if n.startswith("alpha-clip")},
        **{n: ("hice_s", "sam", {"weights": "alpha-clip-vit-b-16", "region_settings": REGIONS})
           for n in UPSTREAM if "sam" in n},
        **{n: ("capture", None, {}) for n in NLTK_PACKAGES}, "factual-spice-synonyms": ("spice_factual", "synonyms", {})}


@pytest.fixture(scope="module")
def scored(fetched):
    """``_score`` once per metric and options for the module (the tests below ask for some of them twice)."""
    return memoised(_score)


@pytest.mark.parametrize("name", UPSTREAM)
def test_scorer_loads_the_converted_weights_offline(fetched, scored, name):
    metric, option, options = USES[name]
    result, loaded = scored(metric, **({option: name} if option else {}), **options)  # None: loaded by its name
    assert len(result[f"{metric}_per_sample"]) == 2 and np.isfinite(result[f"{metric}_per_sample"]).all()
    assert fetched.directories[name] in loaded


@pytest.mark.parametrize("name", ["pacs-clip-vit-b-32", "pacs-openclip-vit-l-14", "polos"])
def test_scores_from_the_converted_official_file_equal_scores_from_the_source_weights(fetched, scored, name):
    metric, option, _ = USES[name]
    converted, _ = scored(metric, **{option: name})
    source, _ = _score(metric, **{option: str(fetched.tmp / "tiny" / name)})
    keys = [k for k in source if k.endswith("_per_sample")]
    assert keys == [k for k in converted if k.endswith("_per_sample")] and keys
    for key in keys:
        np.testing.assert_allclose(converted[key], source[key], rtol=0, atol=1e-6)


def test_converted_tensors_equal_the_official_ones(fetched):
    for name in ("pacs-clip-vit-b-32", "mcip-vit-l-14-336", "sam-vit-l"):
        source = torch.load(io.BytesIO(fetched.official[name]), weights_only=True)
        source = {k.replace("module.", ""): v for k, v in source.get("state_dict", source).items()}
        weights_file = "sam_model.safetensors" if name.startswith("sam") else "open_clip_model.safetensors"
        converted = load_safetensors(fetched.directories[name] / weights_file)
        assert all(torch.equal(converted[k], v) for k, v in source.items()), name
    visual = torch.load(io.BytesIO(fetched.official["alpha-clip-vit-l-14"]), weights_only=True)
    converted = load_safetensors(fetched.directories["alpha-clip-vit-l-14"] / "open_clip_model.safetensors")
    assert torch.equal(converted["visual.conv1_alpha.weight"], visual["conv1_alpha.weight"])
    assert torch.equal(converted["visual.transformer.resblocks.0.attn.in_proj_weight"],
                       visual["transformer.resblocks.0.attn.in_proj.weight"])


def test_converted_regressor_predicts_as_the_official_sklearn_model(fetched):
    from capeval.vcrscore.gradient_boosting import predict
    from capeval.vcrscore.regressor import load_regressor

    model, x = fitted_gbr()
    np.testing.assert_allclose(predict(load_regressor("vcrscore-gbr"), x[:20]), model.predict(x[:20]), rtol=0,
                               atol=1e-12)


# -- refusals: nothing executed, nothing half-written -------------------------------------------------------------

@pytest.fixture
def online(tiny_hub, tmp_path, monkeypatch):
    """Empty capeval cache, hub cache without capeval's repos, a fresh local server as the mirror, online."""
    use_caches(monkeypatch, hub_without_capeval_repos(tiny_hub, tmp_path / "hub"), tmp_path / "capeval-cache")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    server = Server()
    monkeypatch.setenv(MIRROR_ENV, server.url)
    yield server
    server.stop()


def _nothing_left(name):
    weights_root = converted_dir(name).parent
    assert not converted_dir(name).exists()
    assert not weights_root.exists() or not any(weights_root.iterdir())  # no temporary conversion folder either
    assert not (downloads_dir() / registered_weights()[name].upstream.filename).exists()


def test_a_file_with_another_hash_than_the_published_one_is_refused_naming_both(online, tmp_path, monkeypatch):
    name = "sam-vit-b"
    with_sha256(monkeypatch, name, PUBLISHED_SHA256[name])  # (the module's fixture registers the fabricated one)
    online.files["sam_vit_b_01ec64.pth"] = data = fabricate(name, tmp_path / "tiny")
    with pytest.raises(ModelNotAvailableError) as error:
        resolve(name)
    assert sha256(data) in str(error.value) and PUBLISHED_SHA256[name] in str(error.value)
    _nothing_left(name)
    assert not any(downloads_dir().iterdir())  # not even a part file


def test_a_corrupted_file_is_refused_by_the_converter_and_dropped(online):
    online.files["clip_ViT-B-32.pth"] = b"PK\x03\x04" + os.urandom(2000)
    with pytest.raises(ConversionError, match="clip_ViT-B-32.pth"):
        resolve("pacs-clip-vit-b-32")
    _nothing_left("pacs-clip-vit-b-32")
    assert not any(downloads_dir().iterdir())


class Exploit:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_with_a_malicious_global_is_refused_and_nothing_runs(online, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    online.files["clip_ViT-B-32.pth"] = pickle.dumps({"state_dict": {"visual.proj": Exploit(marker)}})
    online.files["model_GBR_VCR.pickle"] = evil = pickle.dumps({"estimators_": Exploit(marker)})
    with_sha256(monkeypatch, "vcrscore-gbr", sha256(evil))
    with pytest.raises(ConversionError, match="clip_ViT-B-32.pth"):
        resolve("pacs-clip-vit-b-32")
    with pytest.raises(ConversionError, match="model_GBR_VCR.pickle"):
        resolve("vcrscore-gbr")
    assert not marker.exists()
    _nothing_left("pacs-clip-vit-b-32")
    _nothing_left("vcrscore-gbr")


def test_a_truncated_download_keeps_its_part_file_and_the_next_call_resumes_it(online, tmp_path, monkeypatch):
    name = "vcrscore-gbr"
    data = pickle.dumps(fitted_gbr()[0])
    with_sha256(monkeypatch, name, sha256(data))
    online.files["model_GBR_VCR.pickle"] = data
    online.truncate.add("model_GBR_VCR.pickle")
    with pytest.raises(ModelNotAvailableError, match="resume"):
        resolve(name)
    part = downloads_dir() / "model_GBR_VCR.pickle.part"
    assert part.read_bytes() == data[: len(data) // 2]
    assert not converted_dir(name).exists() and not (downloads_dir() / "model_GBR_VCR.pickle").exists()
    online.truncate.clear()
    directory = resolve(name)
    assert online.requests[-1] == ("model_GBR_VCR.pickle", f"bytes={len(data) // 2}-")
    assert json.loads((directory / PROVENANCE_FILE).read_text())["sha256"] == sha256(data)
    assert not part.exists()


def test_an_html_page_instead_of_the_file_is_refused(online):
    online.files["reprod.zip"] = b"<html><body>Quota exceeded</body></html>"
    online.html.add("reprod.zip")
    with pytest.raises(ModelNotAvailableError, match="HTML page"):
        resolve("polos")
    _nothing_left("polos")


def test_offline_a_missing_converted_weight_names_the_fetch_command_not_an_unpublished_repo(online, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in UPSTREAM:
        with pytest.raises(ModelNotAvailableError) as error:
            resolve(name)
        assert hub.fetch_command(registered_weights()[name]) in str(error.value)
        assert "hf download capeval/" not in str(error.value)
    assert online.requests == []


def test_without_a_mirror_a_file_with_no_direct_link_asks_for_a_manual_download(online, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV)
    with pytest.raises(ModelNotAvailableError, match="--file"):
        resolve("pacs-openclip-vit-l-14")


# -- tiny snapshots ---------------------------------------------------------------------------------------------

def test_every_tiny_snapshot_is_marked(tiny_hub):
    snapshots = [s for repo in tiny_hub.iterdir() for s in (repo / "snapshots").iterdir()]
    assert len(snapshots) >= len(registered_weights())
    assert all((s / TINY_MARKER_FILE).is_file() for s in snapshots)


def test_the_default_hub_cache_is_refused_unless_forced(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ValueError, match="default Hugging Face cache"):
        populate_tiny_hub_cache(tmp_path / "hf" / "hub", ["vcrscore-gbr"])
    assert not (tmp_path / "hf").exists()
    populate_tiny_hub_cache(tmp_path / "hf" / "hub", ["vcrscore-gbr"], force=True)
    snapshot, = (tmp_path / "hf" / "hub" / "models--capeval--vcrscore-gbr" / "snapshots").iterdir()
    assert (snapshot / TINY_MARKER_FILE).is_file()


def test_capeval_fetch_with_a_mirror_downloads_and_converts(online, monkeypatch, capsys):
    from capeval.cli import main

    data = pickle.dumps(fitted_gbr()[0])
    with_sha256(monkeypatch, "vcrscore-gbr", sha256(data))
    online.files["model_GBR_VCR.pickle"] = data
    monkeypatch.delenv(MIRROR_ENV)
    assert main(["fetch", "vcrscore-gbr", "--mirror", online.url]) == 0
    assert f"vcrscore-gbr: {converted_dir('vcrscore-gbr')}" in capsys.readouterr().out
    assert online.requests == [("model_GBR_VCR.pickle", None)] and MIRROR_ENV not in os.environ


def test_an_archive_without_exactly_one_checkpoint_is_refused(online):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("reprod/a.ckpt", b"1")
        archive.writestr("../escape/b.ckpt", b"2")  # read by base name only: never written outside
    online.files["reprod.zip"] = buffer.getvalue()
    with pytest.raises(ModelNotAvailableError, match="expected one member matching"):
        resolve("polos")
    _nothing_left("polos")
    assert not (converted_dir("polos").parent.parent / "escape").exists()


# -- one version per file, one fetch at a time ------------------------------------------------------------------

PACS = "pacs-clip-vit-b-32"  # no published sha256: only the download itself vouches for the file
PACS_FILE = "clip_ViT-B-32.pth"


def pacs_version(tmp: Path, seed: int):
    """(the official PAC-S file of a tiny CLIP drawn with ``seed``, that CLIP's tensors)."""
    from capeval.testing import tiny_clip_factory

    tiny_clip_factory(seed=seed)(tmp / f"seed{seed}")
    state = load_safetensors(tmp / f"seed{seed}" / "open_clip_model.safetensors")
    return _saved({"state_dict": {f"module.{k}": v for k, v in state.items()}, "epoch": 7}), state


def assert_converted_from(directory: Path, data: bytes, state) -> None:
    converted = load_safetensors(directory / "open_clip_model.safetensors")
    assert sorted(converted) == sorted(state) and all(torch.equal(converted[k], state[k]) for k in state)
    assert json.loads((directory / PROVENANCE_FILE).read_text())["sha256"] == sha256(data)


def test_a_part_of_one_version_is_never_completed_with_another(online, tmp_path):
    """Version A breaks off mid-file; the server now serves version B (another ETag): the part is not resumed but
    replaced, and the cached weights and their recorded sha256 are B's alone."""
    version_a, _ = pacs_version(tmp_path, 0)
    version_b, state_b = pacs_version(tmp_path, 9)
    online.files[PACS_FILE] = version_a
    online.truncate.add(PACS_FILE)
    with pytest.raises(ModelNotAvailableError, match="resume"):
        resolve(PACS)
    assert (downloads_dir() / f"{PACS_FILE}.part").read_bytes() == version_a[: len(version_a) // 2]
    online.truncate.clear()
    online.files[PACS_FILE] = version_b
    assert_converted_from(resolve(PACS), version_b, state_b)
    assert online.requests[-1] == (PACS_FILE, f"bytes={len(version_a) // 2}-")  # asked, conditionally
    assert not any(downloads_dir().iterdir())


@pytest.mark.parametrize("server_kind", ["ignores If-Range", "sends no validator"])
def test_a_part_that_cannot_be_proven_the_same_version_is_downloaded_again(online, tmp_path, server_kind):
    version_a, state_a = pacs_version(tmp_path, 0)
    version_b, state_b = pacs_version(tmp_path, 9)
    online.honour_if_range = server_kind != "ignores If-Range"
    online.validators = server_kind != "sends no validator"
    online.files[PACS_FILE] = version_a
    online.truncate.add(PACS_FILE)
    with pytest.raises(ModelNotAvailableError, match="resume"):
        resolve(PACS)
    online.truncate.clear()
    expected, state = (version_b, state_b) if server_kind == "ignores If-Range" else (version_a, state_a)
    online.files[PACS_FILE] = expected
    assert_converted_from(resolve(PACS), expected, state)
    assert online.requests[-1] == (PACS_FILE, None)  # the whole file, from the start


def _one_waits_at_the_lock(processes, online, limit=6.0):
    """Once the download has begun: return when one of ``processes`` sleeps in a timed wait (the lock's polling: the
    downloader blocks on its socket, nothing before the lock sleeps), read from ``/proc/<pid>/wchan``; else after
    ``limit`` seconds (where the kernel does not tell), once a process has ended, or after 600 s."""
    deadline, give_up = None, time.monotonic() + 600
    while all(process.poll() is None for process in processes) and time.monotonic() < give_up:
        if deadline is None and any(name == PACS_FILE for name, _ in online.requests):
            deadline = time.monotonic() + limit
        if deadline is not None:
            for process in processes:
                try:
                    if "nanosleep" in Path(f"/proc/{process.pid}/wchan").read_text():
                        return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                return
        time.sleep(0.01)


def test_two_concurrent_fetches_of_one_weight_both_succeed(online, tmp_path):
    """Two ``capeval fetch`` processes of one weight while its download is held half-way until the other process
    waits at the lock: one downloads and converts, the other waits for it and finds the weight converted; no "No
    such file … .part"."""
    data, state = pacs_version(tmp_path, 0)
    online.files[PACS_FILE] = data
    online.held = threading.Event()
    env = {**os.environ, MIRROR_ENV: online.url}
    command = [sys.executable, "-m", "capeval.cli", "fetch", PACS]
    processes = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    try:
        _one_waits_at_the_lock(processes, online)
    finally:
        online.held.set()
    outputs = [process.communicate(timeout=600) for process in processes]
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, err[-2000:]
        assert f"{PACS}: {converted_dir(PACS)}" in out
    assert_converted_from(converted_dir(PACS), data, state)
    assert [r for r in online.requests if r[0] == PACS_FILE] == [(PACS_FILE, None)]  # downloaded once


# -- one-line errors: a read-only cache, an HTML page for the file, a linked hparams.yaml in the archive -----------

@pytest.fixture
def read_only(tmp_path):
    """Make a folder read-only, for root too (``chattr +i``); undone at the end."""
    made = []

    def make(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o555)
        if os.geteuid() == 0 and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
            reason = "running as root without a working chattr: no folder is read-only"
            if os.environ.get("CI") == "true":  # as the shared data: required in CI, skipped elsewhere
                pytest.fail(reason)
            pytest.skip(reason)
        made.append(folder)
        return folder

    yield make
    for folder in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


def cli_error(capsys) -> str:
    """The CLI's error: one line, the last thing written (after any progress bar), no traceback."""
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("capeval fetch: error: ")]
    assert len(errors) == 1 and err.endswith(errors[0] + "\n") and "Traceback" not in err, err
    return errors[0]


def test_fetch_into_a_read_only_cache_is_a_one_line_error_naming_the_folder(online, tmp_path, monkeypatch,
                                                                            read_only, capsys):
    from capeval.cli import main

    online.files[PACS_FILE], _ = pacs_version(tmp_path, 0)
    cache = read_only(tmp_path / "read-only-cache")
    monkeypatch.setenv("CAPEVAL_CACHE", str(cache))
    assert main(["fetch", PACS]) == 2
    err = cli_error(capsys)
    assert f"cannot write to capeval's cache folder {cache}" in err and "CAPEVAL_CACHE" in err
    assert online.requests == []


def test_an_html_page_served_as_the_checkpoint_is_a_one_line_error_naming_the_url_or_file(online, tmp_path, capsys):
    from capeval.cli import main

    page = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>Sign in to continue</body></html>\n"
    online.files[PACS_FILE] = page  # served as application/octet-stream
    assert main(["fetch", PACS]) == 2
    err = cli_error(capsys)
    assert "HTML page" in err and f"{online.url}/{PACS_FILE}" in err
    assert not converted_dir(PACS).exists() and not any(downloads_dir().iterdir())
    (tmp_path / PACS_FILE).write_bytes(page)
    assert main(["fetch", PACS, "--file", str(tmp_path / PACS_FILE)]) == 2
    err = cli_error(capsys)
    assert "HTML page" in err and str(tmp_path / PACS_FILE) in err


def _zip_link(archive: zipfile.ZipFile, name: str, target: str) -> None:
    """A symbolic-link entry, as Unix zip tools store one: the target path as content, S_IFLNK in the mode."""
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = 0o120777 << 16
    archive.writestr(info, target)


@pytest.mark.parametrize("pool, refused", [("cls", False), ("avg", True)])
def test_a_linked_hparams_yaml_in_the_polos_archive_is_followed(online, tmp_path, pool, refused):
    """``checkpoints/hparams.yaml`` is a link to ``../hparams.yaml`` inside ``reprod.zip``: the linked file is the
    one checked (an unsupported configuration is refused), never the link's text."""
    original = zipfile.ZipFile(io.BytesIO(fabricate("polos", tmp_path / "tiny")))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in original.namelist():
            data = original.read(name)
            archive.writestr(name, data.replace(b"pool: cls", f"pool: {pool}".encode()))
        _zip_link(archive, "reprod/checkpoints/hparams.yaml", "../hparams.yaml")
    online.files["reprod.zip"] = buffer.getvalue()
    if refused:
        with pytest.raises(ConversionError, match=r"unsupported Polos configuration \{'pool': 'avg'\}"):
            resolve("polos")
        _nothing_left("polos")
    else:
        assert (resolve("polos") / "polos_head.safetensors").is_file()


def test_a_link_leading_out_of_the_archive_is_refused(online, tmp_path):
    original = zipfile.ZipFile(io.BytesIO(fabricate("polos", tmp_path / "tiny")))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in original.namelist():
            archive.writestr(name, original.read(name))
        _zip_link(archive, "reprod/checkpoints/hparams.yaml", "../../../etc/passwd")
    online.files["reprod.zip"] = buffer.getvalue()
    with pytest.raises(ModelNotAvailableError, match="is a link to ../../../etc/passwd, which is not a file of"):
        resolve("polos")
    _nothing_left("polos")
