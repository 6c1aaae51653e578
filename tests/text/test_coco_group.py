"""The COCO group (#28 item 2/3): several systems scored in one pass, each value equal (==) to pycocoevalcap 1.2 run
on that system alone, on real Flickr8k-Expert references and candidates; corpus statistics that reproduce the corpus
values and pycocoevalcap's BLEU / METEOR of explicitly resampled corpora; one tokenizer lexer per text block."""

import contextlib
import io
import json
import warnings

import numpy as np
import pytest

from capeval import InputError, ModelNotAvailableError
from capeval.text import coco, coco_jars

from memo import memoised

IMAGES = 150
SYSTEMS = 3


@pytest.fixture(scope="module")
def flickr(request):
    """References (5 per image) and three systems: each image's first three distinct Expert candidates."""
    shared_data = request.getfixturevalue("shared_data")
    data = json.loads((shared_data / "benchmarks/flickr8k/flickr8k_expert_clipscore_format.json").read_text())
    rows = []
    for entry in data.values():
        candidates = list(dict.fromkeys(j["caption"] for j in entry["human_judgement"]))
        if len(candidates) >= SYSTEMS:
            rows.append((entry["ground_truth"], candidates[:SYSTEMS]))
    rows = rows[:IMAGES]
    return [refs for refs, _ in rows], [[c[s] for _, c in rows] for s in range(SYSTEMS)]


@pytest.fixture(scope="module")
def tokenized(flickr):
    """pycocoevalcap's own tokenization of the references and of each system (one PTBTokenizer call each)."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    references, systems = flickr
    with contextlib.redirect_stdout(io.StringIO()):
        gts = PTBTokenizer().tokenize({i: [{"caption": r} for r in refs] for i, refs in enumerate(references)})
        res = [PTBTokenizer().tokenize({i: [{"caption": c}] for i, c in enumerate(caps)}) for caps in systems]
    return gts, res


@pytest.fixture(scope="module")
def alone(tokenized, pycocoevalcap_meteor):
    """pycocoevalcap's Bleu(4), Meteor, Rouge, Cider on each system alone: key -> (corpus, per-image)."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge

    gts, systems = tokenized
    out = []
    for res in systems:
        with contextlib.redirect_stdout(io.StringIO()):
            bleu, bleu_per = Bleu(4).compute_score(gts, res, verbose=0)
        values = {f"bleu_{n + 1}": (bleu[n], bleu_per[n]) for n in range(4)}
        values["meteor"] = pycocoevalcap_meteor.compute_score(gts, res)
        values["rouge_l"] = Rouge().compute_score(gts, res)
        values["cider"] = Cider().compute_score(gts, res)
        out.append(values)
    return out


@pytest.fixture(scope="module", params=["python", "java"])
def group(request, flickr):
    """The group on each backend: the Python tokenizer and METEOR (the default), and pycocoevalcap's jars."""
    references, systems = flickr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return coco.score_coco_group(systems, references, coco_backend=request.param)


def test_each_system_equals_pycocoevalcap_alone(group, alone):
    assert len(group) == SYSTEMS
    for values, expected in zip(group, alone):
        assert list(values) == ["bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor", "rouge_l", "cider"]
        for key, (corpus, per_image) in expected.items():
            assert values[key].corpus == corpus, key
            assert values[key].per_sample == list(per_image), key
    assert group[0]["cider"].corpus != group[1]["cider"].corpus  # three different systems


def test_a_system_alone_and_among_others_gets_the_same_values(flickr, group):
    """Alone, on the jar a java group call kept (its paraphrase table loaded once per process)."""
    references, systems = flickr
    coco.score_coco_group([systems[0][:2]], references[:2], metrics=["meteor"], coco_backend="java")
    kept = coco_jars._KEPT_METEOR[0]
    alone = coco.score_coco_group([systems[1]], references, metrics=["bleu", "meteor", "rouge_l", "cider"],
                                  coco_backend="java")[0]
    assert coco_jars._KEPT_METEOR == [kept] and kept.alive()
    assert list(alone) == ["bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor", "rouge_l", "cider"]
    for key, value in alone.items():
        assert value.corpus == group[1][key].corpus and value.per_sample == group[1][key].per_sample, key


