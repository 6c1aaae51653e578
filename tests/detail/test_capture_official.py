"""``capture`` against the official ``capture-metric`` 0.1.13 (a test dependency, installed with ``--no-deps``) on the
same parser outputs, NLTK data and encoder: per caption, CAPTURE and every P/R/F1 within 1e-6.

Harness only: the official code's batch generation (``_parse_batch``, whose ``tokenizer.as_target_tokenizer()``
today's transformers no longer has) and capeval's parser model answer the same hand-written FACTUAL outputs (the
official ``SceneGraphParser.parse`` still reads them into graphs; the official input cut is checked in
test_capture_scorer.py), its encoder is a
sentence-transformers model of the tiny all-mpnet-base-v2 weights on the CPU, and its per-GPU parsing pool runs in
this process."""

import numpy as np
import pytest

from capeval.core.hub import resolve
from capeval.core.scoring import load_scorer

from scene_graph_oracles import import_official
from test_capture_scorer import GRAPHS, OPTIONS, PREDICTIONS, REFERENCES, seed, tiny_nltk_module  # noqa: F401

# a skip naming the pip line where the oracles are missing; a failure in CI, which installs them
capture_metric = import_official("capture_metric.capture")
scene_graph_parser = import_official("factual_scene_graph.parser.scene_graph_parser")
sentence_transformers = import_official("sentence_transformers")


@pytest.fixture
def official(tiny_hub, tiny_nltk_module, monkeypatch):
    from factual_scene_graph.utils import clean_graph_string, space_out_symbols_in_graph

    parser = scene_graph_parser.SceneGraphParser(str(resolve("flan-t5-base-vg-factual-sg")), device="cpu")

    def parse_batch(descriptions, max_input_len, max_output_len, beam_size, filter_factual_chars, batch_size):
        assert (max_input_len, max_output_len, beam_size) == (64, 128, 5)  # the official call's settings
        return [clean_graph_string(space_out_symbols_in_graph(GRAPHS[d.strip()])) for d in descriptions]

    monkeypatch.setattr(parser, "_parse_batch", parse_batch)
    evaluator = capture_metric.CAPTURE(soft_matching=False)  # its constructor would put the encoder on cuda:0
    evaluator.soft_matching = True
    evaluator.text_encoder = sentence_transformers.SentenceTransformer(str(resolve("all-mpnet-base-v2")),
                                                                       device="cpu")
    evaluator.parser = parser
    return evaluator


def test_capture_equals_capture_metric_on_the_same_parses(official, monkeypatch):
    parsed = {text: official.sample_to_parse_results((text, text))[1:]
              for text in {*PREDICTIONS, *(r for refs in REFERENCES for r in refs)}}
    expected = [[official.compute_f_score(parsed[r], parsed[p]) for r in refs]
                for p, refs in zip(PREDICTIONS, REFERENCES)]
    scorer = load_scorer("capture", **OPTIONS)
    seed(scorer.parser, monkeypatch)
    result = scorer.score(PREDICTIONS, references=REFERENCES)
    np.testing.assert_allclose(result["capture_per_sample"],
                               [np.mean([float(r[0]) for r in rows]) for rows in expected], rtol=0, atol=1e-6)
    fields = [(kind, measure) for kind in ("objects", "attributes", "relations")
              for measure in ("precision", "recall", "f1")]
    for detail, rows in zip(result["capture_details"], expected):
        for position, (kind, measure) in enumerate(fields, start=1):
            assert detail[kind][measure] == pytest.approx(np.mean([float(r[position]) for r in rows]), abs=1e-6)
    assert len({round(v, 6) for v in result["capture_per_sample"]}) == 3  # three different, non-trivial values
