"""capeval's METEOR 1.5 (``capeval.text.meteor``) against pycocoevalcap's ``meteor-1.5.jar`` (``capeval.text.coco_jars.
MeteorJar``, one JVM for the file) on the same inputs, PTB-tokenized as production does: segment statistics (the 23
numbers of a ``SCORE`` line), segment scores and corpus scores equal (==) to what the jar prints, on adversarial
segments (repeated and function words, one-word captions, captions equal to a reference, stem-, synonym- and
paraphrase-only matches, Java hash collisions, long captions that fill the aligner's beam, text the normaliser
splits) and on a stratified sample of real segments of ``../shared``; the jar's corpus score of resampled multisets
from summed statistics; Java's Math.pow corrections; the jar's own stemmer and normaliser against capeval's."""

import subprocess
import zipfile
from fractions import Fraction

import numpy as np
import pytest

from capeval import InputError
from capeval.benchmarks import loaders
from capeval.benchmarks.pairwise import pascal50s
from capeval.text import meteor_score
from capeval.text.coco_jars import MeteorJar, meteor_score_line, ptb_tokenize_blocks, require_java
from capeval.text.java_runtime import correctly_rounded_pow, pow_corrections
from capeval.text.meteor import Meteor
from capeval.text.meteor_score import AGGREGATE_CHUNKS, BETA, CHUNKS, COLUMNS, combine, segment_score
from capeval.text.meteor_data import JAR_NAME, meteor_folder
from capeval.text.meteor_text import english_stem, normalize, parse_nonbreaking_prefixes

ADVERSARIAL = [
    # repeated words, function words, one word, empty
    ("a dog a dog a dog a dog", ["a dog runs after a dog", "the dog"]),
    ("the the the of of a an", ["the man of the hour"]),
    ("the of and a in", ["a dog in the park"]),
    ("the", ["the"]), ("of", ["a dog"]), ("dog", ["dog"]), ("dog", ["a man walks his dog"]), ("dogs", ["dog"]),
    ("", ["a dog"]), ("xyz", ["a b", "c d e"]), ("a", ["a a a a"]),
    # equal to a reference (one chunk, matched whole), reordered, ties between references
    ("a man riding a horse on the beach", ["a man riding a horse on the beach", "a horse"]),
    ("two dogs play", ["a cat sleeps", "two dogs play"]),
    ("on the beach a man rides a horse", ["a man rides a horse on the beach"]),
    ("a dog", ["a dog runs", "a dog runs"]), ("a dog", ["a cat", "a cow"]),
    ("a dog runs", ["a dog runs", "a dog runs fast", "a dog runs"]),
    # one module at a time: stem, synonym, paraphrase (one and several words)
    ("dogs running", ["dog runs"]), ("a big dogs runs", ["a big dog runs"]), ("a kid plays", ["a child plays"]),
    ("the runner jumped over a fence", ["the runners jumping over a fence"]),
    ("a car on the road", ["an automobile on the route"]), ("a big house", ["a large home"]),
    ("a photograph of kids in front of a building", ["a snapshot of children before a building"]),
    ("a group of men is sitting", ["one group of men sits"]), ("a lot of people", ["very people"]),
    # Java string hashes: "c0" and "an", "c4" and "ar" hash alike, so the jar matches them exactly
    ("c0 dog", ["an dog"]), ("ar big cat", ["c4 big cat"]),
    # text the normaliser splits or joins after the PTB tokenizer
    ("a black-and-white photo of u.s. soldiers at 3 o'clock", ["a black and white photo of us soldiers"]),
    ("mr. smith's dog costs $5.00 ... really", ["mr smith 's dog costs 5.00"]),
    ("2,000 people at 3.5 km , a.b.c. e.g. st. louis", ["2000 people , abc in st louis"]),
    ("a dog ||| runs", ["a dog ||| runs", "x"]), ("rock 'n' roll isn't it", ["rock n roll is not it"]),
    # non-ASCII
    ("a café with a naïve señor", ["the cafe with a senor"]), ("ΣΊΣΥΦΟΣ and a dog 🐶", ["a dog"]),
    ("一只狗 in the park", ["一只猫 in the park"]),
    # long captions: many ambiguous matches, the beam fills
    (" ".join(["a man in a red shirt and a woman in a blue dress and a child in a red hat"] * 4),
     [" ".join(["a woman in a red dress and a man in a blue shirt and a dog in a red coat"] * 3)]),
    (" ".join(f"the {w} and the {w}s" for w in ["dog", "cat", "car", "house", "tree", "bike", "boat"] * 3),
     [" ".join(f"a {w}s with the {w}" for w in ["car", "dog", "boat", "tree", "cat", "house", "bike"] * 3)]),
]

