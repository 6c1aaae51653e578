"""Empty and whitespace-only captions and references (#40 item 1): scored as pycocoevalcap 1.2 scores them, bit for
bit, on both backends of the COCO group, at the scorer door and in `capeval score`; refused under
``empty_caption="error"`` with the option named. The oracle is pycocoevalcap itself, run with its jars in the test."""

import json
import random

import pytest

from capeval import InputError
from capeval.cli import main
from capeval.core.scoring import load_scorer
from capeval.text.coco import score_coco_group
from capeval.text.coco_jars import require_java

from memo import memoised

KEYS = ("bleu_1", "bleu_2", "bleu_3", "bleu_4", "meteor", "rouge_l", "cider")
WORDS = ("a man dog cat woman child two three red blue small large runs sits stands on in near the with of grass "
         "street table field water beach park playing holding ball frisbee bike horse sofa").split()
EMPTY = ("", " ", "\t", "  \xa0 ", "\u3000", "\n", "...", " . , ")  # "..." and " . , ": empty once tokenized


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 11))) + rng.choice(("", ".", " ."))


def corpus(images: int = 60, seed: int = 3):
    """Captions and references with empty and whitespace-only texts at the first and last positions, the middle, an
    image whose references are all empty, and an empty caption against empty references."""
    rng = random.Random(seed)
    captions = [_sentence(rng) for _ in range(images)]
    references = [[_sentence(rng) for _ in range(rng.randint(1, 5))] for _ in range(images)]
    for position, text in zip((0, 7, 19, images - 1), EMPTY):
        captions[position] = text
    captions[23], captions[31] = EMPTY[6], EMPTY[4]
    references[0][0] = ""
    references[11] = [" ", ""]  # every reference empty
    references[19] = ["", "\t"]  # an empty caption against empty references (ROUGE-L's "".split(" ") == [""])
    references[29].append(EMPTY[3])
    references[images - 1][-1] = ""  # the last line of the references' file
    return captions, references


def pycocoevalcap_scores(captions, references, meteor):
    """pycocoevalcap 1.2's PTB tokenizer, BLEU, METEOR (``meteor``: its jar's process), ROUGE-L and CIDEr-D, as
    COCOEvalCap calls them."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tokenizer = PTBTokenizer()
    gts = tokenizer.tokenize({i: [{"caption": r} for r in refs] for i, refs in enumerate(references)})
    res = tokenizer.tokenize({i: [{"caption": c}] for i, c in enumerate(captions)})
    out = {}
    for scorer, keys in ((Bleu(4), KEYS[:4]), (meteor, ("meteor",)), (Rouge(), ("rouge_l",)), (Cider(), ("cider",))):
        corpus_value, per_image = scorer.compute_score(gts, res)
        if len(keys) == 1:
            corpus_value, per_image = [corpus_value], [per_image]
        for key, value, values in zip(keys, corpus_value, per_image):
            out[key] = (float(value), [float(v) for v in values])
    return out


@pytest.fixture(scope="module")
def pycocoevalcap(pycocoevalcap_meteor):
    """``pycocoevalcap_scores`` on the shared METEOR jar, each distinct input computed once for the module: both
    backends' tests compare with the same values."""
    require_java("the empty-text differential tests")  # the jars are the oracle: no Java fails, as the PTB tests do
    return memoised(lambda captions, references: pycocoevalcap_scores(captions, references, pycocoevalcap_meteor))


@pytest.fixture(scope="module")
def oracle(pycocoevalcap):
    captions, references = corpus()
    return captions, references, pycocoevalcap(captions, references)


def _as_floats(values):
    return [float(v) for v in values]


@pytest.mark.parametrize("backend", ["python", "java"])
def test_the_coco_group_scores_empty_texts_as_pycocoevalcap_bit_for_bit(oracle, backend):
    captions, references, expected = oracle
    (ours,) = score_coco_group([captions], references, metrics=["bleu", "meteor", "rouge_l", "cider"],
                               coco_backend=backend)
    for key in KEYS:
        assert ours[key].corpus == expected[key][0], key
        assert _as_floats(ours[key].per_sample) == expected[key][1], key
    # what makes the case: the empty captions score 0 here, and ROUGE-L scores "" against empty references 1
    assert ours["cider"].per_sample[7] == 0.0 and ours["rouge_l"].per_sample[19] == 1.0


@pytest.mark.parametrize("backend", ["python", "java"])
def test_several_systems_with_empty_captions_equal_each_alone(oracle, pycocoevalcap, backend):
    captions, references, expected = oracle
    other = ["" if i % 9 == 4 else c for i, c in enumerate(reversed(captions))]
    first, second = score_coco_group([captions, other], references, metrics=["bleu", "meteor", "rouge_l", "cider"],
                                     coco_backend=backend)
    alone = pycocoevalcap(other, references)
    for key in KEYS:
        assert (first[key].corpus, _as_floats(first[key].per_sample)) == expected[key]
        assert (second[key].corpus, _as_floats(second[key].per_sample)) == alone[key]


@pytest.mark.parametrize("metric", ["bleu", "meteor", "rouge_l", "cider"])
def test_the_scorer_door_scores_empty_texts_by_default_and_refuses_them_under_error(oracle, metric):
    captions, references, expected = oracle
    scorer = load_scorer(metric)
    result = scorer.score(captions, references=references)
    for key in (KEYS[:4] if metric == "bleu" else (metric,)):
        assert result[key] == expected[key][0] and result[f"{key}_per_sample"] == expected[key][1]
    with pytest.raises(InputError, match=r"^predictions\[0\] is an empty caption \(empty_caption='score', the "
                                         r"default, scores it"):
        scorer.score(captions, references=references, empty_caption="error")
    clean = [c if c.strip() else "a dog" for c in captions]
    with pytest.raises(InputError, match=r"^references\[0\]\[0\] is an empty caption \(empty_caption='score'"):
        scorer.score(clean, references=references, empty_caption="error")


def test_spice_refuses_empty_texts_naming_them():
    with pytest.raises(InputError, match=r"systems\[0\]\[1\] is an empty caption: spice does not score empty "
                                         r"captions"):
        score_coco_group([["a dog", " "]], [["a dog"], ["a cat"]], metrics=["spice"])


def _records(tmp_path, captions, references):
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"caption": c, "references": r}) + "\n" for c, r in zip(captions, references)))
    return path


@pytest.mark.parametrize("backend", ["python", "java"])
def test_capeval_score_scores_empty_texts_as_pycocoevalcap(oracle, tmp_path, capsys, backend):
    captions, references, expected = oracle
    source = _records(tmp_path, captions, references)
    out = tmp_path / "cider.jsonl"
    capsys.readouterr()
    assert main(["score", "cider", "--input", str(source), "--coco-backend", backend, "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["scores"]["cider"] for row in rows] == expected["cider"][1]
    assert main(["score", "bleu", "--input", str(source), "--empty-caption", "error", "--json"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "predictions[0] is an empty caption (empty_caption='score'" in error[0], error
