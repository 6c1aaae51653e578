"""The METEOR paraphrase index is keyed by the content of its table (issue #40 item 5): installs whose tables are
equal share one copy whatever their files' times; another table builds another copy and removes the old one, unless
a process is reading it."""

import gzip
import json
import os
import subprocess
import sys
import time

import numpy as np

from capeval.core.hashing import file_sha256
from capeval.text import meteor_data

TABLE = [("0.5", "a dog", "a puppy"), ("0.25", "a dog", "a small dog"), ("0.5", "a puppy", "a dog"),
         ("0.1", "runs", "is running")]


def write_table(path, rows=TABLE, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(path, "wb", mtime=0) as handle:  # the same bytes however often written
        handle.write("".join(f"{p}\n{a}\n{b}\n" for p, a, b in rows).encode("utf-8"))
    if mtime is not None:
        os.utime(path, ns=(mtime, mtime))
    return path


def paraphrases_of(index, phrase):
    words = {i: w for w, i in index.vocabulary.items()}
    (found,) = index.find(np.array([[index.vocabulary[w] for w in phrase.split()]]), len(phrase.split()))
    return [" ".join(words[w] for w in p) for p in index.paraphrases([found])[int(found)]]


def index_folders(cache):
    return sorted(p.name for p in (cache / "meteor").iterdir() if p.is_dir())


def counting_builds(monkeypatch):
    built = []
    build = meteor_data._build_index

    def counted(table, out):
        built.append(table)
        build(table, out)

    monkeypatch.setattr(meteor_data, "_build_index", counted)
    return built


def test_two_installs_with_equal_tables_share_one_index_keyed_by_content(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = write_table(tmp_path / "venv-a" / "paraphrase-en.gz", mtime=1_600_000_000_000_000_000)
    second = write_table(tmp_path / "venv-b" / "paraphrase-en.gz", mtime=1_700_000_000_123_456_789)
    assert first.stat().st_mtime_ns != second.stat().st_mtime_ns and first.read_bytes() == second.read_bytes()
    built = counting_builds(monkeypatch)

    a = meteor_data.paraphrase_index(first, cache)
    b = meteor_data.paraphrase_index(second, cache)
    assert built == [first]  # the second install reads the first one's index
    assert index_folders(cache) == [f"paraphrase-en-v{meteor_data.INDEX_FORMAT}-{file_sha256(first)}"]
    assert paraphrases_of(a, "a dog") == paraphrases_of(b, "a dog") == ["a puppy", "a small dog"]
    manifest = json.loads((cache / "meteor" / index_folders(cache)[0] / "manifest.json").read_text())
    assert manifest["sha256"] == file_sha256(first)

    os.utime(second, ns=(1_800_000_000_000_000_000,) * 2)  # touched, same bytes: still the same index
    meteor_data.paraphrase_index(second, cache)
    assert built == [first]


def test_a_changed_table_builds_a_new_index_and_removes_the_old_ones(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    table = write_table(tmp_path / "venv" / "paraphrase-en.gz")
    meteor_data.paraphrase_index(table, cache)
    old_key = index_folders(cache)[0]
    legacy = cache / "meteor" / "paraphrase-en-v1-61813011-1796647217128740378"  # capeval's earlier mtime key
    legacy.mkdir()
    (legacy / "manifest.json").write_text("{}")
    (cache / "meteor" / f"{legacy.name}.lock").touch()
    dead_build = cache / "meteor" / f".building-{old_key}-k2j4h5g6"  # a build that was killed
    dead_build.mkdir()
    built = counting_builds(monkeypatch)

    write_table(table, [*TABLE, ("0.2", "a cat", "a kitten")])
    index = meteor_data.paraphrase_index(table, cache)
    assert built == [table]
    assert paraphrases_of(index, "a cat") == ["a kitten"]
    assert index_folders(cache) == [f"paraphrase-en-v{meteor_data.INDEX_FORMAT}-{file_sha256(table)}"]
    left = sorted(p.name for p in (cache / "meteor").iterdir())
    assert not [name for name in left if old_key in name or legacy.name in name or name.startswith(".")], left


HOLD = """
import sys, time
from pathlib import Path
import capeval.text.meteor_data as meteor_data
index = meteor_data.paraphrase_index(Path(sys.argv[1]), Path(sys.argv[2]))
print(sorted(index.vocabulary), flush=True)
sys.stdin.read()  # reads on until told to stop
print(len(index.keys), int(index.keys[0]))
"""


def test_an_index_that_another_process_reads_is_not_removed_until_it_is_closed(tmp_path):
    cache = tmp_path / "cache"
    table = write_table(tmp_path / "venv-a" / "paraphrase-en.gz")
    reader = subprocess.Popen([sys.executable, "-c", HOLD, str(table), str(cache)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip()  # it holds the index open
        read_key = index_folders(cache)[0]

        other = write_table(tmp_path / "venv-b" / "paraphrase-en.gz", [("0.3", "a cat", "a kitten")])
        meteor_data.paraphrase_index(other, cache)
        assert read_key in index_folders(cache) and len(index_folders(cache)) == 2  # being read: kept
        out, err = reader.communicate("", timeout=120)
        assert reader.returncode == 0, err[-2000:]
        assert len(out.split()) == 2  # it read its arrays to the end
    finally:
        if reader.poll() is None:
            reader.kill()

    third = write_table(tmp_path / "venv-c" / "paraphrase-en.gz", [("0.4", "a car", "an automobile")])
    meteor_data.paraphrase_index(third, cache)
    assert read_key not in index_folders(cache)  # no reader now: removed by the next build
    assert f"paraphrase-en-v{meteor_data.INDEX_FORMAT}-{file_sha256(third)}" in index_folders(cache)


def test_the_table_is_hashed_once_per_install(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    table = write_table(tmp_path / "venv" / "paraphrase-en.gz")
    meteor_data.paraphrase_index(table, cache)
    hashed = []
    monkeypatch.setattr(meteor_data, "file_sha256", lambda path: hashed.append(path) or file_sha256(path))
    meteor_data.paraphrase_index(table, cache)
    assert hashed == []  # remembered under the file's path, size, time and inode
    time.sleep(0.01)
    write_table(table, [*TABLE, ("0.2", "a cat", "a kitten")])
    meteor_data.paraphrase_index(table, cache)
    assert hashed and set(hashed) == {table}  # a new file: hashed again (and by its build, for the manifest)
    assert index_folders(cache) == [f"paraphrase-en-v{meteor_data.INDEX_FORMAT}-{file_sha256(table)}"]
