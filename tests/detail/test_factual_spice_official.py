"""``spice_factual`` and ``soft_spice`` end to end against FactualSceneGraph 0.7.3's ``Evaluator`` (a test dependency,
installed with ``--no-deps``): captions in, per-caption values out, within 1e-6.

Both sides run the same tiny FACTUAL parser on the CPU from the same tiny hub, the package through its own
``SceneGraphParser`` (its tokenisation, batch-of-4 cut, padding, generation, decoding and post-processing) and
``Evaluator.evaluate``; the package reads its own SPICE synonym files, which capeval is given too; its Soft-SPICE
encoder is a sentence-transformers model of the same tiny all-mpnet-base-v2 weights. Harness only:
``tokenizer.as_target_tokenizer`` (removed from transformers 5; for T5 a context that changes nothing) is a null
context on the package's tokenizer.

The package's Evaluator parses candidates, then the flattened references, in batches of 4 and cuts each batch at
its longest prompt's length without the end token (at most 64): where a batch holds a text of 64 or more such
tokens, every text is cut at 64 tokens (end token kept), as capeval cuts each text; else the batch's longest text
loses its last token. The equality tests choose inputs where every batch of 4 holds such a long text (asserted);
the last test shows the other case on purpose.
"""

import contextlib
from importlib import resources

import numpy as np
import pytest
import torch

from capeval.core.hub import resolve
from capeval.core.scoring import load_scorer
from scene_graph_oracles import import_official

TOLERANCE = 1e-6
PROMPT = "Generate Scene Graph: "
OFFICIAL_BATCH = 4  # Evaluator.evaluate's default batch_size, passed to the parser
CAPTIONS = [
    "A red car is parked on a narrow street next to a tall building. Two men stand beside the car and talk. "
    "A small brown dog sits on the path near a metal pole.",
    "A woman in a blue shirt holds a white cup. She sits at a wooden table beside an open window. A plate of bread "
    "is on the table.",
    "A brown horse stands in a green field. Tall trees line the edge of the field.",
    "A man sits on a bench.",
    "A red automobile moves along a wide road lined with green trees. A large dog runs beside it on the grass while "
    "a girl holds a ball.",
]
REFERENCES = [
    ["A red automobile is parked along a street in front of a tall building. Two men are standing next to it. "
     "A brown dog sits nearby.", "Two men and a dog by a red car."],
    ["A woman holds a white cup at a table near a window. Bread lies on a plate."],
    ["A horse standing in a field.", "A brown horse in a large green field with trees in the background. The trees "
                                     "are tall."],
    ["A man sitting on a wooden bench."],
    ["A red car goes down a road with trees on both sides. A big dog runs next to the car, and a little girl is "
     "holding a ball on the grass.", "A dog runs on the grass."],
]
# what the stand-in model answers for each text (words the tiny tokenizer spells back exactly)
GRAPHS = {
    CAPTIONS[0]: "( car , is , red ) , ( car , on , street ) , ( car , near , building ) , ( building , is , tall ) "
                 ", ( men , is , 2 ) , ( men , stand beside , car ) , ( dog , is , brown ) , ( dog , is , small ) , "
                 "( dog , sit on , path ) , ( path , near , pole )",
    CAPTIONS[1]: "( woman , in , shirt ) , ( shirt , is , blue ) , ( woman , hold , cup ) , ( cup , is , white ) , "
                 "( woman , sit at , table ) , ( table , is , wooden ) , ( table , beside , window ) , "
                 "( bread , on , table ) , ( plate , on , table )",
    CAPTIONS[2]: "( horse , is , brown ) , ( horse , stand in , field ) , ( field , is , green ) , "
                 "( trees , is , tall ) , ( trees , line , edge ) , ( edge , of , field )",
    CAPTIONS[3]: "( man , sit on , bench )",
    CAPTIONS[4]: "( automobile , is , red ) , ( automobile , along , road ) , ( road , is , wide ) , ( trees , is , "
                 "green ) , ( road , line with , trees ) , ( dog , is , large ) , ( dog , run beside , automobile ) , "
                 "( dog , on , grass ) , ( girl , hold , ball )",
    REFERENCES[0][0]: "( automobile , is , red ) , ( automobile , along , street ) , ( automobile , in front of , "
                      "building ) , ( building , is , tall ) , ( men , is , 2 ) , ( men , stand beside , automobile )"
                      " , ( dog , is , brown )",
    REFERENCES[0][1]: "( men , is , 2 ) , ( men , near , car ) , ( dog , near , car ) , ( car , is , red )",
    REFERENCES[1][0]: "( woman , hold , cup ) , ( cup , is , white ) , ( woman , at , table ) , ( table , near , "
                      "window ) , ( bread , on , plate )",
    REFERENCES[2][0]: "( horse , stand in , field )",
    REFERENCES[2][1]: "( horse , is , brown ) , ( horse , in , field ) , ( field , is , large ) , "
                      "( field , is , green ) , ( field , with , trees ) , ( trees , is , tall )",
    REFERENCES[3][0]: "( man , sit on , bench ) , ( bench , is , wooden )",
    REFERENCES[4][0]: "( car , is , red ) , ( car , on , road ) , ( road , with , trees ) , ( dog , is , big ) , "
                      "( dog , run beside , car ) , ( girl , is , little ) , ( girl , hold , ball ) , ( girl , on , "
                      "grass )",
    REFERENCES[4][1]: "( dog , run on , grass )",
}
SHORT_CAPTION = "A man sits on a wooden bench beside a tree"
SHORT_GRAPH = "( man , sit on , bench ) , ( bench , is , wooden ) , ( bench , beside , tree )"
SHORT_CUT_GRAPH = "( man , sit on , bench ) , ( bench , is , wooden )"  # "tree" unseen


