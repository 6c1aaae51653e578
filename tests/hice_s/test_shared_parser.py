"""HICE-S's FACTUAL parser is the process's shared scene-graph parser: another consumer of the same weights and
settings reuses its model load and its generations, and a later process reuses its persisted outputs."""

import json
import os
import subprocess
import sys
import textwrap
from unittest import mock

import numpy as np

from capeval import load_scorer
from capeval.core.caches import DEFAULT_CACHE_BYTES
from capeval.hice_s.phrases import parse_scene_graph, phrases_from_graph

SETTINGS = {"points_per_side": 4, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0, "max_regions": 4}
CAPTIONS = ["two cats sleeping", "a dog on the grass"]
REFERENCES = [["a cat", " two cats sleeping"], ["a dog"]]  # "two cats sleeping" is a caption and a reference


def _images(count=2, seed=5):
    from PIL import Image

    rng = np.random.default_rng(seed)
    return [Image.fromarray(rng.integers(0, 255, (40, 48 + 4 * i, 3), dtype=np.uint8)) for i in range(count)]


def test_hice_s_and_another_consumer_share_one_model_load_and_one_generation_per_text(tiny_hub):
    import transformers

    from capeval.backbones.scene_graph_parser import shared_scene_graph_parser

    budget = DEFAULT_CACHE_BYTES + 4321  # settings of this test alone: no parser left alive by another test is found
    auto = transformers.AutoModelForSeq2SeqLM
    with mock.patch.object(auto, "from_pretrained", wraps=auto.from_pretrained) as loads:
        scorer = load_scorer("hice_s", region_settings=SETTINGS, device="cpu", cache_bytes=budget)
        other = shared_scene_graph_parser(device="cpu", cache_bytes=budget)
    assert loads.call_count == 1 and other is scorer.phrases.parser

    with mock.patch.object(other.model, "generate", wraps=other.model.generate) as generate:
        scorer.score(CAPTIONS, _images(), REFERENCES)
        distinct = ["two cats sleeping", "a dog on the grass", "a cat", "a dog"]
        assert sum(len(call.args[0]) for call in generate.call_args_list) == len(distinct) == other.generated_texts
        generate.reset_mock()
        strings = other.parse(distinct + ["cats on a blanket"])  # the second consumer: only its new text
        assert sum(len(call.args[0]) for call in generate.call_args_list) == 1 and other.generated_texts == 5
        generate.reset_mock()
        # each reads the same raw strings its own way; HICE-S now finds the other consumer's text too
        assert scorer.phrases.extract(distinct + ["cats on a blanket"]) == [phrases_from_graph(parse_scene_graph(s))
                                                                             for s in strings]
        scorer.score(["cats on a blanket"], _images(1), [["a dog"]])
        assert generate.call_args_list == [] and other.generated_texts == 5


_SECOND_RUN = textwrap.dedent("""
    import json, sys
    from unittest import mock
    import numpy as np
    from PIL import Image
    from capeval import load_scorer

    settings, captions, references = json.loads(sys.argv[2])
    rng = np.random.default_rng(5)
    images = [Image.fromarray(rng.integers(0, 255, (40, 48 + 4 * i, 3), dtype=np.uint8)) for i in range(2)]
    scorer = load_scorer("hice_s", region_settings=settings, device="cpu", persist_dir=sys.argv[1])
    model = scorer.phrases.parser.model
    with mock.patch.object(model, "generate", wraps=model.generate) as generate:
        result = scorer.score(captions, images, references)
        texts = [t for t in captions] + [r for sample in references for r in sample]
        strings = scorer.phrases.parser.parse(texts)
    print(json.dumps({"generate_calls": generate.call_count, "strings": strings,
                      **{k: result[k] for k in ("hice_s_per_sample", "refhice_s_per_sample", "local_itc_per_sample")}}))
""")


def test_a_second_process_reuses_the_persisted_parses_without_generating(tiny_hub, tmp_path):
    scorer = load_scorer("hice_s", region_settings=SETTINGS, device="cpu", persist_dir=str(tmp_path))
    first = scorer.score(CAPTIONS, _images(), REFERENCES)
    folder = tmp_path / str(scorer.phrases.parser.namespace)
    assert len(list(folder.glob("*.json"))) == 1 + 4  # namespace.json and the 4 distinct stripped texts

    env = {**os.environ, "HF_HUB_CACHE": str(tiny_hub), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", _SECOND_RUN, str(tmp_path),
                          json.dumps([SETTINGS, CAPTIONS, REFERENCES])],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    second = json.loads(run.stdout.strip().splitlines()[-1])
    assert second.pop("generate_calls") == 0
    texts = CAPTIONS + [r for sample in REFERENCES for r in sample]
    assert second.pop("strings") == scorer.phrases.parser.parse(texts)
    for key, values in second.items():  # floats through JSON keep every bit (nan: a caption without phrases)
        assert repr(values) == repr(first[key]), key
