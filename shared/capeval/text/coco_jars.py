"""pycocoevalcap 1.2's jars, run as it runs them: the PTB tokenizer and METEOR 1.5 (``coco_backend="java"``;
METEOR's ``-stdio`` process kept between calls, a thread writing while the replies are read) and SPICE (always on
Java and the Stanford CoreNLP jars). :mod:`capeval.text.coco` drives them; the default backend needs none of this."""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import shutil
import subprocess
import tempfile
import threading
from typing import List, Sequence

import numpy as np

from capeval.core.corpus_statistics import CorpusStatistics, KeyScores, mean_statistics
from capeval.core.errors import ModelNotAvailableError
from capeval.text.meteor_score import CHUNKS, matched_whole_in_one_chunk
from capeval.text.ptb import PTB_PUNCTUATION


def require_java(what: str) -> None:
    """A one-line error when ``java`` is not on PATH (the Python backend needs none)."""
    if shutil.which("java") is None:
        raise ModelNotAvailableError(f"{what} runs on Java, and `java` (Java 17) is not on PATH; the default "
                                     "coco_backend='python' computes BLEU, METEOR, ROUGE-L and CIDEr-D without it")


# --- SPICE -------------------------------------------------------------------------------------------------------

# the Stanford CoreNLP jars that pycocoevalcap's spice-1.0.jar names in its class path (lib/...)
SPICE_CORENLP_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
# spice-1.0.jar is built for Java 8: on Java 17 the serializer of its cache (FST; pycocoevalcap always passes
# `-cache`) stops it at start-up (InaccessibleObjectException: java.base does not open java.lang to it)
SPICE_SETUP = ("SPICE runs pycocoevalcap's spice-1.0.jar on Java 8 (on Java 17 it stops at start-up) with the Stanford "
               "CoreNLP 3.6.0 jars " + " and ".join(SPICE_CORENLP_JARS) + ", which capeval looks for in {lib}, where "
               "`python -m pycocoevalcap.spice.get_stanford_models` downloads them")


def _spice_lib_folder() -> str:
    """pycocoevalcap's ``spice/lib`` folder, found without importing pycocoevalcap."""
    import importlib.util

    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError("SPICE needs pycocoevalcap 1.2 (its spice-1.0.jar): pip install "
                                     "pycocoevalcap==1.2")
    return os.path.join(next(iter(spec.submodule_search_locations)), "spice", "lib")


def spice_setup() -> str:
    """What SPICE needs and where capeval looks for it (or how to install pycocoevalcap)."""
    try:
        return SPICE_SETUP.format(lib=_spice_lib_folder())
    except ModelNotAvailableError as exc:
        return str(exc)


def spice_missing() -> List[str]:
    """Why SPICE cannot run here (empty: it can): no pycocoevalcap, its CoreNLP jars missing, no ``java`` on PATH."""
    try:
        lib = _spice_lib_folder()
    except ModelNotAvailableError:
        return ["pycocoevalcap 1.2 is not installed"]
    jars = all(os.path.isfile(os.path.join(lib, jar)) for jar in SPICE_CORENLP_JARS)
    return ([] if jars else ["its Stanford CoreNLP jars are missing"]) + \
        (["`java` is not on PATH"] if shutil.which("java") is None else [])


def spice_available() -> bool:
    """Whether SPICE can run here: pycocoevalcap's CoreNLP jars are installed and ``java`` is on PATH."""
    return not spice_missing()


def load_spice():
    """pycocoevalcap's SPICE, or one line saying what it lacks here and what it needs."""
    missing = spice_missing()
    if missing:
        raise ModelNotAvailableError(f"SPICE cannot run here ({', '.join(missing)}). {spice_setup()}. capeval never "
                                     "reports SPICE as 0.")
    from pycocoevalcap.spice.spice import Spice

    return Spice()


def spice_value(spice, candidates: List[str], references: List[List[str]]) -> KeyScores:
    """One system's SPICE (its tokenized captions against the tokenized references)."""
    with contextlib.redirect_stdout(io.StringIO()):
        corpus, per_image = spice.compute_score({i: refs for i, refs in enumerate(references)},
                                                {i: [c] for i, c in enumerate(candidates)})
    scores = [s["All"]["f"] for s in per_image]
    return KeyScores(float(corpus), scores, mean_statistics(scores), details=list(per_image))


