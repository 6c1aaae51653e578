"""Feature caches are keyed by what computed their values (weights' content, numerics, preprocessing, dtype),
through one key function; in-memory caches are bounded by bytes."""

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from capeval.core.cache_keys import cache_namespace
from capeval.core.caches import DEFAULT_CACHE_BYTES, EmbeddingCache
from capeval.core.scoring import load_scorer
from capeval.testing.tiny_clip import tiny_clip_factory

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "capeval"
IMAGES = [Image.new("RGB", (40, 30), "red"), Image.new("RGB", (30, 40), "blue")]
CAPTIONS = ["a red square on a table", "a blue square"]
REFERENCES = [["a red picture", "red"], ["a blue picture"]]


def _clip_s(folder, **options):
    return load_scorer("clip_s", weights=str(folder), device="cpu", **options)


def test_a_local_clip_folder_rewritten_in_place_is_scored_with_its_new_weights(tmp_path):
    folder, persisted = tmp_path / "my-clip", tmp_path / "features"
    tiny_clip_factory(seed=0)(folder)
    old = _clip_s(folder, persist_dir=persisted).score(CAPTIONS, IMAGES)
    tiny_clip_factory(seed=1)(folder)  # the same files, other random weights
    again = _clip_s(folder, persist_dir=persisted)
    new = again.score(CAPTIONS, IMAGES)
    fresh = _clip_s(folder).score(CAPTIONS, IMAGES)
    assert new["hashcode"] != old["hashcode"]
    assert new["clip_s_per_sample"] == fresh["clip_s_per_sample"] != old["clip_s_per_sample"]
    # the new weights' features were persisted beside the old ones, under another namespace
    assert len([d for d in persisted.iterdir() if d.name.startswith("clip-text-")]) == 2
    reread = _clip_s(folder, persist_dir=persisted).score(CAPTIONS, IMAGES)
    assert reread["clip_s_per_sample"] == fresh["clip_s_per_sample"]


def test_a_local_mpnet_folder_rewritten_in_place_is_scored_with_its_new_weights(tmp_path):
    from transformers import MPNetModel

    from capeval.testing.tiny_text import tiny_mpnet

    folder, persisted = tmp_path / "my-mpnet", tmp_path / "features"
    tiny_mpnet(folder)
    options = dict(weights=str(folder), device="cpu")
    old = load_scorer("mpnet_score", persist_dir=persisted, **options).score(CAPTIONS, references=REFERENCES)
    model = MPNetModel.from_pretrained(str(folder))
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))
    model.save_pretrained(str(folder))  # rewritten in place
    new = load_scorer("mpnet_score", persist_dir=persisted, **options).score(CAPTIONS, references=REFERENCES)
    fresh = load_scorer("mpnet_score", **options).score(CAPTIONS, references=REFERENCES)
    assert new["mpnet_score_per_sample"] == fresh["mpnet_score_per_sample"] != old["mpnet_score_per_sample"]


def test_persisted_text_features_are_keyed_by_the_fixed_shapes_and_the_device(tmp_path, monkeypatch):
    """A feature's bits depend on its forward's shapes: MPNet, SimCSE (Polos) and BLIP-2 text features persisted
    under other shape rules, or on another device type, are not reused."""
    from capeval.blip2.scorer import Blip2Backbone
    from capeval.core import shapes
    from capeval.polos.checkpoint import head_config
    from capeval.polos.scorer import SimcseEncoder, head_from_config
    from capeval.testing import tiny_roberta, write_tiny_blip2
    from capeval.testing.tiny_text import tiny_mpnet
    from capeval.text.mpnet import MPNetEncoder

    tiny_mpnet(tmp_path / "mpnet")
    tiny_roberta(tmp_path / "roberta")
    write_tiny_blip2(tmp_path / "blip2")
    head = head_from_config(head_config(text_dim=32, clip_dim=32, clip_weights="unused",
                                        text_encoder=str(tmp_path / "roberta")))

    def namespaces():
        return (MPNetEncoder(str(tmp_path / "mpnet"), device="cpu").text_cache.namespace,
                SimcseEncoder(str(tmp_path / "roberta"), head, device=torch.device("cpu"),
                              dtype=torch.float32).text_cache.namespace,
                Blip2Backbone(str(tmp_path / "blip2"), device="cpu").text_cache.namespace)

    now = namespaces()
    assert now == namespaces()
    monkeypatch.setattr(shapes, "TEXT_TOKENS_CPU", 1536)  # the rule before: 24 rows up to 64 tokens wide
    assert all(before != after for before, after in zip(now, namespaces()))
    monkeypatch.undo()
    assert namespaces() == now
    assert shapes.shapes_tag("cpu") != shapes.shapes_tag("cuda")


