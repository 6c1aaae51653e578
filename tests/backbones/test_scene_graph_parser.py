"""The shared FACTUAL scene-graph parser on the tiny T5: each distinct input generated once, in unpadded batches of
one input length, each string the text's own whatever the run, per-text input limits, the content-keyed bounded cache,
its persisted copy (bounded, least recently used removed first) shared by concurrent processes, and FactualSceneGraph
0.7.3's own parsing reproduced."""

import collections
import json
import os
import random
import subprocess
import sys
import textwrap

import pytest

from capeval import InputError
from capeval.backbones.scene_graph_parser import FACTUAL_PROMPT, SceneGraphParser, shared_scene_graph_parser
from capeval.core.caches import DEFAULT_CACHE_BYTES, text_key
from capeval.core.disk_cache import FILE_BLOCK


class GenerateSpy:
    """Wraps ``model.generate`` and records the rows of each call (without their padding) and whether it padded."""

    def __init__(self, model):
        self.calls, self.padded, self.original = [], [], model.generate
        model.generate = self

    def __call__(self, input_ids, **kwargs):
        mask = kwargs["attention_mask"].bool()
        self.calls.append([row[keep].tolist() for row, keep in zip(input_ids, mask)])
        self.padded.append(not bool(mask.all()))
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
    """Each text parsed alone (no padding) gives the string it gets in batches of any size and order (and, on the tiny
    model, padded among longer texts); a batch holds one input length only, never exceeds batch_size, and each
    distinct stripped input is generated once."""
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
            assert len({len(row) for row in call}) == 1
        assert not any(spy.padded)
        assert parser.generated_texts == len(set(texts))
        assert parser.parse(texts[::-1]) == expected[::-1] and parser.generated_texts == len(set(texts))


def test_each_string_is_the_text_parsed_alone_whatever_else_the_run_holds(tiny_hub):
    """What the batching guarantees: every text's raw string is the one it gets parsed alone, in runs mixed with
    other texts, at batch size 1 or 32, in any order; no batch holds two input lengths or any padding, and at
    batch size 32 texts of one length do share batches."""
    texts = list(dict.fromkeys(_texts(20, seed=5, max_words=4) + ["a dog " * 30, "a cat " * 30, "red horse " * 30]))
    others = [t for t in _texts(10, seed=6, max_words=8) if t not in texts]
    one_by_one = SceneGraphParser(device="cpu", batch_size=1, max_output_length=24)
    spy = GenerateSpy(one_by_one.model)
    alone = {text: one_by_one.parse([text])[0] for text in texts}
    assert [len(call) for call in spy.calls] == [1] * len(texts)
    lengths = {text: len(prompted(one_by_one, text)) for text in texts}
    assert max(collections.Counter(lengths.values()).values()) >= 3  # several texts of one length (the cut ones: 64)

    rng = random.Random(0)
    for batch_size, order in ((1, "shuffled"), (32, "shuffled"), (32, "reversed")):
        run = rng.sample(texts + others, len(texts + others)) if order == "shuffled" else (texts + others)[::-1]
        parser = SceneGraphParser(device="cpu", batch_size=batch_size, max_output_length=24)
        spy = GenerateSpy(parser.model)
        got = dict(zip(run, parser.parse(run)))
        assert {text: got[text] for text in texts} == alone, (batch_size, order)
        assert all(len({len(row) for row in call}) == 1 for call in spy.calls) and not any(spy.padded)
        assert max(map(len, spy.calls)) == (1 if batch_size == 1 else max(collections.Counter(
            len(prompted(parser, t)) for t in run).values()))


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
    parser = SceneGraphParser(device="cpu", max_output_length=24, persist_dir=sys.argv[1],
                              persist_bytes=int(sys.argv[3]))
    outputs = parser.parse(json.loads(sys.argv[2]))
    print(json.dumps({"outputs": outputs, "generated": parser.generated_texts}))
