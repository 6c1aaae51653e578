"""The METEOR paraphrase index is built once per cache, however many processes ask for it at once (two pytest-xdist
workers, two jobs sharing $CAPEVAL_CACHE): the others wait for that build and read its index."""

import gzip
import json
import subprocess
import sys

TABLE = [("0.5", "a dog", "a puppy"), ("0.25", "a dog", "a small dog"), ("0.5", "a puppy", "a dog"),
         ("0.1", "runs", "is running")]
ASK = """
import json, sys, time
from pathlib import Path
import numpy as np
import capeval.text.meteor_data as meteor_data

table, cache, log, ready = map(Path, sys.argv[1:5])
me = sys.argv[5]
build = meteor_data._build_index

def logged_build(table, out):  # the real build, logged and slowed so that the other process asks meanwhile
    with log.open("a") as handle:
        handle.write(me + "\\n")
    time.sleep(1)
    build(table, out)

meteor_data._build_index = logged_build
(ready / me).touch()
while len(list(ready.iterdir())) < 2:  # both processes ask at the same moment
    time.sleep(0.01)
index = meteor_data.paraphrase_index(table, cache)
words = {i: w for w, i in index.vocabulary.items()}
(phrase,) = index.find(np.array([[index.vocabulary["a"], index.vocabulary["dog"]]]), 2)
print(json.dumps([" ".join(words[w] for w in p) for p in index.paraphrases([phrase])[int(phrase)]]))
"""


def test_two_processes_asking_at_once_build_the_index_once_and_read_the_same(tmp_path):
    table = tmp_path / "paraphrase-en.gz"
    with gzip.open(table, "wt", encoding="utf-8") as handle:
        handle.write("".join(f"{p}\n{a}\n{b}\n" for p, a, b in TABLE))
    cache, log, ready = tmp_path / "cache", tmp_path / "builds.log", tmp_path / "ready"
    ready.mkdir()
    asks = [subprocess.Popen([sys.executable, "-c", ASK, str(table), str(cache), str(log), str(ready), name],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    outputs = [ask.communicate(timeout=300) for ask in asks]
    assert [ask.returncode for ask in asks] == [0, 0], [err[-2000:] for _, err in outputs]
    assert len(log.read_text().split()) == 1
    expected = [b for _, a, b in TABLE if a == "a dog"]
    assert [json.loads(out) for out, _ in outputs] == [expected, expected]
    (folder,) = [p.name for p in (cache / "meteor").iterdir() if p.is_dir()]  # no partial build left behind
    assert folder.startswith("paraphrase-en-")
