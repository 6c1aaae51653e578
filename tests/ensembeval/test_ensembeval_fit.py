"""Refitting EnsembEval: the original forward selection recovers a known linear mix; CLI; user metrics."""

import json

import numpy as np
import pandas as pd
import pytest

from capeval import InputError
from capeval.cli import main
from capeval.ensembeval.fit import add_metric_columns, fit_weights, read_table
from capeval.ensembeval.scorer import load_weights

TRUE = {"blip2_score": 0.8, "rouge_l": -0.3, "exact_noun_overlap": 0.45}


def _synthetic(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    cols = {name: rng.normal(0.5, 0.2, n) for name in
            ["blip2_score", "rouge_l", "exact_noun_overlap", "bleu_1", "cider", "pac_s", "meteor"]}
    cols["bleu_1"] = 0.5 * cols["rouge_l"] + rng.normal(0, 0.15, n)  # correlated with a true component
    target = sum(w * cols[name] for name, w in TRUE.items()) + rng.normal(0, 0.03, n)
    return pd.DataFrame({**cols, "human_score": target})


def test_forward_selection_recovers_the_three_components_and_their_weights():
    table = _synthetic()
    candidates = [c for c in table.columns if c != "human_score"]
    result = fit_weights(table, candidates)
    assert set(result.weights) == set(TRUE)
    for name, weight in TRUE.items():
        assert result.weights[name] == pytest.approx(weight, abs=0.05)
    assert result.cv_r2 > 0.9


def test_selection_matches_sklearn_default_cv_and_is_unshuffled():
    """The recipe is sklearn's defaults plus tol: the default cv=5 of a regressor is unshuffled KFold."""
    from sklearn.feature_selection import SequentialFeatureSelector
    from sklearn.linear_model import LinearRegression

    table = _synthetic(n=600, seed=3)
    candidates = [c for c in table.columns if c != "human_score"]
    official = SequentialFeatureSelector(LinearRegression(), direction="forward", tol=1e-4)
    official.fit(table[candidates].to_numpy(), table["human_score"].to_numpy())
    chosen = [c for c, keep in zip(candidates, official.get_support()) if keep]
    coef = LinearRegression().fit(table[chosen].to_numpy(), table["human_score"].to_numpy()).coef_
    result = fit_weights(table, candidates)
    assert set(result.weights) == set(chosen)
    np.testing.assert_allclose([result.weights[c] for c in chosen], coef, rtol=1e-10)


def test_cli_refit_with_a_user_metric_writes_weights_and_card(tmp_path):
    rng = np.random.default_rng(99)
    n = 800
    captions = [f"caption {i}" for i in range(n)]
    user_values = rng.normal(0.5, 0.2, n)
    table = _synthetic(n=n, seed=1)
    table["caption"] = captions
    table["human_score"] = table["human_score"] + 0.6 * user_values  # the user's metric matters
    data = tmp_path / "scores.csv"
    table.to_csv(data, index=False)
    module = tmp_path / "my_metric_module.py"
    lookup = dict(zip(captions, user_values.tolist()))
    module.write_text(f"VALUES = {json.dumps(lookup)}\n"
                      "def my_metric(predictions, images, references):\n"
                      "    return [VALUES[p] for p in predictions]\n")
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        out = tmp_path / "weights"
        code = main(["train", "ensembeval", "--data", str(data), "--extra-metric", "mine=my_metric_module:my_metric",
                     "--output", str(out), "--weights-name", "synthetic"])
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_metric_module", None)
    assert code == 0
    spec = load_weights(out)  # the scorer reads what the trainer wrote
    assert set(spec["weights"]) == set(TRUE) | {"mine"}
    assert spec["weights"]["mine"] == pytest.approx(0.6, abs=0.05)
    assert spec["provenance"]["data"]["file"] == "scores.csv"
    assert "mine" in spec["provenance"]["candidates"] and "cider" in spec["provenance"]["candidates"]
    card = (out / "README.md").read_text()
    assert "`mine`" in card and "intercept" in card
    assert 'capeval.load_scorer("ensembeval", weights=' in card and "capeval.core" not in card  # the public name


def test_user_scorer_object_as_metric():
    class LengthScorer:
        def score(self, predictions, images=None, references=None):
            values = [len(p.split()) for p in predictions]
            return {"length": float(np.mean(values)), "length_per_sample": values}

    table = pd.DataFrame({"caption": ["a b", "a b c d"], "references": [["x"], ["y"]]})
    assert add_metric_columns(table, {"len": LengthScorer()})["len"].tolist() == [2.0, 4.0]


def test_bad_fit_inputs():
    table = _synthetic(n=50)
    with pytest.raises(InputError, match="not in the data"):
        fit_weights(table, ["blip2_score", "nope"])
    with pytest.raises(InputError, match="at least two"):
        fit_weights(table, ["blip2_score"])


def test_cli_builds_fixed_cider_idf_from_a_reference_corpus(tmp_path):
    from capeval.functional.fixed_idf_cider import DocumentFrequencies
    from capeval.text.fixed_idf_cider import load_document_frequencies

    data = tmp_path / "refs.jsonl"
    data.write_text("\n".join(json.dumps({"references": refs}) for refs in
                              [["A dog runs.", "a dog"], ["Two cats!"], ["a dog and a cat"]]))
    assert main(["train", "cider-idf", "--data", str(data), "--output", str(tmp_path / "idf")]) == 0
    loaded = load_document_frequencies(tmp_path / "idf")
    expected = DocumentFrequencies.from_reference_sets([["a dog runs", "a dog"], ["two cats"], ["a dog and a cat"]])
    assert loaded == expected and loaded.counts[("a", "dog")] == 2


def test_sharded_component_scores_merge_and_refit_like_the_single_process_components(tiny_hub, tmp_path, capsys):
    """``score ensembeval --cider-idf --shard i/3`` ×3 + ``merge`` + ``train ensembeval`` gives the weights that the
    forward selection gives on the components computed in one process by each component scorer."""
    from PIL import Image

    from capeval.ensembeval.components import COMPONENTS, OFFICIAL_WEIGHTS
    from capeval.core.scoring import load_scorer

    rng = np.random.default_rng(5)
    words = ["dog", "cat", "car", "tree", "boat", "bird", "house", "road", "man", "woman"]
    for i in range(6):
        Image.fromarray(rng.integers(0, 256, (24, 20 + i, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
    records = []
    for i in range(40):
        a, b, c = rng.choice(words, 3, replace=False)
        caption = f"a {a} and a {b} near the {c}" if i % 3 else f"a {a} runs on the {b}"
        refs = [f"a {a} with a {b}", f"the {c} and a {a}"][: 1 + i % 2]
        overlap = len(set(caption.split()) & set(" ".join(refs).split())) / len(caption.split())
        records.append({"image": f"{i % 6}.png", "caption": caption, "references": refs,  # a learnable judgment
                        "human_score": float(overlap + (i % 6) / 10 + rng.normal(0, 0.05))})
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["train", "cider-idf", "--data", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "idf")]) == 0
    weights = {**OFFICIAL_WEIGHTS["weights"], "clip_s": 0.0}  # a zero weight: computed and reported, not summed
    (tmp_path / "weights.json").write_text(json.dumps({"name": "official+clip_s", "weights": weights}))
    base = ["score", "ensembeval", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path), "--device", "cpu",
            "--weights", str(tmp_path / "weights.json")]
    assert main(base + ["--shard", "0/3", "--output", str(tmp_path / "s0.jsonl")]) == 2  # official CIDEr: refused
    assert "--cider-idf" in capsys.readouterr().err
    for i in range(3):
        assert main(base + ["--cider-idf", str(tmp_path / "idf"), "--shard", f"{i}/3", "--chunk-size", "5",
                            "--output", str(tmp_path / f"s{i}.jsonl")]) == 0
    shards = [str(tmp_path / f"s{i}.jsonl") for i in range(3)]
    assert main(["train", "ensembeval", "--data", shards[1], "--output", str(tmp_path / "w1")]) == 2
    assert "merge the shards" in capsys.readouterr().err  # a lone shard is not the training table
    assert main(["merge", *shards, "--output", str(tmp_path / "merged.jsonl")]) == 0
    assert main(["train", "ensembeval", "--data", str(tmp_path / "merged.jsonl"), "--output", str(tmp_path / "w")]) == 0

    # single process, independently: each component scorer over all records at once, CIDEr with the same fixed IDF
    images = [str(tmp_path / r["image"]) for r in records]
    captions, refs = [r["caption"] for r in records], [r["references"] for r in records]
    columns = {}
    for name in sorted({COMPONENTS[k].scorer for k in weights} - {"cider"}):
        scorer = load_scorer(name, device="cpu")
        columns.update(scorer.score(captions, images if scorer.images != "unused" else None,
                                    refs if scorer.references != "unused" else None))
    columns.update(load_scorer("cider_fixed_idf", idf=str(tmp_path / "idf")).score(captions, references=refs))
    table = pd.DataFrame({k: columns[f"{k}_per_sample"] for k in weights})
    table["human_score"] = [r["human_score"] for r in records]
    merged = [json.loads(line) for line in (tmp_path / "merged.jsonl").read_text().splitlines()]
    for key in weights:  # the merged rows carry every component, in input order
        np.testing.assert_allclose([row["scores"][key] for row in merged], table[key], atol=1e-5, err_msg=key)
    # the IDF was built from the scored records' own references: the sharded CIDEr is the official whole-corpus CIDEr
    official = load_scorer("cider").score(captions, references=refs)["cider_per_sample"]
    np.testing.assert_allclose([row["scores"]["cider"] for row in merged], official, rtol=1e-9, atol=1e-12)
    expected = fit_weights(table, sorted(weights))
    refit = load_weights(tmp_path / "w")
    assert len(expected.weights) >= 2
    assert list(refit["weights"]) == list(expected.weights)  # same components, same selection order
    # components agree to float32 rounding (other batch compositions); the tiny BLIP-2's nearly constant scores get a
    # large weight, which magnifies that rounding, hence a relative tolerance
    np.testing.assert_allclose(list(refit["weights"].values()), list(expected.weights.values()), rtol=1e-4, atol=1e-6)
    assert set(refit["provenance"]["candidates"]) == set(weights)


def test_csv_jsonl_and_parquet_tables_read_alike(tmp_path):
    """One record reader for every format: the numeric columns the refit uses are equal (CSV text cells that are all
    numbers become numbers, exactly), text stays text, reference lists (JSON or Python literal in CSV) are lists."""
    table = _synthetic(n=300, seed=4)
    table["caption"] = [f"caption {i}" for i in range(len(table))]
    table["references"] = [[f"a reference {i}", "it's another"] for i in range(len(table))]
    table.loc[3, "cider"] = np.nan  # a missing component score: an empty CSV cell, a JSON null
    table.to_csv(tmp_path / "t.csv", index=False)  # lists written as Python literals
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(row) + "\n" for row in
                                              table.astype(object).where(table.notna(), None).to_dict("records")))
    table.to_parquet(tmp_path / "t.parquet")
    numeric = [c for c in table.columns if c not in ("caption", "references")]
    tables = {suffix: read_table(tmp_path / f"t.{suffix}") for suffix in ("csv", "jsonl", "parquet")}
    for suffix, read in tables.items():
        pd.testing.assert_frame_equal(read[numeric], tables["jsonl"][numeric], check_exact=True, obj=suffix)
        pd.testing.assert_frame_equal(read[numeric], table[numeric], check_exact=True, obj=suffix)
        assert read["caption"].tolist() == table["caption"].tolist()
        assert read["references"].tolist() == table["references"].tolist()
    fits = [fit_weights(read, [c for c in numeric if c != "human_score"]) for read in tables.values()]
    assert fits[0].weights == fits[1].weights == fits[2].weights