def test_the_namespace_follows_content_numerics_and_dtype_not_the_path(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder in (a, b):
        folder.mkdir()
        (folder / "weights.bin").write_bytes(b"\x00\x01")
    base = cache_namespace("clip-text", a, dtype=torch.float32, forwards="f1")
    assert base == cache_namespace("clip-text", a, forwards="f1", dtype=torch.float32)
    others = [cache_namespace("clip-image", a, dtype=torch.float32, forwards="f1"),
              cache_namespace("clip-text", a, dtype=torch.float16, forwards="f1"),
              cache_namespace("clip-text", a, dtype=torch.float32, forwards="f2"),
              cache_namespace("clip-text", a, dtype=torch.float32, forwards="f1", precision="openai-fp16"),
              cache_namespace("clip-text", a, dtype=torch.float32, forwards="f1", mean=(0.5, 0.5, 0.5))]
    assert len({base, *others}) == 6
    (a / "weights.bin").write_bytes(b"\x00\x02")  # edited in place, same size
    assert cache_namespace("clip-text", a, dtype=torch.float32, forwards="f1") != base
    assert str(base).startswith("clip-text-") and re.fullmatch(r"[a-z-]+-[0-9a-f]{32}", str(base))


def test_hub_snapshots_are_keyed_by_their_commit(tiny_hub):
    scorer = load_scorer("clip_s", device="cpu")
    description = scorer.backbone.text_cache.namespace.description
    assert f'@{scorer.backbone.directory.name}"' in description  # repo@commit of the snapshot
    assert str(scorer.backbone.directory) not in description


def test_an_embedding_cache_takes_only_a_namespace_of_the_key_function():
    with pytest.raises(TypeError, match="cache_namespace"):
        EmbeddingCache("clip-text|/some/path|torch.float32")


def _calls_to(name: str, tree: ast.AST):
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == name]


def test_every_feature_cache_is_keyed_by_the_one_key_function():
    """Only cache_keys builds a CacheNamespace (an EmbeddingCache takes nothing else); every module building an
    EmbeddingCache calls cache_namespace, and so do those keying in-memory caches of model outputs."""
    builders, caches = set(), set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        name = path.relative_to(PACKAGE).as_posix()
        if _calls_to("CacheNamespace", tree):
            builders.add(name)
        if _calls_to("EmbeddingCache", tree) or _calls_to("cache_namespace", tree):
            caches.add((name, bool(_calls_to("cache_namespace", tree))))
    assert builders == {"core/cache_keys.py"}
    assert all(keyed for _, keyed in caches), caches
    expected = {"backbones/clip.py", "backbones/sam.py", "backbones/image_features.py",
                "backbones/scene_graph_parser.py", "text/mpnet.py", "polos/scorer.py", "blip2/scorer.py",
                "vcrscore/scorer.py", "image_roundtrip/pipeline.py"}
    assert expected <= {name for name, _ in caches}


# --- bounded by bytes


def test_an_embedding_cache_stays_within_its_bytes_and_counts_whole_blocks(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"0")
    cache = EmbeddingCache(cache_namespace("test", folder), max_bytes=64 * 1024)
    hot = torch.ones(128)
    cache.put("hot", hot)
    for i in range(2000):
        cache.put(f"{i:064x}", torch.full((128,), float(i)))
        assert torch.equal(cache.get("hot"), hot)  # a recently used entry stays
        assert cache.nbytes <= 64 * 1024
        blocks = {id(block): block.rows.nbytes for block, _ in cache._memory.values()}
        keys = sum(cache._entry_bytes(key) for key in cache._memory)
        assert cache.nbytes == sum(blocks.values()) + keys  # every allocated block counted whole
    assert cache.evictions > 1900 and len(cache) > 30
    assert torch.equal(cache.get(f"{1999:064x}"), torch.full((128,), 1999.0))
    assert cache.get(f"{0:064x}") is None


