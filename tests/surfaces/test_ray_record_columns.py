"""ray-score maps records to columns as ``capeval score`` does (issue #27 item 2): the same field options, list text
in a references cell read as the list, and one run's rows all scored with references or all without (per actor
across its batches, and over the whole output in the summary)."""

import json
import sys

import numpy as np
import pytest
from PIL import Image

ray = pytest.importorskip("ray")
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from capeval.cli import main  # noqa: E402
from capeval.cli.ray_score import _summary  # noqa: E402
from capeval.core.errors import InputError  # noqa: E402

CAPTIONS = ["a dog runs on the grass", "two cats sit near the water", "a man rides a red bike",
            "a small boy plays with a ball", "a woman holding a blue cup", "the big dog sleeps"]
REFERENCES = [["a dog running on grass", "a brown dog runs"], ["two cats by the water"],
              ["a man on a red bicycle", "someone rides a bike", "a cyclist"], ["a child plays with a ball"],
              ["a woman holds a cup", "a lady with a blue mug"], ["a dog sleeping", "a large dog asleep"]]


@pytest.fixture(scope="module")
def local_ray(ray_session):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def test_summary_refuses_an_output_mixing_rows_with_and_without_reference_scores(tmp_path):
    """What two actors write when one scored rows with references and the other rows without."""
    out = tmp_path / "out"
    out.mkdir()
    pq.write_table(pa.table({"index": [0, 1], "caption": ["a", "b"], "clip_s": [0.5, 0.6],
                             "refclip_s": [0.4, 0.5]}), out / "1.parquet")
    pq.write_table(pa.table({"index": [2, 3], "caption": ["c", "d"], "clip_s": [0.7, 0.8]}), out / "2.parquet")
    with pytest.raises(InputError, match=r"mixes rows scored with and without 'refclip_s' \(2 of 4 scored rows "
                                         r"have it; record 2 has not\).*in every record or in none"):
        _summary(out, "clip_s", {"index", "caption"})
    (out / "2.parquet").unlink()  # rows with no score at all (invalid, or a skipped empty caption) do not count
    pq.write_table(pa.table({"index": [2], "caption": ["c"], "clip_s": pa.array([None], pa.float64()),
                             "error": ["record 2: bad"]}), out / "2.parquet")
    assert _summary(out, "clip_s", {"index", "caption"})["n"] == 3


def test_rows_with_references_then_rows_without_are_refused(local_ray, tmp_path, capsys):
    """First rows with references, later rows without: one actor scores both (batches of 2), and is refused."""
    for i in range(6):
        pixels = np.random.default_rng(i).integers(0, 256, (20, 24, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"{i}.png")
    with open(tmp_path / "a.jsonl", "w") as f:
        for i in range(4):
            f.write(json.dumps({"index": i, "caption": CAPTIONS[i], "image": f"{i}.png",
                                "references": REFERENCES[i]}) + "\n")
    with open(tmp_path / "b.jsonl", "w") as f:
        for i in range(4, 6):
            f.write(json.dumps({"index": i, "caption": CAPTIONS[i], "image": f"{i}.png"}) + "\n")
    capsys.readouterr()
    code = main(["ray-score", "rouge_l", "--input", str(tmp_path / "b.jsonl"), "--output", str(tmp_path / "x"),
                 "--num-cpus", "0.5"])
    assert code == 2 and "rouge_l needs references" in capsys.readouterr().err  # rouge_l: references required
    code = main(["ray-score", "clip_s", "--input", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"),
                 "--images", str(tmp_path), "--output", str(tmp_path / "out"), "--device", "cpu", "--num-cpus", "0.5",
                 "--batch-size", "2"])
    err = capsys.readouterr().err
    assert code == 2, err
    message = err.splitlines()[-1]  # (Ray logs its progress and the worker's error to stderr before)
    assert message.startswith("capeval ray-score: error: record ") and "in every record or in none" in message
    assert not (tmp_path / "out.provenance.json").exists()


def test_field_options_and_list_text_cells_equal_capeval_score(local_ray, tmp_path, capsys):
    with open(tmp_path / "in.csv", "w", newline="") as f:
        import csv

        writer = csv.writer(f)
        writer.writerow(["text", "gt"])
        for caption, refs in zip(CAPTIONS, REFERENCES):
            writer.writerow([caption, json.dumps(refs)])
    options = ["--caption-field", "text", "--references-field", "gt"]
    assert main(["score", "rouge_l", "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "single.jsonl"),
                 *options]) == 0
    single_summary = json.loads(capsys.readouterr().out)
    single = [json.loads(line)["scores"]["rouge_l"] for line in (tmp_path / "single.jsonl").read_text().splitlines()]
    assert main(["ray-score", "rouge_l", "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "out"),
                 "--num-cpus", "0.5", "--batch-size", "4", "--json", *options]) == 0
    summary = json.loads(capsys.readouterr().out)  # --json: Ray Data's own printing goes to stderr
    rows = sorted(pq.read_table(tmp_path / "out").to_pylist(), key=lambda r: r["index"])
    assert [r["rouge_l"] for r in rows] == single
    assert summary["rouge_l"] == pytest.approx(single_summary["rouge_l"], abs=1e-12)  # the same mean, summed in chunks
    assert summary["n"] == single_summary["n"] == 6
    one_reference = main(["score", "rouge_l", "--input", str(tmp_path / "in.csv"), "--caption-field", "text",
                          "--references-field", "text"])  # the list text matters: other references, other numbers
    assert one_reference == 0 and json.loads(capsys.readouterr().out)["rouge_l"] != summary["rouge_l"]