# --- the PTB tokenizer -------------------------------------------------------------------------------------------

def _tokenizer_jar() -> str:
    from pycocoevalcap.tokenizer import ptbtokenizer

    return os.path.join(os.path.dirname(os.path.abspath(ptbtokenizer.__file__)), ptbtokenizer.STANFORD_CORENLP_3_4_1_JAR)


def ptb_tokenize_blocks(blocks: Sequence[Sequence[str]]) -> List[List[str]]:
    """Each block of texts tokenized as one pycocoevalcap ``PTBTokenizer.tokenize`` call would (lines joined into
    one file, lower-cased, punctuation tokens dropped), all blocks in one JVM: ``-ioFileList`` gives every block its
    own file and lexer, so a line's tokens never depend on another block (the lexer looks across a line end)."""
    require_java("coco_backend='java' (pycocoevalcap's PTB tokenizer jar)")
    command = ["java", "-XX:+UseSerialGC", "-cp", _tokenizer_jar(), "edu.stanford.nlp.process.PTBTokenizer",
               "-preserveLines", "-lowerCase", "-ioFileList", "files.txt"]
    with tempfile.TemporaryDirectory(prefix="capeval-ptb-") as folder:
        for b, block in enumerate(blocks):
            with open(os.path.join(folder, f"{b}.txt"), "wb") as handle:
                handle.write("\n".join(text.replace("\n", " ") for text in block).encode())
        with open(os.path.join(folder, "files.txt"), "w") as handle:
            handle.write("".join(f"{b}.txt\t{b}.tok\n" for b in range(len(blocks))))
        run = subprocess.run(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if run.returncode:
            raise RuntimeError(f"the PTB tokenizer failed (exit {run.returncode}): "
                               f"{run.stderr.decode(errors='replace').strip()[-500:]}")
        return [_read_tokens(os.path.join(folder, f"{b}.tok"), len(block)) for b, block in enumerate(blocks)]


def _read_tokens(path: str, n: int) -> List[str]:
    with open(path, "rb") as handle:
        lines = handle.read().decode().split("\n")
    if len(lines) < n or any(line.strip() for line in lines[n:]):
        raise RuntimeError(f"the PTB tokenizer returned {len(lines)} lines for {n} texts")
    return [" ".join(w for w in line.rstrip().split(" ") if w not in PTB_PUNCTUATION) for line in lines[:n]]


# --- METEOR: pycocoevalcap's jar protocol, SCORE lines streamed, one EVAL line per system ------------------------

class MeteorJar:
    """pycocoevalcap's METEOR 1.5 jar in ``-stdio`` mode (its jar, heap and options; the serial garbage collector,
    which changes no computed value, saves CPU time on small machines); requests are written from a thread while
    the replies are read, so a whole batch is one round trip. Each request line is answered from that line alone."""

    def __init__(self):
        from pycocoevalcap.meteor import meteor as meteor_module

        require_java("coco_backend='java' (pycocoevalcap's METEOR jar)")
        folder = os.path.dirname(os.path.abspath(meteor_module.__file__))
        command = ["java", "-jar", "-Xmx2G", "-XX:+UseSerialGC", meteor_module.METEOR_JAR, "-", "-", "-stdio", "-l",
                   "en", "-norm"]
        self.process = subprocess.Popen(command, cwd=folder, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        self.lock = threading.Lock()

    def alive(self) -> bool:
        return self.process.poll() is None

    def exchange(self, lines: List[str], replies: int) -> List[str]:
        """Send ``lines``; return the next ``replies`` reply lines."""
        with self.lock:
            writer = threading.Thread(target=self._write, args=(lines,), daemon=True)
            writer.start()
            out = []
            for _ in range(replies):
                line = self.process.stdout.readline()
                if not line:
                    raise RuntimeError(f"the METEOR jar stopped (exit {self.process.poll()})")
                out.append(line.decode().strip())
            writer.join()
            return out

    def _write(self, lines: List[str]) -> None:
        try:
            self.process.stdin.write("".join(f"{line}\n" for line in lines).encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the reader reports the stopped jar

    def close(self) -> None:
        if self.alive():
            self.process.stdin.close()
            self.process.kill()
        self.process.wait()


def meteor_score_line(candidate: str, references: List[str]) -> str:
    """pycocoevalcap's SCORE request (``|||`` removed from the candidate, double spaces collapsed once)."""
    candidate = candidate.replace("|||", "").replace("  ", " ")
    return " ||| ".join(("SCORE", " ||| ".join(references), candidate))


def meteor_unit_statistics(segments: np.ndarray) -> np.ndarray:
    """Per-image statistics whose sums the jar scores as it scores a corpus (``EVAL`` over the segments): a segment
    matched whole in one chunk adds 0 chunks to the jar's aggregate, not 1 (its fragmentation is 0), so its chunk
    count is 0 here. Summing the printed lines unchanged gives another METEOR whenever a caption equals a
    reference's word order in full."""
    segments = np.array(segments, dtype=np.float64)
    segments[matched_whole_in_one_chunk(segments.T, segments[:, CHUNKS]), CHUNKS] = 0
    return segments


class JarMeteorRun:
    """One group call's METEOR work on the jar, started in a thread: every system's SCORE lines, then one EVAL per
    system. :meth:`values` waits for it."""

    def __init__(self, jar: MeteorJar, systems: List[List[str]], references: List[List[str]]):
        self.jar, self.result, self.error = jar, None, None
        self.thread = threading.Thread(target=self._run, args=(systems, references), daemon=True)
        self.thread.start()

    def _run(self, systems, references) -> None:
        try:
            images = len(references)
            lines = [meteor_score_line(c, refs) for cands in systems for c, refs in zip(cands, references)]
            printed = self.jar.exchange(lines, len(lines))
            stats = [printed[start:start + images] for start in range(0, len(printed), images)]
            evals = ["EVAL ||| " + " ||| ".join(s) for s in stats]
            replies = self.jar.exchange(evals, len(evals) * (images + 1))
            self.result = list(zip(stats, (replies[start:start + images + 1]
                                           for start in range(0, len(replies), images + 1))))
        except BaseException as exc:  # re-raised in the caller's thread
            self.error = exc

    def values(self) -> List[KeyScores]:
        self.thread.join()
        if self.error is not None:
            raise self.error
        values = []
        for stats, replies in self.result:
            per_unit = meteor_unit_statistics(
                np.array([[float(v) for v in line.split()] for line in stats], dtype=np.float64))
            values.append(KeyScores(float(replies[-1]), [float(r) for r in replies[:-1]],
                                    CorpusStatistics(per_unit, combine_meteor)))
        return values


_KEPT_METEOR: List[MeteorJar] = []
_KEPT_LOCK = threading.Lock()


def take_meteor_jar() -> MeteorJar:
    """The kept jar for a group call's exclusive use, else a new one."""
    with _KEPT_LOCK:
        while _KEPT_METEOR:
            jar = _KEPT_METEOR.pop()
            if jar.alive():
                return jar
            jar.close()
    return MeteorJar()


def close_meteor_jar() -> None:
    """Stop the kept jar (a later call starts a new one)."""
    with _KEPT_LOCK:
        for jar in _KEPT_METEOR:
            jar.close()
        _KEPT_METEOR.clear()


def keep_meteor_jar(jar: MeteorJar) -> None:
    """Keep the last group call's jar (at most one process, closed at exit) for the next call and for
    :func:`combine_meteor`."""
    with _KEPT_LOCK:
        if not jar.alive():
            jar.close()
            return
        for old in _KEPT_METEOR:
            old.close()
        _KEPT_METEOR[:] = [jar]


def _kept_meteor_jar() -> MeteorJar:
    with _KEPT_LOCK:
        if not _KEPT_METEOR or not _KEPT_METEOR[0].alive():
            _KEPT_METEOR[:] = [MeteorJar()]
        return _KEPT_METEOR[0]


atexit.register(close_meteor_jar)


def combine_meteor(sums: np.ndarray) -> np.ndarray:
    """Corpus METEOR of each row of summed segment statistics: the jar's own score of those statistics (one
    ``EVAL`` line whose segments are the rows; the jar's aggregate of a corpus is its score of the summed stats)."""
    sums = np.atleast_2d(np.asarray(sums, dtype=np.float64))
    if not len(sums):
        return np.zeros(0)
    segments = " ||| ".join(" ".join(repr(float(v)) for v in row) for row in sums)
    replies = _kept_meteor_jar().exchange([f"EVAL ||| {segments}"], len(sums) + 1)
    return np.array([float(r) for r in replies[:-1]], dtype=np.float64)