@pytest.fixture(scope="module")
def evaluation():
    import_official("factual_scene_graph.parser.scene_graph_parser")
    return import_official("factual_scene_graph.evaluation.evaluator")


@pytest.fixture
def official(evaluation, tiny_hub):
    """The package's Evaluator with its own parser on the tiny weights and a sentence-transformers encoder, on the
    CPU."""
    from factual_scene_graph.parser.scene_graph_parser import SceneGraphParser
    from sentence_transformers import SentenceTransformer

    parser = SceneGraphParser(str(resolve("flan-t5-base-vg-factual-sg")), device="cpu")
    parser.tokenizer.as_target_tokenizer = contextlib.nullcontext
    evaluator = evaluation.Evaluator(parser=parser, device="cpu")
    evaluator.text_encoder = SentenceTransformer(str(resolve("all-mpnet-base-v2")), device="cpu")
    return evaluator


@pytest.fixture(scope="module")
def package_synonyms(evaluation):
    """The package's SPICE synonym files (english.synsets, english.exceptions), for capeval's ``synonyms`` option."""
    return str(resources.files("factual_scene_graph.evaluation.resources"))


def official_values(evaluator, method, captions, references):
    return [score / 100 for score in evaluator.evaluate(captions, [list(r) for r in references], method=method)]


def capeval_scorers(package_synonyms, batch_size):
    """spice_factual and soft_spice sharing a parser of their own (``batch_size`` no other test uses: nothing
    cached from other tests' models)."""
    options = dict(device="cpu", batch_size=batch_size)
    return (load_scorer("spice_factual", synonyms=package_synonyms, **options),
            load_scorer("soft_spice", **options))


def token_length(tokenizer, text):
    """The package's measure: prompted, stripped, without the end token."""
    return len(tokenizer.encode(PROMPT + text.strip(), add_special_tokens=False))


