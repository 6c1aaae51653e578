"""Per-image NaN scores in a suite (issue #34 item 6): handled as the scorer alone handles them, counted and
reported, never a crash after scoring; a failure after scoring saves every per-image score first.

HICE-S's local term is undefined (NaN) for a caption without phrases and its mean is over the captions that have
one: the suite's corpus value, CI and tests use the same mean (before: compare_systems refused the NaN statistics
after the models had run, 510 s into a CLI run)."""

import json
import math

import numpy as np
import pytest
from capeval.core.errors import ScoredThenFailedError
from capeval.core.scoring import load_scorer
from capeval.core.corpus_statistics import mean_statistics
from capeval.functional.correlation import UndefinedStatisticWarning
from capeval.statistics.systems import compare_systems

SETTINGS = {"points_per_side": 4, "pred_iou_thresh": 0.0, "stability_score_thresh": 0.0, "max_regions": 4}
REFERENCES = ["a cat", "cats on a blanket"]
SYSTEMS = {"base": ["a dog on the grass", "nothing to parse"], "new": ["two cats sleeping", "a cat"]}


class TablePhrases:
    """A phrase parser with known output (the scorer's phrase_parser option): none for "nothing to parse"."""

    TABLE = {"a dog on the grass": ["dog", "grass"], "two cats sleeping": ["two cats"], "a cat": ["cat"],
             "cats on a blanket": ["cats", "blanket"], "nothing to parse": []}

    def extract(self, captions):
        return [list(self.TABLE.get(c, [])) for c in captions]


@pytest.fixture(scope="module")
def records(tmp_path_factory, shared_data):
    root = shared_data / "images" / "pacscore"
    images = [str(root / "image1.jpg"), str(root / "image2.jpg")]
    folder = tmp_path_factory.mktemp("records")
    paths = []
    for name, captions in SYSTEMS.items():
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"caption": c, "image": i, "references": REFERENCES}) + "\n"
                                for c, i in zip(captions, images)))
        paths.append(str(path))
    return paths, images


def hice_options():
    return {"phrase_parser": TablePhrases(), "region_settings": SETTINGS, "device": "cpu"}


def test_a_metric_undefined_on_some_images_is_averaged_over_the_others_and_counted(tiny_hub, records):
    from capeval.suite.run import evaluate_captions

    paths, images = records
    with pytest.warns(UserWarning):  # tiny weights, two images
        report = evaluate_captions(records=paths, metrics=["hice_s"], options={"hice_s": hice_options()},
                                   resamples=100, show_progress=False)
    alone = load_scorer("hice_s", **hice_options())
    rows = {row["image_id"]: row for row in report["images"]}
    assert len(rows) == 2
    for name in SYSTEMS:
        scored = [rows[i]["scores"][name] for i in rows]
        local = [s["local_itc"] for s in scored]
        expected = alone.score([rows[i]["captions"][name] for i in rows], [rows[i]["file"] for i in rows])
        assert all(a == b or (math.isnan(a) and math.isnan(b))
                   for a, b in zip(local, expected["local_itc_per_sample"]))
        entry = report["systems"][name]["scores"]["local_itc"]
        if all(math.isnan(v) for v in local):
            assert math.isnan(entry["value"])
        else:
            assert entry["value"] == expected["local_itc"]  # the mean over the captions with phrases, as alone
    assert report["undefined_images"]["base"]["local_itc"] == 1
    assert "local_itc" not in report["undefined_images"].get("new", {})


def test_a_mean_that_is_nan_is_reported_undefined_not_refused():
    rng = np.random.default_rng(0)
    scores = {"a": rng.uniform(0, 1, 20), "b": rng.uniform(0, 1, 20), "c": rng.uniform(0, 1, 20)}
    scores["b"][4] = np.nan
    stats = {name: {"s": mean_statistics(values)} for name, values in scores.items()}
    with pytest.warns(UndefinedStatisticWarning, match="s of b is undefined: undefined \\(NaN\\) on 1 of 20"):
        out = compare_systems(stats, resamples=100, undefined={"s": {"b": "undefined (NaN) on 1 of 20 images"}})
    assert "b" in out["undefined"]["s"] and "b" not in out["clusters"]["s"]
    assert all(math.isnan(x) for x in out["systems"]["b"]["s"]["ci"])
    pair = next(c for c in out["comparisons"] if {c["system_a"], c["system_b"]} == {"a", "c"})
    assert not math.isnan(pair["p_randomization"])


def test_a_failure_after_scoring_saves_the_per_image_scores_first(tmp_path, monkeypatch):
    """The report writer fails (here: an output folder that turns into a file while scoring); the error names the
    stage and the file holding every per-image score, which equal the scores computed."""
    from capeval.suite import run

    truth = tmp_path / "records.jsonl"
    truth.write_text("".join(json.dumps({"caption": c, "references": ["a cat on a mat", "a dog"]}) + "\n"
                             for c in ("a cat", "a dog on a mat", "two cats")))

    def failing(*args, **kwargs):
        raise OSError("disk full")

    import capeval.report.write as write

    monkeypatch.setattr(write, "write_report", failing)
    with pytest.raises(ScoredThenFailedError, match=r"then the report failed \(OSError: disk full\); every "
                                                   r"per-image score is saved in .*scores\.json"):
        run.evaluate_captions(records=[str(truth)], metrics=["rouge_l"], resamples=100, output=str(tmp_path / "out"))
    saved = json.loads((tmp_path / "out" / "scores.json").read_text())
    alone = load_scorer("rouge_l").score(["a cat", "a dog on a mat", "two cats"],
                                         references=[["a cat on a mat", "a dog"]] * 3)
    assert saved["per_image"][truth.stem]["rouge_l"] == alone["rouge_l_per_sample"]