""")


def _run_parsers(count, persist_dir, texts, tiny_hub, persist_bytes=DEFAULT_CACHE_BYTES):
    env = {**os.environ, "HF_HUB_CACHE": str(tiny_hub), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    processes = [subprocess.Popen([sys.executable, "-c", _WRITER, str(persist_dir), json.dumps(texts),
                                   str(persist_bytes)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(count)]
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
    files = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert files == sorted(["namespace.json", *(f"{text_key(t)}.json" for t in set(texts))])  # no temporary left
    assert {p.name for p in folder.iterdir() if p.name.startswith(".")} <= {".lock", ".bytes"}  # the writers' own
    assert json.loads((folder / "namespace.json").read_text()) == json.loads(fresh.namespace.description)

    reader = SceneGraphParser(device="cpu", max_output_length=24, persist_dir=tmp_path)  # a later run: a new parser,
    assert reader.parse(texts[::-1]) == expected[::-1] and reader.generated_texts == 0  # its memory empty: all read

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

    from scene_graph_oracles import import_official

    official_parser = import_official("factual_scene_graph.parser.scene_graph_parser")  # a failure in CI if missing
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


def _persisted(folder):
    """Entry name → record of every parse file under ``folder``, read independently of the parser."""
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")
            if p.name != "namespace.json"}


def _blocks(folder):
    """The parse files' bytes as ``persist_bytes`` counts them: each in whole 4096-byte blocks."""
    return sum(-(-p.stat().st_size // 4096) * 4096 for p in folder.glob("*.json") if p.name != "namespace.json")


def test_the_persisted_cache_stays_within_persist_bytes_and_keeps_the_most_recently_used(tiny_hub, tmp_path):
    bound, hot = 6 * FILE_BLOCK, "a red car"
    texts = [t for t in dict.fromkeys(_texts(24, seed=9, max_words=6)) if t != hot]
    expected = dict(zip([hot, *texts], SceneGraphParser(device="cpu", max_output_length=24).parse([hot, *texts])))
    key_of = {f"{text_key(t)}.json": t for t in expected}
    # nothing kept in memory: every lookup reads the disk, so the hot text is used (its file stamped) each round
    parser = SceneGraphParser(device="cpu", max_output_length=24, persist_dir=tmp_path, persist_bytes=bound,
                              max_cached_texts=0)
    folder = tmp_path / str(parser.namespace)
    for text in texts:
        assert parser.parse([text]) == [expected[text]] and parser.parse([hot]) == [expected[hot]]
        assert _blocks(folder) <= bound
    assert parser.generated_texts == len(texts) + 1  # the hot text was never removed: generated once
    assert parser.persisted.evictions > len(texts) - 6
    kept = _persisted(folder)
    assert {f"{text_key(t)}.json" for t in (hot, *texts[-2:])} <= set(kept)  # the most recently used stay
    assert f"{text_key(texts[0])}.json" not in kept
    assert all(record == {"output": expected[key_of[name]]} for name, record in kept.items())
    later = SceneGraphParser(device="cpu", max_output_length=24, persist_dir=tmp_path, persist_bytes=bound)
    assert later.parse([hot, *texts[-2:]]) == [expected[t] for t in (hot, *texts[-2:])]
    assert later.generated_texts == 0
    with pytest.raises(InputError, match="persist_bytes must be an int ≥ 0"):
        SceneGraphParser(device="cpu", persist_dir=tmp_path, persist_bytes=-1)


def test_two_processes_writing_at_once_leave_a_valid_cache_within_persist_bytes(tiny_hub, tmp_path):
    bound = 5 * FILE_BLOCK
    texts = list(dict.fromkeys(_texts(14, seed=13)))
    fresh = SceneGraphParser(device="cpu", max_output_length=24)
    expected = fresh.parse(texts)
    writers = _run_parsers(2, tmp_path, texts, tiny_hub, persist_bytes=bound)
    assert all(w["outputs"] == expected for w in writers)
    folder = tmp_path / str(fresh.namespace)
    kept = _persisted(folder)
    record_of = {f"{text_key(t)}.json": {"output": e} for t, e in zip(texts, expected)}
    assert 0 < len(kept) < len(texts) and all(record == record_of[name] for name, record in kept.items())
    assert _blocks(folder) <= bound
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