def assert_every_batch_is_cut_at_64(tokenizer, captions, references):
    for texts in (captions, [r for refs in references for r in refs]):
        for start in range(0, len(texts), OFFICIAL_BATCH):
            batch = texts[start:start + OFFICIAL_BATCH]
            assert max(token_length(tokenizer, t) for t in batch) >= 64, batch
    lengths = [token_length(tokenizer, t) for t in [*captions, *(r for refs in references for r in refs)]]
    assert min(lengths) < 63 < 64 < max(lengths)  # texts cut at 64 and texts whole, on both sides


class GraphModel:
    """Stands in for the parser model on both sides: answers each text's hand-written graph, found by its input ids
    cut at 64 tokens (end token kept), as both sides should feed them, and, for ``cut_graphs``, the graph of the
    text cut by one token (its last word unseen); any other input fails the test. ``seen``: the inputs asked."""

    def __init__(self, tokenizer, graphs, cut_graphs=None):
        self.tokenizer, self.answers, self.seen = tokenizer, {}, []
        for text, graph in graphs.items():
            self.answers[model_input(tokenizer, text)] = graph
        for text, graph in (cut_graphs or {}).items():
            ids = model_input(tokenizer, text)
            self.answers[ids[:-2] + ids[-1:]] = graph
        for graph in self.answers.values():
            assert tokenizer.decode(tokenizer(graph)["input_ids"], skip_special_tokens=True) == graph  # spelt back

    def generate(self, input_ids, attention_mask=None, **_):
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            key = tuple(i for i, keep in zip(ids, mask) if keep)
            assert key in self.answers, f"an input no text gives: {self.tokenizer.decode(key)!r}"
            self.seen.append(key)
            rows.append([self.tokenizer.pad_token_id, *self.tokenizer(self.answers[key])["input_ids"]])
        width = max(map(len, rows))
        return torch.tensor([row + [self.tokenizer.pad_token_id] * (width - len(row)) for row in rows])


def model_input(tokenizer, text):
    """The prompted text's ids cut at 64 tokens, the end token kept."""
    ids = tuple(tokenizer(PROMPT + text.strip())["input_ids"])
    return ids if len(ids) <= 64 else ids[:63] + ids[-1:]


def recorder(model, seen):
    """Wraps ``model.generate``: records each row's unpadded input ids -> its output ids without padding."""
    generate = model.generate

    def recording(input_ids, attention_mask=None, **options):
        out = generate(input_ids, attention_mask=attention_mask, **options)
        for ids, mask, row in zip(input_ids.tolist(), attention_mask.tolist(), out.tolist()):
            seen[tuple(i for i, keep in zip(ids, mask) if keep)] = tuple(i for i in row if i != 0)
        return out

    return recording


def test_the_tiny_parser_generates_the_same_strings_from_the_same_inputs_on_both_sides(official, package_synonyms,
                                                                                         monkeypatch):
    """The real generation path: each text reaches the model as the same ids on both sides (the package padded in
    its batches of 4, capeval unpadded) and gives the same output ids, so the same graphs and values. (The tiny
    random model writes no parenthesised fact, so every graph is empty and every value 1: the values are compared
    on answered graphs below.)"""
    assert_every_batch_is_cut_at_64(official.parser.tokenizer, CAPTIONS, REFERENCES)
    spice, soft = capeval_scorers(package_synonyms, batch_size=11)
    package_seen, capeval_seen = {}, {}
    monkeypatch.setattr(official.parser.model, "generate", recorder(official.parser.model, package_seen))
    monkeypatch.setattr(spice.parser.model, "generate", recorder(spice.parser.model, capeval_seen))
    for scorer, method in ((spice, "spice"), (soft, "soft_spice")):
        expected = official_values(official, method, CAPTIONS, REFERENCES)
        got = scorer.score(CAPTIONS, references=REFERENCES)[f"{scorer.name}_per_sample"]
        np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE, err_msg=method)
    assert len(capeval_seen) == len(GRAPHS) and capeval_seen == package_seen
    assert len(set(capeval_seen.values())) > 1  # not one output for every text (the tiny model's outputs may repeat)


