"""The fixed-IDF CIDEr-D's hashcode names its document-frequency table by content: the same table gives the same
hashcode in every process (the table's n-grams were once counted through a set, in hash-seed order), and a table
built in memory reads as the same table saved and loaded."""

import json
import os
import subprocess
import sys

from capeval.functional.fixed_idf_cider import DocumentFrequencies

REFERENCE_SETS = [["a dog runs on the grass", "a brown dog plays"], ["two men ride bikes down a street"],
                  ["a woman holds an umbrella in the rain", "a person with an umbrella"]] * 3

HASHCODE = """
import json, sys
from capeval.core.scoring import load_scorer
from capeval.functional.fixed_idf_cider import DocumentFrequencies
sets = json.loads(sys.argv[1])
print(load_scorer("cider_fixed_idf", idf=DocumentFrequencies.from_reference_sets(sets)).hashcode)
"""


def test_the_same_table_has_the_same_hashcode_in_every_process():
    codes = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", HASHCODE, json.dumps(REFERENCE_SETS)], env=env, check=True,
                             capture_output=True, text=True)
        codes.add(out.stdout.strip().splitlines()[-1])
    assert len(codes) == 1, codes


def test_a_table_reads_the_same_built_or_loaded():
    built = DocumentFrequencies.from_reference_sets(REFERENCE_SETS)
    loaded = DocumentFrequencies.from_json(json.loads(json.dumps(built.to_json())))
    assert built == loaded and repr(built) == repr(loaded)
    other = DocumentFrequencies.from_reference_sets(REFERENCE_SETS[:2])
    assert repr(other) != repr(built)
