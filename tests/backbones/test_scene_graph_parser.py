"""The shared FACTUAL scene-graph parser on the tiny T5: each distinct input generated once, the same strings in any
batch size and order, per-text input limits, the content-keyed bounded cache, its persisted copy read by another
process, and FactualSceneGraph 0.7.3's own parsing reproduced."""

import json
import os
import random
import subprocess
import sys
import textwrap
from unittest import mock

import pytest

from capeval import InputError
from capeval.backbones.scene_graph_parser import (FACTUAL_PROMPT, LENGTH_BUCKET, SceneGraphParser,
                                                  shared_scene_graph_parser)
from capeval.core.caches import text_key


class GenerateSpy:
    """Wraps ``model.generate`` and records the rows of each call (without their padding)."""

    def __init__(self, model):
        self.calls, self.original = [], model.generate
        model.generate = self

    def __call__(self, input_ids, **kwargs):
        mask = kwargs["attention_mask"].bool()
        self.calls.append([row[keep].tolist() for row, keep in zip(input_ids, mask)])
        return self.original(input_ids, **kwargs)

    @property
    def rows(self):
        return [row for call in self.calls for row in call]


def _texts(count, seed=0, max_words=30):
    rng = random.Random(seed)
    words = "a the dog cat man woman red blue riding on in near grass field horse lake two brown sits table".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, max_words))) for _ in range(count)]


def prompted(parser, text, limit=64):
    ids = parser.tokenizer(FACTUAL_PROMPT + text.strip())["input_ids"]
    return ids if len(ids) <= limit else ids[:limit - 1] + [parser.tokenizer.eos_token_id]