# sent to both without the PTB tokenizer: the request's own handling (spaces, case, "|||")
RAW_REQUESTS = [
    ("A  Dog   RUNS.", ["a dog runs", "A DOG"]), ("a dog\tin\x0bthe park", ["a dog in the park"]),
    ("a\u00a0dog\u2009runs", ["a dog runs"]), ("|||a dog|||", ["a dog"]), ("a dog", ["a dog |||", "||| a dog"]),
    ("U.S.A. vs. U.K. at 5 p.m.", ["usa vs uk at 5 pm"]), ("He said ''yes'' -- `no' ‘ok’ “fine”", ["he said yes"]),
    ("Mr. Smith. Dr. Who? No. 5 and no. 6", ["mr smith dr who no 5"]),
]


class _Jar:
    """The jar's process for the file; each distinct SCORE request is sent once (the jar answers it from itself
    alone), so tests that score the same segments compare with the same printed lines."""

    def __init__(self):
        self.process = MeteorJar()
        self.printed = {}

    def score_lines(self, segments):
        requests = [meteor_score_line(c, list(refs)) for c, refs in segments]
        new = [request for request in dict.fromkeys(requests) if request not in self.printed]
        self.printed.update(zip(new, self.process.exchange(new, len(new))))
        return [self.printed[request] for request in requests]


@pytest.fixture(scope="module")
def jar():
    require_java("the METEOR differential tests")  # the jar is the oracle: no Java fails, as the PTB tests do
    oracle = _Jar()
    yield oracle
    oracle.process.close()


@pytest.fixture(scope="module")
def meteor():
    return Meteor().load()


def _tokenized_sets(sets):
    """Each set of segments with its candidates in one PTB tokenizer block, its references in another (as
    ``score_coco_group`` tokenizes; every block its own file and lexer), all in one JVM."""
    blocks = ptb_tokenize_blocks([block for segments in sets for block in (
        [c for c, _ in segments], [r for _, refs in segments for r in refs])])
    tokenized = []
    for k, segments in enumerate(sets):
        candidates, flat = blocks[2 * k], blocks[2 * k + 1]
        out, start = [], 0
        for candidate, (_, refs) in zip(candidates, segments):
            out.append((candidate, flat[start:start + len(refs)]))
            start += len(refs)
        tokenized.append(out)
    return tokenized


def _tokenized(segments):
    return _tokenized_sets([segments])[0]


@pytest.fixture(scope="module")
def adversarial():
    return _tokenized(ADVERSARIAL)


def _jar_eval(jar, lines):
    replies = jar.process.exchange(["EVAL ||| " + " ||| ".join(lines)], len(lines) + 1)
    return np.array([float(r) for r in replies[:-1]]), float(replies[-1])


def _jar_segments(jar, segments):
    """The jar's SCORE lines, their parsed statistics, segment scores and corpus score."""
    lines = jar.score_lines(segments)
    scores, corpus = _jar_eval(jar, lines)
    return lines, np.array([[float(v) for v in line.split()] for line in lines]), scores, corpus


def _assert_equal_to_jar(jar, meteor, segments):
    lines, jar_stats, jar_scores, jar_corpus = _jar_segments(jar, segments)
    stats = meteor.statistics_batch([c for c, _ in segments], [list(r) for _, r in segments])
    differ = [k for k in range(len(segments)) if not np.array_equal(stats[k, :AGGREGATE_CHUNKS], jar_stats[k])]
    assert not differ, "\n".join(f"{segments[k]}\n jar     {lines[k]}\n capeval {stats[k, :23].tolist()}"
                                 for k in differ[:5])
    scores = segment_score(stats)
    differ = np.nonzero(scores != jar_scores)[0]
    assert not len(differ), [(segments[k], jar_scores[k], scores[k]) for k in differ[:5]]
    assert combine(stats.sum(0))[0] == jar_corpus
    return lines, stats


