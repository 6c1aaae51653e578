"""``iter_records``: the same records in the same order from every input kind, and parquet read one batch at a time."""

import csv
import io
import json
import tracemalloc

import pytest
from PIL import Image

from capeval import InputError
from capeval.core.inputs import load_image
from capeval.core.record_sources import iter_records

RECORDS = [{"caption": f"caption number {i}", "image": f"images/{i}.png", "references": [f"ref {i} a", f"ref {i} b"]}
           for i in range(7)]


def _write_inputs(tmp_path):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "in.jsonl").write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n")
    with (tmp_path / "in.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["caption", "image", "references"])
        writer.writeheader()
        writer.writerows({**r, "references": json.dumps(r["references"])} for r in RECORDS)
    pq.write_table(pa.Table.from_pylist(RECORDS), tmp_path / "in.parquet", row_group_size=3)
    dataset = datasets.Dataset.from_list(RECORDS)
    dataset.save_to_disk(str(tmp_path / "saved"))
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "data.jsonl").write_text((tmp_path / "in.jsonl").read_text())
    return dataset


def test_every_input_kind_yields_the_same_records_in_order(tmp_path):
    dataset = _write_inputs(tmp_path)
    sources = {"jsonl": tmp_path / "in.jsonl", "csv": tmp_path / "in.csv", "parquet": tmp_path / "in.parquet",
               "save_to_disk": tmp_path / "saved", "data folder (streaming)": tmp_path / "files",
               "Dataset": dataset, "IterableDataset": dataset.to_iterable_dataset()}
    for kind, source in sources.items():
        for chunk_size in (1, 3, 100):
            assert list(iter_records(source, chunk_size=chunk_size)) == RECORDS, (kind, chunk_size)


def test_image_columns_stay_undecoded_dicts_that_load_image_reads(tmp_path):
    import datasets

    picture = Image.new("RGB", (4, 3), (10, 200, 30))
    picture.save(tmp_path / "p.png")
    png = io.BytesIO()
    picture.save(png, format="PNG")
    by_path = datasets.Dataset.from_dict({"caption": ["a"], "image": [str(tmp_path / "p.png")]}).cast_column(
        "image", datasets.Image())
    by_bytes = datasets.Dataset.from_dict({"caption": ["b"], "image": [{"bytes": png.getvalue(), "path": None}]},
                                          features=datasets.Features({"caption": datasets.Value("string"),
                                                                      "image": datasets.Image()}))
    by_bytes.save_to_disk(str(tmp_path / "saved"))
    for source in (by_path, by_path.to_iterable_dataset(), tmp_path / "saved"):
        (record,) = iter_records(source, chunk_size=2)
        assert isinstance(record["image"], dict) and set(record["image"]) == {"bytes", "path"}
        assert list(load_image(record["image"]).getdata()) == list(picture.getdata())


def test_parquet_is_read_one_batch_at_a_time_in_bounded_memory(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"caption": f"{i} " + "word " * 100, "image": f"{i}.jpg", "references": ["ref " * 50] * 3}
            for i in range(10_000)]
    path = tmp_path / "big.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=1000)
    del rows

    produced = []
    real_iter_batches = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        for batch in real_iter_batches(self, *args, **kwargs):
            produced.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    tracemalloc.start()
    try:
        count = 0
        for count, _record in enumerate(iter_records(path, chunk_size=100), 1):
            assert len(produced) == (count - 1) // 100 + 1  # the next batch is read only when the last is used up
        _, streaming_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        everything = pq.read_table(path).to_pylist()
        _, materialised_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == len(everything) == 10_000 and set(produced) == {100}
    # 100 decoded rows are live at a time, not 10,000 (the whole file as Python objects)
    assert streaming_peak < materialised_peak / 20, (streaming_peak, materialised_peak)


def test_bad_inputs_are_clear_errors(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"caption": "ok"}\n[1, 2]\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: expected a JSON object"):
        list(iter_records(tmp_path / "bad.jsonl"))
    (tmp_path / "broken.jsonl").write_text('{"caption": \n')
    with pytest.raises(InputError, match=r"broken.jsonl:1: invalid JSON"):
        list(iter_records(tmp_path / "broken.jsonl"))
    with pytest.raises(InputError, match="input file not found"):
        list(iter_records(tmp_path / "missing.parquet"))
    with pytest.raises(InputError, match="chunk_size must be a positive"):
        list(iter_records(tmp_path / "bad.jsonl", chunk_size=0))
    with pytest.raises(InputError, match="cannot open 'nobody/missing-dataset'"):  # hub unreachable (offline)
        list(iter_records("nobody/missing-dataset"))
    with pytest.raises(InputError, match="cannot read records from list"):
        list(iter_records([{"caption": "a"}]))