def test_strings_do_not_depend_on_batch_size_order_or_padding(tiny_hub):
    """Each text parsed alone (no padding) gives the string it gets in batches of any size and order, padded among
    longer texts; a batch never mixes length buckets, never exceeds batch_size, and each distinct stripped input is
    generated once."""
    texts = _texts(18) + ["a man riding a horse " * 20]  # the last one is cut at 64 tokens
    alone = SceneGraphParser(device="cpu", batch_size=1, max_output_length=24)
    spy = GenerateSpy(alone.model)
    expected = alone.parse(texts)
    assert all(len(call) == 1 for call in spy.calls)  # no padding at all
    assert len(spy.calls) == len(set(texts))
    padded = alone.generate(texts)  # one batch, every text padded to the longest input
    assert padded == expected
    for batch_size in (2, 5, 32):
        parser = SceneGraphParser(device="cpu", batch_size=batch_size, max_output_length=24)
        spy = GenerateSpy(parser.model)
        order = list(range(len(texts)))
        random.Random(batch_size).shuffle(order)
        shuffled = [texts[i] for i in order] + [f"  {texts[0]} "]
        got = parser.parse(shuffled)
        assert got == [expected[i] for i in order] + [expected[0]]
        assert sorted(spy.rows) == sorted(prompted(parser, t) for t in dict.fromkeys(texts))
        for call in spy.calls:
            assert len(call) <= batch_size
            assert len({-(-len(row) // LENGTH_BUCKET) for row in call}) == 1
        assert parser.generated_texts == len(set(texts))
        assert parser.parse(texts[::-1]) == expected[::-1] and parser.generated_texts == len(set(texts))


def test_input_limits_cut_each_text_and_key_only_the_inputs_they_change(tiny_hub):
    parser = SceneGraphParser(device="cpu", max_output_length=24)
    spy = GenerateSpy(parser.model)
    short, long = "two dogs on grass", "a man riding a horse near a lake"
    length = len(prompted(parser, long))
    assert len(prompted(parser, short)) < length - 4 < 64
    got = parser.parse([short, long, long, short], input_limits=[length - 4, length - 4, 64, 64])
    # the short text is not cut by either limit: one input, one generation; the long one twice
    assert sorted(spy.rows) == sorted([prompted(parser, short), prompted(parser, long, length - 4),
                                       prompted(parser, long)])
    assert got[0] == got[3] and got[1] == parser.generate([long], [length - 4])[0]
    assert got[2] == parser.generate([long])[0]
    keys = {key for _, key in list(parser.memory._items)}
    assert keys == {text_key(short), text_key(long), f"{text_key(long)}-{length - 4}"}
    for bad, problem in (([0, 1], "input_limits\\[0\\] must be an int in 1…64"), ([65, 1], "input_limits\\[0\\]"),
                         ([1], "1 entries for 2 texts")):
        with pytest.raises(InputError, match=problem):
            parser.parse([short, long], input_limits=bad)
    with pytest.raises(InputError, match="not a single string"):
        parser.parse("a dog")
    with pytest.raises(InputError, match=r"texts\[1\] must be a string"):
        parser.parse(["a dog", None])
    with pytest.raises(InputError, match="max_input_length must be an int ≥ 1"):
        SceneGraphParser(device="cpu", max_input_length=0)


def test_the_cache_key_is_the_weights_content_generation_settings_and_text(tiny_hub):
    base = SceneGraphParser(device="cpu")
    assert SceneGraphParser(device="cpu", batch_size=3, show_progress=False).namespace == base.namespace
    for changed in ({"max_input_length": 32}, {"max_output_length": 64}, {"num_beams": 1}, {"dtype": "bfloat16"}):
        assert SceneGraphParser(device="cpu", **changed).namespace != base.namespace, changed
    description = json.loads(base.namespace.description)
    assert description["weights"][0]  # the weights' content identity, not their path
    assert description["numerics"]["prompt"] == FACTUAL_PROMPT
    base.parse(["  a cat "])
    assert base.memory.get((base.namespace, text_key("a cat"))) is not None


def test_the_memory_cache_is_bounded_in_entries_and_bytes(tiny_hub):
    texts = _texts(6, seed=3)
    unbounded = SceneGraphParser(device="cpu", max_output_length=24)
    expected = unbounded.parse(texts)
    per_entry = unbounded.memory.nbytes // len(set(texts))
    bounded = SceneGraphParser(device="cpu", max_output_length=24, cache_bytes=2 * per_entry + per_entry // 2)
    assert bounded.parse(texts) == expected
    assert 0 < bounded.memory.nbytes <= 2 * per_entry + per_entry // 2 and bounded.memory.evictions > 0
    few = SceneGraphParser(device="cpu", max_output_length=24, max_cached_texts=2)
    assert few.parse(texts) == expected and len(few.memory) == 2
    generated = few.generated_texts
    assert few.parse(texts[:1]) == expected[:1] and few.generated_texts == generated + 1  # evicted: generated again


def test_one_parser_per_weights_and_settings_in_a_process(tiny_hub):
    first = shared_scene_graph_parser(device="cpu", max_output_length=20)
    assert shared_scene_graph_parser(device="cpu", max_output_length=20) is first
    assert shared_scene_graph_parser(device="cpu", max_output_length=21) is not first
    assert shared_scene_graph_parser(device="cpu", max_output_length=20, cache_bytes=1 << 20) is not first


_WRITER = textwrap.dedent("""
    import json, sys
    from capeval.backbones.scene_graph_parser import SceneGraphParser
    parser = SceneGraphParser(device="cpu", max_output_length=24, persist_dir=sys.argv[1])
    outputs = parser.parse(json.loads(sys.argv[2]))
    print(json.dumps({"outputs": outputs, "generated": parser.generated_texts}))
""")


def _run_parsers(count, persist_dir, texts, tiny_hub):
    env = {**os.environ, "HF_HUB_CACHE": str(tiny_hub), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    processes = [subprocess.Popen([sys.executable, "-c", _WRITER, str(persist_dir), json.dumps(texts)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(count)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_a_persisted_cache_is_shared_by_concurrent_processes_and_reused_without_generating(tiny_hub, tmp_path):
    texts = _texts(5, seed=7) + ["a cat"]
    fresh = SceneGraphParser(device="cpu", max_output_length=24)
    expected = fresh.parse(texts)
    writers = _run_parsers(2, tmp_path, texts, tiny_hub)  # two processes writing the same entries at once
    assert all(w["outputs"] == expected for w in writers)
    folder = tmp_path / str(fresh.namespace)
    files = sorted(p.name for p in folder.iterdir())
    assert files == sorted(["namespace.json", *(f"{text_key(t)}.json" for t in set(texts))])  # no temporary left
    assert json.loads((folder / "namespace.json").read_text()) == json.loads(fresh.namespace.description)

    (reader,) = _run_parsers(1, tmp_path, texts[::-1], tiny_hub)  # a later run: nothing generated
    assert reader == {"outputs": expected[::-1], "generated": 0}

    (folder / f"{text_key('a cat')}.json").write_text("{not json", encoding="utf-8")
    parser = SceneGraphParser(device="cpu", max_output_length=24, persist_dir=tmp_path)
    with pytest.warns(UserWarning, match="damaged scene-graph cache entry"):
        assert parser.parse(texts) == expected
    assert parser.generated_texts == 1  # the damaged one only, and rewritten
    assert json.loads((folder / f"{text_key('a cat')}.json").read_text()) == {"output": expected[-1]}


def test_factual_scene_graph_0_7_3_parse_is_reproduced_with_input_limits(tiny_hub, monkeypatch):
    """FactualSceneGraph 0.7.3's ``SceneGraphParser.parse`` (what CAPTURE calls per caption, on its sentences, beam 5,
    128 output tokens) cuts every batch of 32 at min(max_input_len, its longest prompt's token count without the end
    token): the longest input of each batch loses its last token. ``input_limits`` reproduce it; the strings equal
    the official ones after the official cleaning (transformers 5 has no ``as_target_tokenizer``: the harness gives
    the official code a no-op one)."""
    import contextlib

    pytest.importorskip("nltk")
    official_parser = pytest.importorskip("factual_scene_graph.parser.scene_graph_parser")
    from factual_scene_graph.utils import clean_graph_string, space_out_symbols_in_graph

    parser = SceneGraphParser(device="cpu")
    monkeypatch.setattr(type(parser.tokenizer), "as_target_tokenizer", lambda self: contextlib.nullcontext(),
                        raising=False)
    official = official_parser.SceneGraphParser(parser.directory, device="cpu")
    sentences = _texts(35, seed=11, max_words=6) + ["a man riding a horse " * 20]
    got_official = official.parse(sentences, beam_size=5, return_text=True, max_output_len=128)

    limits = []
    for start in range(0, len(sentences), 32):
        batch = sentences[start:start + 32]
        longest = max(len(parser.tokenizer.encode(FACTUAL_PROMPT + s.strip(), add_special_tokens=False))
                      for s in batch)
        limits += [min(64, longest)] * len(batch)
    raw = parser.parse(sentences, input_limits=limits)
    assert [clean_graph_string(space_out_symbols_in_graph(r.replace(FACTUAL_PROMPT.strip(), "").strip()))
            for r in raw] == got_official
    full = [len(parser.tokenizer(FACTUAL_PROMPT + s.strip())["input_ids"]) for s in sentences]
    cut = [i for i, limit in enumerate(limits) if full[i] > limit]
    assert limits[0] < 64 and cut[0] < 32 and full[cut[0]] == max(full[:32])  # the longest short one loses a token
    assert cut[-1] == len(sentences) - 1 and limits[-1] == 64  # the long one is cut at 64 as usual