def test_adversarial_segments_equal_the_jar(jar, meteor, adversarial):
    _, stats = _assert_equal_to_jar(jar, meteor, adversarial)
    by_case = dict(zip([c for c, _ in ADVERSARIAL], stats))
    # columns 4 + 4 * module: test content matches of the exact, stem, synonym, paraphrase modules
    assert by_case["a big dogs runs"][8] == 1 and by_case["the runner jumped over a fence"][8] == 2
    assert by_case["a kid plays"][12] == 1 and by_case["a car on the road"][12] == 2
    assert by_case["a photograph of kids in front of a building"][16] == 2
    # both words have stem, synonym and paraphrase candidates, but the jar's search weighs a one-word non-exact
    # match 0 (0.5 truncated to an integer), so it prefers no match (fewer chunks) unless a match joins chunks
    assert not by_case["dogs running"][4:20].any()
    assert by_case["c0 dog"][4] == 2 and by_case["c0 dog"][7] == 1  # "c0" matched the function word "an" exactly
    assert by_case["a man riding a horse on the beach"][CHUNKS] == 1
    assert by_case["a man riding a horse on the beach"][AGGREGATE_CHUNKS] == 0


def test_raw_requests_equal_the_jar(jar, meteor):
    _assert_equal_to_jar(jar, meteor, RAW_REQUESTS)


def _real_sample(shared_data, per_set=450):
    """A seeded sample of rows of every candidate/reference set of ../shared (Polaris has no references)."""
    bench = shared_data / "benchmarks"
    sets = {name: loaders.CORRELATION_LOADERS[name](bench) for name in ("flickr8k_expert", "flickr8k_cf",
                                                                          "composite", "thumb")}
    rows = {name: list(zip(b.candidates, b.references)) for name, b in sets.items()}
    pairs = pascal50s(bench)
    rows["pascal50s"] = list(zip([*pairs.candidates_a, *pairs.candidates_b], [*pairs.references] * 2))
    rng = np.random.default_rng(35)
    chosen_sets = []
    for set_rows in rows.values():
        chosen = rng.choice(len(set_rows), size=per_set, replace=False)
        chosen_sets.append([(set_rows[k][0], list(set_rows[k][1])) for k in sorted(chosen)])
    return [segment for segments in _tokenized_sets(chosen_sets) for segment in segments]


@pytest.fixture(scope="module")
def real_segments(shared_data):
    return _real_sample(shared_data)


def test_real_segments_equal_the_jar(jar, meteor, real_segments):
    assert len(real_segments) >= 2000
    _assert_equal_to_jar(jar, meteor, real_segments)


def test_resampled_multisets_score_as_the_jar_evaluates_them(jar, meteor, adversarial, real_segments):
    """``combine(counts @ statistics)`` is the jar's EVAL of the multiset's segments. Where a corpus's fragmentation
    falls on a value where Java's Math.pow is not correctly rounded (about 1 in 1000), capeval's correctly rounded
    power makes the score one ulp off: the test allows that on at most 2 of its 60 multisets."""
    segments = adversarial + real_segments[::4]
    lines = jar.score_lines(segments)
    stats = meteor.statistics_batch([c for c, _ in segments], [list(r) for _, r in segments])
    rng = np.random.default_rng(7)
    off = []
    for _ in range(60):
        draw = rng.integers(0, len(segments), size=len(segments))
        _, jar_corpus = _jar_eval(jar, [lines[k] for k in draw])
        mine = combine(np.bincount(draw, minlength=len(segments)) @ stats)[0]
        if mine != jar_corpus:
            off.append(abs(mine - jar_corpus) / np.spacing(jar_corpus))
    assert len(off) <= 2 and all(ulps <= 1 for ulps in off), off


def test_single_chunk_segments_add_no_chunk_to_the_corpus(jar, meteor):
    """Two captions equal to their reference and one that is not: the jar's corpus score is not its score of the
    summed printed statistics (each whole match would add a chunk), but it is ``combine`` of the summed rows."""
    segments = _tokenized([("a dog runs on the grass", ["a dog runs on the grass"]),
                           ("two men sit", ["two men sit"]), ("a dog runs", ["a cat runs on grass"])])
    lines, jar_stats, _, jar_corpus = _jar_segments(jar, segments)
    summed_printed = " ".join(repr(float(v)) for v in jar_stats.sum(0))
    _, jar_of_sum = _jar_eval(jar, [summed_printed])
    assert jar_of_sum != jar_corpus
    stats = meteor.statistics_batch([c for c, _ in segments], [r for _, r in segments])
    assert combine(stats.sum(0))[0] == jar_corpus
    assert list(stats[:, AGGREGATE_CHUNKS]) == [0, 0, stats[2, CHUNKS]]


