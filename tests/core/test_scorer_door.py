"""The library door of every scorer: corpus-level answers without a loaded registry, per-call option typos, and
the score columns of an input of empty captions only (on the real factories and tiny weights)."""

import subprocess
import sys
import textwrap

import pytest

from capeval import InputError
from capeval.core.scoring import scorers

from test_scorer_contract import CAPTIONS, IMAGES, NAMES, REFERENCES, built  # noqa: F401 (built: the fixture)


def _inputs(spec, captions, *, references=True):
    n = len(captions)
    return {"images": IMAGES[:n] if spec.images != "unused" else None,
            "references": REFERENCES[:n] if references and spec.references != "unused" else None}


def test_a_directly_built_corpus_level_scorer_refuses_a_fixed_score_in_a_fresh_process():
    """No registry loaded yet: BLEU built from its factory must still know it is corpus-level (it accepted the
    fixed score and returned the mean of sentence BLEU as bleu_4)."""
    code = textwrap.dedent("""
        from capeval import InputError
        from capeval.text.coco import BleuScorer
        scorer = BleuScorer()
        try:
            scorer.score(["a dog", "", "a cat"], references=[["a dog"], ["x"], ["a cat sat"]], empty_caption=0.0)
        except InputError as error:
            assert "bleu is corpus-level" in str(error), error
        else:
            raise SystemExit("a fixed score was accepted")
        assert scorer.corpus_level is True
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("name", NAMES)
def test_a_per_call_option_typo_is_an_input_error_naming_it(name, built):
    spec, scorer = scorers()[name], built(name)
    with pytest.raises(InputError, match=rf"{scorer.name}: unknown option\(s\) \['empty_captions'\]; it accepts "
                                         "empty_caption"):
        scorer.score(CAPTIONS, **_inputs(spec, CAPTIONS), empty_captions="skip")
    with pytest.raises(InputError, match=r"unknown option\(s\) \['empty_captions'\]"):
        scorer.score_inputs(scorer.validate(CAPTIONS, **_inputs(spec, CAPTIONS)), empty_captions="skip")


def test_the_valid_per_call_options_are_named():
    from capeval.hice_s.scorer import HiceScorer

    scorer = HiceScorer.__new__(HiceScorer)  # the check runs before any model: no weights needed
    with pytest.raises(InputError, match=r"\['return_reports'\]; it accepts empty_caption and \['return_report'\]"):
        scorer.score(["a"], images=IMAGES[:1], return_reports=True)


@pytest.mark.parametrize("name", [n for n in NAMES if not scorers()[n].is_corpus_level({}) and n != "spice"])
@pytest.mark.parametrize("references", [True, False])
def test_empty_captions_only_get_every_score_column_a_caption_gets(name, references, built):
    spec, scorer = scorers()[name], built(name)
    if not references and spec.references != "optional":
        pytest.skip("references are required or unused")
    scored = scorer.score(CAPTIONS, **_inputs(spec, CAPTIONS, references=references))
    columns = sorted(k for k in scored if k.endswith("_per_sample"))
    empty = ["", "  "]
    fixed = scorer.score(empty, **_inputs(spec, empty, references=references), empty_caption=-1)
    assert sorted(k for k in fixed if k.endswith("_per_sample")) == columns
    for column in columns:
        assert fixed[column] == [-1.0, -1.0] and fixed[column[: -len("_per_sample")]] == -1.0
    skipped = scorer.score(empty, **_inputs(spec, empty, references=references), empty_caption="skip")
    assert sorted(k for k in skipped if k.endswith("_per_sample")) == columns
    assert all(skipped[column] == [None, None] and skipped[column[: -len("_per_sample")]] is None
               for column in columns)
    assert skipped["skipped_empty_captions"] == 2
