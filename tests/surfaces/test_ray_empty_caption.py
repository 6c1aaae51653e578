"""Ray Data scoring under the scorer's empty-caption policy (``RayScorer`` called on a pyarrow batch, as an actor
calls it; ``score_dataset``'s refusals come before any Ray work)."""

import pytest

pa = pytest.importorskip("pyarrow")

from capeval.core.errors import InputError  # noqa: E402
from capeval.core.scoring import load_scorer  # noqa: E402
from capeval.integrations.ray import RayScorer, score_dataset  # noqa: E402

ROWS = [{"index": 0, "caption": "a dog on the grass", "references": ["a dog runs on the grass"]},
        {"index": 1, "caption": "", "references": ["a cat"]},
        {"index": 2, "caption": "a red car", "references": ["a red car parked", "a car"]}]


@pytest.mark.parametrize("policy, empty_value", [("skip", None), (0.5, 0.5)])
def test_empty_caption_rows_get_the_policys_score(policy, empty_value):
    table = RayScorer("rouge_l", empty_caption=policy)(pa.Table.from_pylist(ROWS))
    expected = load_scorer("rouge_l").score([r["caption"] for r in ROWS], references=[r["references"] for r in ROWS],
                                            empty_caption=policy)
    assert table.column("rouge_l").to_pylist() == expected["rouge_l_per_sample"]
    assert table.column("rouge_l").to_pylist()[1] == empty_value
    with pytest.raises(InputError, match=r"predictions\[1\] is an empty caption"):
        RayScorer("rouge_l")(pa.Table.from_pylist(ROWS))  # RayScorer's default: "error"


def test_bad_policies_and_corpus_level_metrics_are_refused():
    with pytest.raises(InputError, match="empty_caption must be 'score', 'error', 'skip' or a finite score"):
        RayScorer("rouge_l", empty_caption=float("nan"))
    with pytest.raises(InputError, match="cider is corpus-level"):
        score_dataset(None, "cider", empty_caption=0.0)
    with pytest.raises(InputError, match="two-pass cider"):
        score_dataset(None, "cider", empty_caption="skip")


def test_ray_score_takes_the_same_option(capsys):
    from capeval.cli import build_parser, main

    args = build_parser("ray-score").parse_args(["ray-score", "rouge_l", "--input", "x.jsonl", "--output", "out",
                                      "--empty-caption", "skip"])
    assert args.empty_caption == "skip"
    with pytest.raises(SystemExit) as exit_:
        main(["ray-score", "rouge_l", "--input", "x.jsonl", "--output", "out", "--empty-caption", "nan"])
    assert exit_.value.code == 2 and "use score, error, skip or a finite score" in capsys.readouterr().err
