"""METEOR's worker processes in the COCO group (``score_coco_group``, Python backend): started before BLEU, ROUGE-L
and CIDEr-D are scored in the calling process, they give the values of one process, and a call that fails meanwhile
stops them."""

import json
import multiprocessing

import numpy as np
import pytest

from capeval.text import coco

IMAGES = 120


@pytest.fixture(scope="module")
def flickr(request):
    """References (5 per image) and two systems: the first and the last Expert candidate of each image."""
    shared_data = request.getfixturevalue("shared_data")
    data = json.loads((shared_data / "benchmarks/flickr8k/flickr8k_expert_clipscore_format.json").read_text())
    entries = list(data.values())[:IMAGES]
    systems = [[e["human_judgement"][k]["caption"] for e in entries] for k in (0, -1)]
    return [e["ground_truth"] for e in entries], systems


def test_worker_processes_give_the_values_of_one_process(flickr, monkeypatch):
    references, systems = flickr
    one = coco.score_coco_group(systems, references, metrics=["bleu", "meteor", "cider"])
    monkeypatch.setattr(coco, "METEOR_PROCESSES_FROM", 2)
    monkeypatch.setattr(coco.os, "cpu_count", lambda: 2)
    workers = coco.score_coco_group(systems, references, metrics=["bleu", "meteor", "cider"])
    assert not multiprocessing.active_children()
    for alone, split in zip(one, workers):
        assert list(alone) == list(split)
        for key in alone:
            assert split[key].corpus == alone[key].corpus
            assert split[key].per_sample == alone[key].per_sample
            assert np.array_equal(split[key].statistics.per_unit, alone[key].statistics.per_unit)


def test_a_call_that_fails_while_the_workers_run_stops_them(flickr, monkeypatch):
    references, systems = flickr
    started = []

    def fail(self, candidates):
        started.extend(multiprocessing.active_children())
        raise RuntimeError("the overlap metrics failed")

    monkeypatch.setattr(coco, "METEOR_PROCESSES_FROM", 2)
    monkeypatch.setattr(coco.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(coco.OverlapReferences, "values", fail)
    with pytest.raises(RuntimeError, match="the overlap metrics failed"):
        coco.score_coco_group(systems, references, metrics=["bleu", "meteor"])
    assert len(started) == 2  # METEOR's workers ran while the other metrics were scored
    assert not multiprocessing.active_children()
