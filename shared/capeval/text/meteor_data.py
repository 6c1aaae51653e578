"""METEOR 1.5's English data, read from the installed pycocoevalcap (no JVM, nothing copied into capeval):

- from ``meteor/meteor-1.5.jar`` (a zip): ``function/english.words`` (function words), ``nonbreaking/english.prefixes``
  (the normaliser's nonbreaking prefixes, from the Moses tokenizer), ``synonym/english.synsets`` and
  ``synonym/english.exceptions`` (WordNet 3.0 synsets and irregular forms);
- ``meteor/data/paraphrase-en.gz``: the English paraphrase table (5.27 M phrase pairs), indexed once per machine
  into ``<capeval cache>/meteor/paraphrase-en-v<format>-<sha256 of the table>/`` (plain ``.npy`` arrays and a JSON
  manifest; about 20 s the first time), then memory-mapped. The key is the table's content, so every install of
  pycocoevalcap 1.2 (every virtual environment of the user, with ``$CAPEVAL_CACHE`` or ``~/.cache/capeval``) shares
  one copy, and building one removes the copies of other keys that no process is reading
  (:func:`paraphrase_index`).

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
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Dict, FrozenSet, List, Optional, Sequence, Tuple

import numpy as np

try:
    import fcntl
except ImportError:  # Windows: no shared locks, so no copy is ever removed
    fcntl = None

from capeval.core.disk_cache import write_atomically
from capeval.core.errors import ModelNotAvailableError
from capeval.core.hashing import file_sha256
from capeval.core.hub import default_cache_dir
from capeval.text.java_runtime import java_lines
from capeval.text.meteor_text import parse_nonbreaking_prefixes

JAR_NAME = "meteor-1.5.jar"
PARAPHRASE_NAME = os.path.join("data", "paraphrase-en.gz")
INDEX_FORMAT = 1
INDEX_PREFIX = "paraphrase-en-v"  # + format + "-" + the table's sha256: an index folder's name (its key)
SOURCE_HASHES_FILE = "paraphrase-sources.json"
MAX_SOURCE_HASHES = 64
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
            return java_lines(jar.read(name).decode("utf-8"))

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

    def __init__(self, folder: Path, reading: Optional[IO] = None):
        self.reading = reading  # the shared lock that keeps this copy from being removed while it is read
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
    """The index of ``table`` in ``<cache>/meteor/paraphrase-en-v<format>-<sha256 of table>/`` (``<cache>``:
    ``cache_dir``, else ``$CAPEVAL_CACHE``, else ``~/.cache/capeval``), built on first use: by one process at a time
    (the others wait for it, then read its index), atomically (a build that dies leaves no index). The returned
    index holds a shared lock on ``<key>.readers`` for as long as it lives (forked workers share it).

    A build then removes every other key's copy that no process holds that lock on (:func:`remove_other_copies`):
    an older format, another table, the mtime-keyed copies of earlier capeval versions, and the leftovers of builds
    or removals that died. A copy being read is never removed, and a process that finds its copy gone (removed between
    its hash and its lock) builds it again."""
    root = default_cache_dir(cache_dir) / "meteor"
    root.mkdir(parents=True, exist_ok=True)
    key = f"{INDEX_PREFIX}{INDEX_FORMAT}-{table_sha256(table, root)}"
    folder = root / key
    reading = _lock_shared(root / f"{key}.readers")  # before the index exists: no removal can take a new copy
    try:
        if not (folder / "manifest.json").is_file():
            from capeval.core.download import file_lock  # (urllib: imported only when an index is built)

            with file_lock(root / f"{key}.lock"):
                if not (folder / "manifest.json").is_file():
                    _build_into(table, folder)
            remove_other_copies(root, keep=key)
        return ParaphraseIndex(folder, reading)
    except BaseException:
        if reading is not None:
            reading.close()
        raise


def _build_into(table: Path, folder: Path) -> None:
    building = Path(tempfile.mkdtemp(prefix=f".building-{folder.name}-", dir=folder.parent))
    try:
        _build_index(table, building)
        try:
            os.replace(building, folder)
        except OSError:  # built meanwhile by a process that took no lock
            if not (folder / "manifest.json").is_file():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)


def table_sha256(table: Path, root: Path) -> str:
    """The sha256 of ``table``'s bytes, hashed once per install: remembered in ``root/paraphrase-sources.json`` under
    the file's path, size, modification time and inode (at most :data:`MAX_SOURCE_HASHES` files, the latest kept),
    so a file rewritten in place with its size, time and inode unchanged keeps its old hash."""
    stat = table.stat()
    signature = json.dumps([str(table.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev])
    memo_file = root / SOURCE_HASHES_FILE
    try:
        memo = json.loads(memo_file.read_text())
        if not isinstance(memo, dict):
            memo = {}
    except (OSError, ValueError):
        memo = {}
    digest = memo.get(signature)
    if isinstance(digest, str) and len(digest) == 64:
        return digest
    digest = file_sha256(table)
    memo.pop(signature, None)
    memo[signature] = digest
    kept = json.dumps(dict(list(memo.items())[-MAX_SOURCE_HASHES:]))
    with suppress(OSError):  # a read-only cache only costs the hash next time
        write_atomically(memo_file, lambda path: path.write_text(kept))
    return digest


def remove_other_copies(root: Path, keep: str) -> List[str]:
    """Remove from ``root`` every paraphrase index but ``keep`` that no process is reading, and what builds or
    removals that died left; return the names removed.

    Why it is safe: every reader holds a shared ``flock`` on ``<key>.readers`` from before it looks for its copy
    until it closes it. A copy is removed only under that file's exclusive lock, taken without waiting (so a copy
    with a reader is skipped): it is renamed to ``.removing-…`` (atomic: a reader sees the whole copy or none), the
    lock file is unlinked, then the renamed folder is deleted. A reader that opened the lock file before it was
    unlinked finds, once it holds its lock, that the file at that path is another (or none), and locks again
    (:func:`_lock_shared`). A ``.building-<key>-…`` folder is removed only when ``<key>.lock`` is free (no build of
    that key runs). Without ``fcntl`` (Windows) nothing is removed. Earlier capeval versions (copies keyed by the
    table's size and mtime) take no reader lock: a process of such a version that is opening one of them at that
    moment (a few milliseconds) can fail; one that has opened it reads on (a removed file stays mapped)."""
    if fcntl is None:
        return []
    removed = []
    for entry in sorted(root.iterdir()):
        name = entry.name
        if name.startswith(".removing-"):
            shutil.rmtree(entry, ignore_errors=True)
        elif name.startswith(f".building-{INDEX_PREFIX}") and entry.is_dir():
            key = name[len(".building-"):].rsplit("-", 1)[0]  # mkdtemp's suffix has no "-"
            if _remove_if_free(root / f"{key}.lock", entry, unlink_lock=False):
                removed.append(name)
        elif name.startswith(INDEX_PREFIX) and entry.is_dir() and name != keep:
            if _remove_if_free(root / f"{name}.readers", entry, unlink_lock=True):
                removed.append(name)
                with suppress(OSError):
                    (root / f"{name}.lock").unlink()
    return removed


def _remove_if_free(lock_path: Path, folder: Path, *, unlink_lock: bool) -> bool:
    """Under ``lock_path``'s exclusive lock, taken without waiting: ``folder`` renamed away, then deleted."""
    try:
        handle = open(lock_path, "a+b")
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a process reads this copy (or builds it)
            return False
        if not _is_at(handle, lock_path):
            return False
        doomed = folder.parent / f".removing-{folder.name}-{os.getpid()}"
        try:
            os.replace(folder, doomed)
        except OSError:
            return False
        if unlink_lock:
            with suppress(OSError):
                lock_path.unlink()
    shutil.rmtree(doomed, ignore_errors=True)
    return True


def _lock_shared(path: Path) -> Optional[IO]:
    """``path`` opened and held under a shared ``flock`` (no lock without ``fcntl``): the file at ``path`` when the
    lock is granted, not one a removal unlinked meanwhile. ``None`` in a cache this process cannot write (it reads an
    index there but builds and removes none)."""
    while True:
        try:
            handle = open(path, "a+b")
        except OSError:
            return None
        if fcntl is None:
            return handle
        fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
        if _is_at(handle, path):
            return handle
        handle.close()


def _is_at(handle: IO, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except OSError:
        return False


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