def test_splits_of_dataset_dicts_and_folders(tmp_path):
    import datasets

    first, second = RECORDS[:3], RECORDS[3:]
    both = datasets.DatasetDict({"train": datasets.Dataset.from_list(first),
                                 "test": datasets.Dataset.from_list(second)})
    both.save_to_disk(str(tmp_path / "saved"))
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first))
    (tmp_path / "files" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in second))
    for source in (both, tmp_path / "saved", tmp_path / "files"):
        assert list(iter_records(source, split="train", chunk_size=2)) == first, source
        assert list(iter_records(source, split="test")) == second, source
        with pytest.raises(InputError, match=r"holds the splits .*choose one \(--split\)"):
            list(iter_records(source))
    with pytest.raises(InputError, match="holds the splits .*not 'validation'"):
        list(iter_records(tmp_path / "saved", split="validation"))
    with pytest.raises(InputError, match="cannot open .*validation"):
        list(iter_records(tmp_path / "files", split="validation"))
    single = tmp_path / "single"
    single.mkdir()
    (single / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first))
    assert list(iter_records(single)) == first  # one split: no need to name it


def test_bad_data_files_and_options_are_clear_errors(tmp_path):
    (tmp_path / "in.jsonl").write_text(json.dumps(RECORDS[0]) + "\n")
    with pytest.raises(InputError, match="single file: --split/--config"):
        list(iter_records(tmp_path / "in.jsonl", split="train"))
    import datasets

    datasets.Dataset.from_list(RECORDS).save_to_disk(str(tmp_path / "one"))
    with pytest.raises(InputError, match="holds a single split: --split test does not apply"):
        list(iter_records(tmp_path / "one", split="test"))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "data.jsonl").write_text(json.dumps(RECORDS[0]) + "\n{broken\n")
    with pytest.raises(InputError, match="cannot read .*folder"):  # parsed lazily while streaming
        list(iter_records(folder))
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="cannot open .*empty.*any data files"):
        list(iter_records(tmp_path / "empty"))
    (tmp_path / "bad.csv").write_text('caption,references\na,"[broken"\n')
    with pytest.raises(InputError, match=r"bad.csv:2: 'references' is not a JSON list"):
        list(iter_records(tmp_path / "bad.csv"))
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="not a readable parquet file"):
        list(iter_records(tmp_path / "bad.parquet"))


def test_record_fingerprint_is_the_same_for_every_input_kind_and_changes_with_any_edit(tmp_path):
    """``RecordFingerprint``: sha256 over each record's sorted-key JSON line in order (computed here independently),
    equal for the same records from every input kind and read in any chunk size; an edit, a reordering or a lost
    record changes it; embedded image bytes count by their content."""
    import hashlib

    from capeval.cli.fingerprint import RecordFingerprint

    def fingerprint(records):
        fp = RecordFingerprint()
        seen = list(fp.watch(records))  # passed through unchanged
        assert not isinstance(records, list) or seen == records
        return fp.hexdigest(), fp.records

    def independent(records):
        lines = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
                        for r in records)
        return hashlib.sha256(lines.encode("utf-8")).hexdigest()[:16]

    dataset = _write_inputs(tmp_path)
    expected = (independent(RECORDS), len(RECORDS))
    assert fingerprint(RECORDS) == expected
    for source in ("in.jsonl", "in.csv", "in.parquet", "saved", "files"):
        for chunk_size in (1, 3, 1024):
            assert fingerprint(iter_records(tmp_path / source, chunk_size=chunk_size)) == expected, source
    assert fingerprint(iter_records(dataset, chunk_size=2)) == expected
    edited = [dict(r) for r in RECORDS]
    edited[3]["caption"] += "."
    assert fingerprint(edited)[0] != expected[0]
    assert fingerprint(RECORDS[1::-1] + RECORDS[2:])[0] != expected[0]
    assert fingerprint(RECORDS[:-1]) == (independent(RECORDS[:-1]), len(RECORDS) - 1) != expected
    # a record split across two or merged into one is a different input (one line per record)
    assert fingerprint([{"caption": "a\nb"}])[0] != fingerprint([{"caption": "a"}, {"caption": "b"}])[0]
    png = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(png, format="PNG")
    red = {"caption": "x", "image": {"bytes": png.getvalue(), "path": None}}
    blue = io.BytesIO()
    Image.new("RGB", (4, 4), "blue").save(blue, format="PNG")
    assert fingerprint([red])[0] != fingerprint([{**red, "image": {"bytes": blue.getvalue(), "path": None}}])[0]
    assert fingerprint([red]) == fingerprint([{**red, "image": {"path": None, "bytes": png.getvalue()}}])