def test_both_variants_equal_the_evaluator_on_answered_graphs(official, package_synonyms, monkeypatch):
    """The same inputs, the model on both sides answering the hand-written graphs: SPICE values strictly between 0
    and 1, the synonym stage (car ~ automobile in SPICE's dictionary) among them."""
    tokenizer = official.parser.tokenizer
    assert_every_batch_is_cut_at_64(tokenizer, CAPTIONS, REFERENCES)
    model = GraphModel(tokenizer, GRAPHS)
    spice, soft = capeval_scorers(package_synonyms, batch_size=12)
    for parser_model in (official.parser.model, spice.parser.model):
        monkeypatch.setattr(parser_model, "generate", model.generate)
    values = {}
    for scorer, method in ((spice, "spice"), (soft, "soft_spice")):
        expected = official_values(official, method, CAPTIONS, REFERENCES)
        values[method] = scorer.score(CAPTIONS, references=REFERENCES)
        np.testing.assert_allclose(values[method][f"{scorer.name}_per_sample"], expected, rtol=0, atol=TOLERANCE,
                                   err_msg=method)
    spice_values = values["spice"]["spice_factual_per_sample"]
    assert 0 < min(spice_values) and max(spice_values) < 1 and len({round(v, 6) for v in spice_values}) == 5
    without_synonyms = load_scorer("spice_factual", synonyms=package_synonyms, synonym_match=False, device="cpu",
                                   batch_size=12).score(CAPTIONS, references=REFERENCES)
    expected = official_values(official, "spice", CAPTIONS, REFERENCES)  # synonym_match defaults to True there
    assert without_synonyms["spice_factual_per_sample"][4] < expected[4]  # automobile ~ car counts only with it


def test_the_package_s_batch_cut_changes_a_value_and_capeval_s_whole_text_does_not(official, package_synonyms,
                                                                                    monkeypatch):
    """The documented difference, on purpose. A short caption (under 63 tokens) scored alone is the longest text of
    its batch: the package cuts its last token off (the model does not see "tree", and misses the fact naming it),
    while beside a longer caption it parses it whole. capeval parses it whole in either company, and gives the
    package's whole-text value."""
    tokenizer = official.parser.tokenizer
    assert token_length(tokenizer, SHORT_CAPTION) < 63 and token_length(tokenizer, CAPTIONS[1]) >= 64
    model = GraphModel(tokenizer, {**GRAPHS, SHORT_CAPTION: SHORT_GRAPH}, cut_graphs={SHORT_CAPTION: SHORT_CUT_GRAPH})
    spice, soft = capeval_scorers(package_synonyms, batch_size=13)
    for parser_model in (official.parser.model, spice.parser.model):
        monkeypatch.setattr(parser_model, "generate", model.generate)
    whole = model_input(tokenizer, SHORT_CAPTION)
    references = [[REFERENCES[3][0], CAPTIONS[1]]]  # the references' batch holds a long text: never cut
    for scorer, method in ((spice, "spice"), (soft, "soft_spice")):
        model.seen.clear()
        alone = official_values(official, method, [SHORT_CAPTION], references)[0]
        assert whole[:-2] + whole[-1:] in model.seen and whole not in model.seen  # cut by one token
        model.seen.clear()
        beside = official_values(official, method, [SHORT_CAPTION, CAPTIONS[1]], references * 2)[0]
        assert whole in model.seen  # whole
        assert abs(alone - beside) > 1e-3, method  # the package's value depends on the caption's company
        ours = scorer.score([SHORT_CAPTION], references=references)[f"{scorer.name}_per_sample"][0]
        assert ours == pytest.approx(beside, abs=TOLERANCE), method
        ours_beside = scorer.score([SHORT_CAPTION, CAPTIONS[1]], references=references * 2)
        assert ours_beside[f"{scorer.name}_per_sample"][0] == ours  # capeval: one value in either company
