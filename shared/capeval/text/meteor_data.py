"""METEOR 1.5's English data, read from the installed pycocoevalcap (no JVM, nothing copied into capeval):

- from ``meteor/meteor-1.5.jar`` (a zip): ``function/english.words`` (function words), ``nonbreaking/english.prefixes``
  (the normaliser's nonbreaking prefixes, from the Moses tokenizer), ``synonym/english.synsets`` and
  ``synonym/english.exceptions`` (WordNet 3.0 synsets and irregular forms);
- ``meteor/data/paraphrase-en.gz``: the English paraphrase table (5.27 M phrase pairs), indexed once into
  ``<capeval cache>/meteor/paraphrase-en-v<format>-<size>-<mtime>/`` (plain ``.npy`` arrays and a JSON manifest; about 20 s
  the first time), then memory-mapped.

Licences: METEOR 1.5 and the data files it distributes are under the GNU LGPL (version 3 for the early-2015 jar
that pycocoevalcap bundles; the project moved to version 2.1 in July 2015). The nonbreaking-prefix lists come from
the Moses tokenizer (LGPL). The synonym files are derived from WordNet 3.0 (WordNet licence, (c) 2006 Princeton
University: use, copy, modify and distribute for any purpose, keeping its copyright notice; the jar ships it as
``synonym/COPYING.WORDNET``). The paraphrase table was extracted by METEOR's authors from parallel corpora by
pivoting through foreign phrases (Bannard & Callison-Burch 2005; Denkowski & Lavie 2010, 2011). capeval reads these
files where pycocoevalcap installed them and ships none of them.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

from capeval.core.download import file_lock
from capeval.core.errors import ModelNotAvailableError
from capeval.core.hashing import file_sha256
from capeval.core.hub import default_cache_dir
from capeval.text.meteor_text import parse_nonbreaking_prefixes

JAR_NAME = "meteor-1.5.jar"
PARAPHRASE_NAME = os.path.join("data", "paraphrase-en.gz")
INDEX_FORMAT = 1
MAX_PHRASE_WORDS = 7  # the longest phrase of paraphrase-en.gz (checked when the index is built)
_HASH_MULTIPLIER = np.uint64(0xBF58476D1CE4E5B9)
_LENGTH_SALT = 0x9E3779B97F4A7C15
_INDEX_ARRAYS = ("vocabulary", "phrase_keys", "phrase_words", "phrase_offsets", "par_offsets",
                 "par_targets")


def meteor_folder() -> Path:
    """pycocoevalcap's ``meteor`` folder (the jar and ``data/paraphrase-en.gz``), found without importing it."""
    spec = importlib.util.find_spec("pycocoevalcap")
    folder = Path(next(iter(spec.submodule_search_locations))) / "meteor" if spec and \
        spec.submodule_search_locations else None
    if folder is None or not (folder / JAR_NAME).is_file() or not (folder / PARAPHRASE_NAME).is_file():
        raise ModelNotAvailableError("METEOR needs pycocoevalcap 1.2's data files (meteor/meteor-1.5.jar and "
                                     "meteor/data/paraphrase-en.gz): pip install pycocoevalcap==1.2")
    return folder


@dataclass(frozen=True)
class JarData:
    """The jar's English word lists."""

    function_words: FrozenSet[str]
    nonbreaking_prefixes: Dict[str, int]
    synsets: Dict[str, str]  # word -> its synset numbers, as the file's line (parsed on use)
    irregular_bases: Dict[str, Tuple[str, ...]]  # inflected form -> base forms, in the file's order


def read_jar_data(jar_path: Path) -> JarData:
    with zipfile.ZipFile(jar_path) as jar:
        def text(name: str) -> List[str]:
            return jar.read(name).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n").split("\n")

        function_words = text("function/english.words")
        prefixes = parse_nonbreaking_prefixes(jar.read("nonbreaking/english.prefixes").decode("utf-8"))
        synset_lines = text("synonym/english.synsets")
        exception_lines = text("synonym/english.exceptions")
    if function_words and function_words[-1] == "":
        function_words.pop()
    synset_lines = _pairs(synset_lines)
    bases: Dict[str, List[str]] = {}
    for base, forms in zip(*_pairs(exception_lines)):
        for form in forms.split():
            bases.setdefault(form, []).append(base)
    return JarData(frozenset(function_words), prefixes, dict(zip(*synset_lines)),
                   {form: tuple(b) for form, b in bases.items()})