def test_statistics_reproduce_the_corpus_values(group):
    for values in group:
        for key in ("bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor"):  # summed counts / the jar's EVAL: exact
            assert values[key].statistics.value() == values[key].corpus, key
        for key in ("rouge_l", "cider"):  # means: a sum in another order than np.mean's
            assert values[key].statistics.value() == pytest.approx(values[key].corpus, abs=1e-12), key
        assert values["meteor"].statistics.per_unit.shape[0] == IMAGES


@pytest.fixture(scope="module")
def resampled_pycocoevalcap(pycocoevalcap_meteor):
    """pycocoevalcap's Bleu(4) and Meteor corpus values of a (resampled) tokenized corpus, each distinct corpus
    computed once for the module: both backends' tests compare with the same values."""
    from pycocoevalcap.bleu.bleu import Bleu

    def values(refs, res):
        with contextlib.redirect_stdout(io.StringIO()):
            bleu, _ = Bleu(4).compute_score(refs, res, verbose=0)
        return bleu, pycocoevalcap_meteor.compute_score(refs, res)[0]

    return memoised(values)


def test_resampled_statistics_equal_pycocoevalcap_on_the_resampled_corpus(group, tokenized, resampled_pycocoevalcap):
    """A bootstrap resample through the statistics == pycocoevalcap's BLEU / METEOR recomputed on the corpus the
    resample draws (images repeated as often as drawn)."""
    gts, systems = tokenized
    rng = np.random.default_rng(7)
    draws = rng.integers(0, IMAGES, size=(4, IMAGES))
    counts = np.stack([np.bincount(d, minlength=IMAGES) for d in draws]).astype(np.float64)
    for s in (0, 2):
        values = group[s]
        bleu = {k: values[k].statistics.resampled(counts) for k in ("bleu_1", "bleu_2", "bleu_3", "bleu_4")}
        meteor_values = values["meteor"].statistics.resampled(counts)
        rouge = values["rouge_l"].statistics.resampled(counts)
        for r, drawn in enumerate(draws):
            res = {j: systems[s][i] for j, i in enumerate(drawn)}
            refs = {j: gts[i] for j, i in enumerate(drawn)}
            expected, expected_meteor = resampled_pycocoevalcap(refs, res)
            for n in range(4):
                assert bleu[f"bleu_{n + 1}"][r] == expected[n], (s, r, n)
            assert meteor_values[r] == expected_meteor, (s, r)
            per_image = np.array(values["rouge_l"].per_sample)[drawn]
            assert rouge[r] == pytest.approx(np.mean(per_image), abs=1e-12)