def test_java_pow_corrections_give_the_jars_scores(jar, monkeypatch):
    """Statistics whose fragmentation is each corrected value p/q (q + 1 words a side, q matched, p chunks): the jar's
    scores equal ``segment_score``'s, and the correctly rounded power alone would miss some of them."""
    fractions = [Fraction(v).limit_denominator(1000) for table in pow_corrections(BETA) for v in table]
    rows = []
    for p, q in ((f.numerator, f.denominator) for f in fractions):
        row = np.zeros(COLUMNS)
        row[[0, 1]], row[[4, 5]], row[[21, 22]] = q + 1, q, q
        row[CHUNKS] = row[AGGREGATE_CHUNKS] = p
        rows.append(row)
    rows = np.array(rows)
    jar_scores, _ = _jar_eval(jar, [" ".join(repr(float(v)) for v in row[:23]) for row in rows])
    assert np.array_equal(segment_score(rows), jar_scores)
    monkeypatch.setattr(meteor_score, "java_pow", correctly_rounded_pow)
    assert not np.array_equal(segment_score(rows), jar_scores)


def _jar_main(main_class, args, lines):
    """Run a main class of the METEOR jar on ``lines`` (UTF-8 in and out)."""
    require_java("the METEOR differential tests")
    run = subprocess.run(["java", "-Dfile.encoding=UTF-8", "-cp", str(meteor_folder() / JAR_NAME), main_class,
                          *args], input="".join(f"{line}\n" for line in lines).encode(), capture_output=True,
                         check=True)
    return run.stdout.decode().split("\n")[:len(lines)]


def test_stemmer_equals_the_jars(real_segments):
    words = sorted({w for c, refs in real_segments for text in (c, *refs) for w in text.split()})
    stems = ("ing", "ed", "eed", "ies", "ied", "s", "sses", "ly", "ogi", "ational", "iveness", "ness", "ful", "ative",
             "ement", "ion", "e", "ll", "at", "bl", "iz", "y", "'s", "'s'", "ousli", "entli", "fulli", "lessli")
    words += [f"{head}{tail}" for head in ("gener", "commun", "arsen", "'y", "hop", "tap", "fizz", "ab", "sky")
              for tail in stems] + ["skies", "dying", "news", "inning", "proceed", "y", "ya", "😀s", "😀ing"]
    jar_stems = [line.strip() for line in _jar_main("Stemmer", ["en"], words)]
    assert [english_stem(w) for w in words] == jar_stems


def test_normaliser_equals_the_jars():
    with zipfile.ZipFile(meteor_folder() / JAR_NAME) as archive:
        prefixes = parse_nonbreaking_prefixes(archive.read("nonbreaking/english.prefixes").decode())
    texts = [c for c, _ in ADVERSARIAL + RAW_REQUESTS] + [r for _, refs in ADVERSARIAL + RAW_REQUESTS for r in refs]
    texts += ["....", "a..b...c", "DOTMULTI. x", "1,2,3 a,b", "'90s 1990's x'y 'quoted'", "e.g. i.e. Art. 5",
              "A. B. c. D.", "U.S.-based", "x--y", "a–b", "end."]
    assert [normalize(t, prefixes) for t in texts] == _jar_main("edu.cmu.meteor.util.Normalizer", ["en", "true"],
                                                                 texts)


def test_two_processes_give_the_same_statistics(meteor, real_segments):
    segments = real_segments[:300]
    candidates, references = [c for c, _ in segments], [list(r) for _, r in segments]
    one = meteor.statistics_batch(candidates, references)
    assert np.array_equal(Meteor().statistics_batch(candidates, references, processes=2), one)


def test_bad_requests_are_refused(meteor):
    with pytest.raises(InputError, match=r"candidates\[1\] holds a line break"):
        meteor.statistics_batch(["a dog", "a\ndog"], [["a dog"], ["a dog"]])
    with pytest.raises(InputError, match=r"references\[0\]\[1\] holds a line break"):
        meteor.statistics_batch(["a dog"], [["a dog", "a\rdog"]])
    with pytest.raises(InputError, match=r"references\[0\] must be a non-empty list"):
        meteor.statistics_batch(["a dog"], [[]])
    with pytest.raises(InputError, match=r"candidates\[0\] is int"):
        meteor.statistics_batch([3], [["a dog"]])
    with pytest.raises(InputError, match="2 reference lists for 1 candidates"):
        meteor.statistics_batch(["a dog"], [["a"], ["b"]])
    with pytest.raises(InputError, match="rows of 23 statistics"):
        combine(np.zeros(23))