@pytest.mark.parametrize("rows, message", [
    ([{"caption": "a dog", "references": ["x"]}, {"caption": None, "references": ["y"]}],
     r"caption\[1\] is a float \(nan\)"),
    ([{"caption": "a dog", "references": ["x"]}, {"references": ["y"]}], r"caption\[1\] is a float \(nan\)"),
    ([{"caption": "a dog", "references": ["x"]}, {"caption": " ", "references": ["y"]}],
     r"caption\[1\] is an empty caption"),
    ([{"caption": "a dog", "references": ["x"]}, {"caption": "a cat", "references": []}],
     r"references\[1\] is an empty reference list"),
    ([{"caption": "a dog", "references": ["x"]}, {"caption": "a cat", "references": ["y", 3]}],
     r"references\[1\]\[1\] is an int"),
])
def test_user_metric_inputs_are_checked_not_cast(tmp_path, rows, message):
    """A missing caption is an error naming the row, never the text "nan" given to the metric."""
    seen = []
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(InputError, match=message):
        add_metric_columns(read_table(tmp_path / "t.jsonl"), {"m": lambda p, i, r: seen.append(p) or [0.0] * len(p)})
    assert not seen


def test_csv_reference_cells_json_or_python_literal_reach_the_user_metric(tmp_path):
    (tmp_path / "t.csv").write_text('caption,references,human_score\n'
                                    '"a dog","[\'a dog runs\', ""it\'s a dog""]",0.5\n'  # as pandas writes a list
                                    '"a cat","[""a cat sits"", ""a kitten""]",1\n'
                                    '"a car","one reference",0\n')
    seen = []
    table = add_metric_columns(read_table(tmp_path / "t.csv"),
                               {"m": lambda p, i, r: seen.append((p, r)) or [float(len(x)) for x in r]})
    assert seen == [(["a dog", "a cat", "a car"],
                     [["a dog runs", "it's a dog"], ["a cat sits", "a kitten"], ["one reference"]])]
    assert table["m"].tolist() == [2.0, 2.0, 1.0] and table["human_score"].tolist() == [0.5, 1.0, 0.0]


def test_a_damaged_cider_idf_file_is_one_clear_error(tmp_path):
    from capeval.text.fixed_idf_cider import load_document_frequencies

    (tmp_path / "cider_idf.json").write_text("{not json")
    with pytest.raises(InputError, match="cider_idf.json: not a CIDEr IDF file"):
        load_document_frequencies(tmp_path)