def _pairs(lines: List[str]) -> Tuple[List[str], List[str]]:
    """A file of alternating key and value lines (a last line without its value is dropped, as the jar reads it)."""
    if lines and lines[-1] == "":
        lines = lines[:-1]
    n = len(lines) // 2
    return lines[0:2 * n:2], lines[1:2 * n:2]


# --- the paraphrase table ------------------------------------------------------------------------------------

def phrase_keys(words: np.ndarray, length: int) -> np.ndarray:
    """The index key of phrases of ``length`` word ids (``words``: shape (n, length), int64): a 64-bit mix."""
    key = np.full(len(words), _LENGTH_SALT * length & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    for k in range(length):
        key = (key ^ words[:, k].astype(np.uint64)) * _HASH_MULTIPLIER
        key ^= key >> np.uint64(31)
    return key


class ParaphraseIndex:
    """paraphrase-en.gz as arrays: the table's vocabulary, its distinct phrases (as word ids, sorted by key) and,
    for each phrase, its paraphrases in the file's order."""

    def __init__(self, folder: Path):
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False) for name in _INDEX_ARRAYS}
        words = bytes(arrays["vocabulary"]).decode("utf-8").split("\n")
        self.vocabulary: Dict[str, int] = {w: i for i, w in enumerate(words)}
        self.keys = arrays["phrase_keys"]
        self.words = arrays["phrase_words"]
        self.offsets = arrays["phrase_offsets"]
        self.par_offsets = arrays["par_offsets"]
        self.par_targets = arrays["par_targets"]

    def find(self, windows: np.ndarray, length: int) -> np.ndarray:
        """For word-id windows of one length (shape (n, length)), the index of the equal phrase, or -1."""
        found = np.full(len(windows), -1, dtype=np.int64)
        if not len(windows) or not len(self.keys):
            return found
        keys = phrase_keys(windows, length)
        order = np.argsort(keys)  # sorted queries: searchsorted walks the keys in order
        at = np.empty(len(keys), dtype=np.int64)
        at[order] = np.searchsorted(self.keys, keys[order])
        at[at == len(self.keys)] = 0
        hit = np.asarray(self.keys[at]) == keys
        starts = np.asarray(self.offsets[at])
        hit &= (np.asarray(self.offsets[at + 1]) - starts) == length
        for k in range(length):
            hit &= np.asarray(self.words[np.where(hit, starts + k, 0)]) == windows[:, k]
        found[hit] = at[hit]
        return found

    def paraphrases(self, phrases: Sequence[int]) -> Dict[int, Tuple[Tuple[int, ...], ...]]:
        """The paraphrases (word-id tuples, in the file's order) of each phrase index."""
        phrases = np.unique(np.asarray(phrases, dtype=np.int64))
        first, stop = np.asarray(self.par_offsets[phrases]), np.asarray(self.par_offsets[phrases + 1])
        targets = np.asarray(self.par_targets[_ranges(first, stop)])
        distinct = np.unique(targets)
        starts, ends = np.asarray(self.offsets[distinct]), np.asarray(self.offsets[distinct + 1])
        flat = np.asarray(self.words[_ranges(starts, ends)]).tolist()
        bounds = np.concatenate(([0], np.cumsum(ends - starts))).tolist()
        words = {t: tuple(flat[a:b]) for t, a, b in zip(distinct.tolist(), bounds[:-1], bounds[1:])}
        split = np.concatenate(([0], np.cumsum(stop - first))).tolist()
        targets = targets.tolist()
        return {int(p): tuple(words[t] for t in targets[a:b]) for p, a, b in zip(phrases, split[:-1], split[1:])}