def test_values_returned_are_not_changed_by_later_evictions(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"0")
    cache = EmbeddingCache(cache_namespace("test", folder), max_bytes=4096)
    cache.put("a", torch.zeros(8))
    got = cache.get("a")
    for i in range(100):
        cache.put(str(i), torch.full((8,), 1.0 + i))  # reuses the freed rows
    assert cache.get("a") is None and torch.equal(got, torch.zeros(8))


def test_a_scorer_fed_many_batches_of_new_captions_stays_under_its_byte_cap(tiny_hub):
    default = load_scorer("clip_s", device="cpu")
    assert DEFAULT_CACHE_BYTES <= 256 * 2**20
    assert default.backbone.text_cache.max_bytes == default.backbone.image_cache.max_bytes == DEFAULT_CACHE_BYTES
    cap = 48 * 1024
    scorer = load_scorer("clip_s", device="cpu", cache_bytes=cap)
    assert scorer.hashcode == default.hashcode  # the bound changes no value
    rng = np.random.default_rng(0)
    words = ["dog", "cat", "red", "blue", "runs", "sits", "on", "a", "the", "table", "grass", "ball"]
    for batch in range(40):
        captions = [" ".join(rng.choice(words, 6)) + f" {batch} {i}" for i in range(16)]
        result = scorer.score(captions, [IMAGES[i % 2] for i in range(16)])
        assert scorer.backbone.text_cache.nbytes <= cap and scorer.backbone.image_cache.nbytes <= cap
    assert scorer.backbone.text_cache.evictions > 0
    expected = default.score(captions, [IMAGES[i % 2] for i in range(16)])
    assert result["clip_s_per_sample"] == expected["clip_s_per_sample"]


def test_every_caching_scorer_takes_cache_bytes():
    from capeval.core.scoring import scorers

    persisted = ("persist_dir", "judge_cache")  # a judge's call cache is its persisted cache
    caching = {name for name, spec in scorers().items() if any(option in spec.options for option in persisted)}
    assert caching == {name for name, spec in scorers().items() if "cache_bytes" in spec.options}
    assert {"clip_s", "pac_s", "polos", "mpnet_score", "blip2_score", "vcrscore", "hice_s", "ensembeval",
            "image_roundtrip", "fleur", "ref_fleur"} <= caching


def test_the_truncation_memo_keeps_no_text_only_fixed_size_digests():
    from capeval.core.truncation import TruncationCounter

    counter = TruncationCounter(len, 77, "test")
    long_text = "a dog " * 20_000
    assert counter.count([long_text, "a cat", long_text]) == 2
    assert all(len(key) == 64 for key in counter._over._items)  # a sha256, not the 120,000-character text


def test_a_local_factual_folder_rewritten_in_place_is_another_shared_parser(tmp_path):
    """The process's shared FACTUAL parser is keyed by its weights' content: while the parser of the old weights is
    alive, the same folder rewritten with other weights gets a parser of its own, the new weights loaded."""
    from capeval.backbones.scene_graph_parser import shared_scene_graph_parser
    from capeval.testing.tiny_hice_s import tiny_factual_factory

    folder = tmp_path / "my-factual"
    tiny_factual_factory(seed=0)(folder)
    old = shared_scene_graph_parser(str(folder), device="cpu")
    assert shared_scene_graph_parser(str(folder), device="cpu") is old  # same content: shared
    tiny_factual_factory(seed=1)(folder)  # rewritten in place
    new = shared_scene_graph_parser(str(folder), device="cpu")
    assert new is not old
    old_weights, new_weights = (next(p.model.parameters()).detach().clone() for p in (old, new))
    assert not torch.equal(old_weights, new_weights)