def _policy(images="unused", references="optional", name="metric"):
    from types import SimpleNamespace

    return SimpleNamespace(name=name, images=images, references=references)


def test_a_csv_references_column_under_any_name_is_read_as_lists(tmp_path):
    """The list cells of whatever field is mapped to references are parsed (JSON or a pandas-written Python list);
    a bare text cell stays one reference."""
    from capeval.core.record_columns import RecordColumns

    rows = [("a dog", '["a dog running", "a brown dog"]'), ("a cat", "['a cat', \"a cat's toy\"]"),
            ("a car", "one reference")]
    with (tmp_path / "in.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "gt"])
        writer.writerows(rows)
    records = [{**r, "index": i} for i, r in enumerate(iter_records(tmp_path / "in.csv"))]
    captions, images, references = RecordColumns(_policy(), fields={"caption": "text", "references": "gt"})(records)
    assert captions == ["a dog", "a cat", "a car"] and images is None
    assert references == [["a dog running", "a brown dog"], ["a cat", "a cat's toy"], "one reference"]
    records[2]["gt"] = '["unclosed", '
    with pytest.raises(InputError, match=r"record 2: 'gt' is not a JSON list"):
        RecordColumns(_policy(), fields={"caption": "text", "references": "gt"})(records)


def test_a_null_field_is_named_null_with_its_record_and_a_look_alike_field_is_named(tmp_path):
    from capeval.core.record_columns import RecordColumns

    records = [{"caption": "a dog", "index": 4}, {"caption": None, "index": 5}]
    with pytest.raises(InputError, match=r"^record 5: 'caption' is null \(metric needs caption\)$"):
        RecordColumns(_policy())(records)
    with pytest.raises(InputError, match=r"^record 7: no 'references' field \(bleu needs references\); it has 'refs': "
                                         r"map it with --references-field refs$"):
        RecordColumns(_policy(references="required", name="bleu"))([{"caption": "a", "refs": ["b"], "index": 7}])
    with pytest.raises(InputError, match=r"^record 1: no 'image' field \(m needs image\); it has 'img': map it with "
                                         r"image_column= img$"):
        RecordColumns(_policy(images="required", name="m"), options={"image": "image_column="})(
            [{"caption": "a", "image": "x.png"}, {"caption": "a", "img": "y.png"}])


def test_an_unmapped_look_alike_references_field_is_warned_about_once_per_run():
    from capeval.core.record_columns import RecordColumns, UnmappedFieldWarning

    columns = RecordColumns(_policy(name="clip_s"))
    with pytest.warns(UnmappedFieldWarning) as caught:
        for chunk in ([{"caption": "a", "index": 0}, {"caption": "b", "refs": ["c"], "index": 1}],
                      [{"caption": "d", "reference": "e", "index": 2}]):
            assert columns(chunk)[2] is None
    assert [str(w.message) for w in caught] == [
        "record 1 has field 'refs' but references are read from 'references' (--references-field): clip_s scores "
        "without references"]


def test_optional_references_are_given_in_every_chunk_of_a_run_or_in_none():
    from capeval.core.record_columns import RecordColumns

    columns = RecordColumns(_policy())
    columns([{"caption": "a", "references": ["b"], "index": 0}])
    with pytest.raises(InputError, match=r"record 1: no 'references' field \(give references in every record or in "
                                         r"none\)"):
        columns([{"caption": "c", "index": 1}])
    columns = RecordColumns(_policy())
    columns([{"caption": "a", "index": 0}])
    with pytest.raises(InputError, match=r"record 2: has 'references', but the records before it have none"):
        columns([{"caption": "c", "references": None, "index": 1}, {"caption": "c", "references": "d", "index": 2}])