def _ranges(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """The concatenated index ranges [start, stop) (vectorised)."""
    lengths = stops - starts
    if not lengths.sum():
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return np.arange(lengths.sum()) + offsets


def paraphrase_index(table: Path, cache_dir: Optional[os.PathLike] = None) -> ParaphraseIndex:
    """The index of ``table``, built into capeval's cache on first use: by one process at a time (the others wait
    for it, then read its index), atomically (a build that dies leaves no index)."""
    stat = table.stat()
    root = default_cache_dir(cache_dir) / "meteor"
    folder = root / f"paraphrase-en-v{INDEX_FORMAT}-{stat.st_size}-{stat.st_mtime_ns}"
    if not (folder / "manifest.json").is_file():
        with file_lock(root / f"{folder.name}.lock"):
            if not (folder / "manifest.json").is_file():
                building = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
                try:
                    _build_index(table, building)
                    try:
                        os.replace(building, folder)
                    except OSError:  # built meanwhile by a process that took no lock
                        if not (folder / "manifest.json").is_file():
                            raise
                finally:
                    shutil.rmtree(building, ignore_errors=True)
    return ParaphraseIndex(folder)


def _build_index(table: Path, out: Path) -> None:
    with gzip.open(table, "rb") as handle:
        lines = handle.read().split(b"\n")  # the table has no "\r": checked below with the words
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) % 3:
        raise ValueError(f"{table}: {len(lines)} lines, not triples of (probability, phrase, paraphrase)")
    entries = len(lines) // 3
    ids: Dict[bytes, int] = {}
    codes = np.array([ids.setdefault(line, len(ids)) for line in lines[1::3] + lines[2::3]], dtype=np.int64)
    del lines
    refs, pars = codes[:entries], codes[entries:]
    tokens = b" \n ".join(ids).split(b" ")  # the distinct phrases' words, "\n" between phrases
    del ids
    vocabulary: Dict[bytes, int] = {}
    token_codes = np.array([vocabulary.setdefault(w, len(vocabulary)) for w in tokens], dtype=np.int64)
    del tokens
    words = [w.decode("utf-8") for w in vocabulary]
    if any(not w or (w != "\n" and any(c in w for c in "\t\n\x0b\f\r")) for w in words):
        raise ValueError(f"{table}: a phrase is not split by single spaces")
    separator = words.index("\n") if "\n" in words else -1
    words = ["" if w == "\n" else w for w in words]  # no sentence word is empty: the separator never matches
    ends = token_codes == separator
    flat_words = token_codes[~ends]
    lengths = np.diff(np.concatenate(([-1], np.nonzero(ends)[0], [len(token_codes)]))) - 1
    if lengths.max() > MAX_PHRASE_WORDS:
        raise ValueError(f"{table}: a phrase of {lengths.max()} words (capeval expects at most {MAX_PHRASE_WORDS})")
    starts = np.concatenate(([0], np.cumsum(lengths)))
    keys = np.empty(len(lengths), dtype=np.uint64)
    for length in range(1, MAX_PHRASE_WORDS + 1):
        rows = np.nonzero(lengths == length)[0]
        keys[rows] = phrase_keys(flat_words[starts[rows][:, None] + np.arange(length)], length)
    order = np.argsort(keys, kind="stable")
    if np.any(np.diff(keys[order]) == 0):
        raise ValueError(f"{table}: two phrases share an index key")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    sorted_lengths = lengths[order]
    phrase_offsets = np.concatenate(([0], np.cumsum(sorted_lengths)))
    within = np.arange(phrase_offsets[-1]) - np.repeat(phrase_offsets[:-1], sorted_lengths)
    phrase_words = flat_words[np.repeat(starts[order], sorted_lengths) + within].astype(np.int32)
    ref_rank, par_rank = rank[refs], rank[pars]
    by_ref = np.argsort(ref_rank, kind="stable")  # the file's order within each phrase
    arrays = {"vocabulary": np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8),
              "phrase_keys": keys[order], "phrase_words": phrase_words, "phrase_offsets": phrase_offsets,
              "par_offsets": np.concatenate(([0], np.cumsum(np.bincount(ref_rank, minlength=len(order))))),
              "par_targets": par_rank[by_ref].astype(np.int32)}
    for name, values in arrays.items():
        np.save(out / f"{name}.npy", values, allow_pickle=False)
    manifest = {"format": INDEX_FORMAT, "table": str(table), "sha256": file_sha256(table), "entries": entries,
                "phrases": int(len(order)), "words": len(words)}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