@pytest.fixture(scope="module")
def meteor_of_corpora(pycocoevalcap_meteor):
    """pycocoevalcap's tokenization of a corpus, its Meteor corpus value, its jar's printed SCORE lines and its Meteor
    of resampled corpora (``draws``), each distinct input computed once for the module: both backends' tests compare
    with the same values."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    meteor = pycocoevalcap_meteor

    def values(captions, references, draws):
        with contextlib.redirect_stdout(io.StringIO()):
            gts = PTBTokenizer().tokenize({i: [{"caption": r} for r in refs] for i, refs in enumerate(references)})
            res = PTBTokenizer().tokenize({i: [{"caption": c}] for i, c in enumerate(captions)})
        printed = np.array([[float(v) for v in meteor._stat(res[i][0], gts[i]).split()] for i in range(len(captions))])
        resampled = [meteor.compute_score({j: gts[i] for j, i in enumerate(drawn)},
                                          {j: res[i] for j, i in enumerate(drawn)})[0] for drawn in draws]
        return meteor.compute_score(gts, res)[0], printed, resampled

    return memoised(values)


@pytest.mark.parametrize("backend", ["python", "java"])
def test_meteor_statistics_reproduce_the_jar_when_captions_equal_a_reference(flickr, meteor_of_corpora, backend):
    """The printed METEOR is the jar's EVAL over every segment; a segment matched word for word in one chunk adds no
    chunk to that aggregate. One image in four captioned by its own first reference (and one in eight by a
    reference with two words swapped: all matched, two chunks or more): the statistics' corpus value and resampled
    values == pycocoevalcap's Meteor on the same (resampled) corpora; summing the printed lines unchanged does not
    give it."""
    references, systems = flickr
    n = 60
    references = references[:n]
    captions = list(systems[0][:n])
    for i in range(0, n, 4):
        captions[i] = references[i][0]
    for i in range(2, n, 8):
        words = references[i][1].split()
        captions[i] = " ".join([words[1], words[0], *words[2:]])
    (value,) = [v["meteor"] for v in coco.score_coco_group([captions], references, metrics=["meteor"],
                                                           coco_backend=backend)]
    draws = np.random.default_rng(3).integers(0, n, size=(3, n))
    expected, printed, expected_resampled = meteor_of_corpora(captions, references, draws)
    assert value.corpus == expected
    assert value.statistics.value() == value.corpus
    assert coco_jars.combine_meteor(printed.sum(axis=0, keepdims=True))[0] != value.corpus  # the lines summed as printed
    counts = np.stack([np.bincount(d, minlength=n) for d in draws]).astype(np.float64)
    for r, resampled in enumerate(value.statistics.resampled(counts)):
        assert resampled == expected_resampled[r], r


def test_blocks_are_tokenized_as_separate_pycocoevalcap_calls():
    """The lexer looks across a line end ("... A." before another line keeps its period), so every block gets its
    own file and lexer: each block equals a pycocoevalcap tokenize call of that block alone."""
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    blocks = [["A dog on Main St.", "Two kids in the U.S.", "A man named A."],
              ["A woman , her dog A.", "café crème in a naïve \"style"],
              ["It is Jan.", "the end\nof the line"]]
    got = coco_jars.ptb_tokenize_blocks(blocks)
    for block, tokens in zip(blocks, got):
        with contextlib.redirect_stdout(io.StringIO()):
            expected = PTBTokenizer().tokenize({i: [{"caption": t}] for i, t in enumerate(block)})
        assert tokens == [expected[i][0] for i in range(len(block))]
    joined = coco_jars.ptb_tokenize_blocks([[t for block in blocks for t in block]])[0]
    assert joined != [t for tokens in got for t in tokens]  # why one lexer per block is needed


def test_group_names_leave_spice_out_with_one_notice_when_its_jars_are_missing(monkeypatch, capsys):
    if coco_jars.spice_available():
        pytest.skip("SPICE's jars are installed here")
    monkeypatch.setattr(coco, "_SPICE_NOTICED", [])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a plain line on stderr, not a Python warning
        assert coco.coco_group_names(("spice",)) == ("bleu", "meteor", "rouge_l", "cider")
        assert capsys.readouterr().err == ""  # spice named: its own error says why
        assert coco.coco_group_names() == ("bleu", "meteor", "rouge_l", "cider")
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("capeval: the coco group runs without SPICE")
        assert coco.coco_group_names() == ("bleu", "meteor", "rouge_l", "cider")
        assert capsys.readouterr().err == ""  # once per process
    assert "spice" in coco.COCO_GROUP
    with pytest.raises(ModelNotAvailableError, match="Stanford CoreNLP"):
        coco.score_coco_group([["a dog"]], [["a dog runs"]], metrics=["bleu", "spice"])


@pytest.mark.parametrize("systems, references, metrics, message", [
    ([["a dog", "a cat"]], [["a dog runs"]], None, r"systems\[0\] has 2 captions for 1 reference lists"),
    ([["a dog"], [3]], [["a dog runs"]], None, r"systems\[1\]\[0\] is an int"),
    ([["a dog"]], [[]], None, r"references\[0\] is an empty reference list"),
    ([["a dog\rruns"]], [["a dog runs"]], None, r"systems\[0\]\[0\] holds the line break"),
    ([["a dog"]], [["a dog", "a\u2028cat"]], None, r"references\[0\]\[1\] holds the line break"),
    ([["a dog"]], [["a dog runs"]], ["bleu_4"], "'bleu_4' is not in the COCO group"),
    ([], [["a dog runs"]], None, "systems must be a non-empty list"),
])
def test_bad_input_is_refused_before_any_jar_starts(systems, references, metrics, message):
    with pytest.raises(InputError, match=message):
        coco.score_coco_group(systems, references, metrics=metrics or ["bleu"])


def test_a_scorer_names_a_refused_caption_by_its_prediction_index():
    from capeval.core.scoring import load_scorer

    with pytest.raises(InputError, match=r"^predictions\[1\] holds the line break '\\r'"):
        load_scorer("bleu").score(["a dog", "a dog\rruns"], references=[["a dog"], ["a dog runs"]])
