"""The benchmark runner on degenerate input (issue #27): an undefined correlation is reported as undefined (NaN →
JSON null, no interval), a missing human rating is refused naming the benchmark, column and rows or dropped and
counted with nan_policy="omit" (the raters' α over the rows kept), and a release value that is not a rating is an
error naming the file, the record and the field."""

import json

import numpy as np
import pandas as pd
import pytest

from capeval import InputError
from capeval.benchmarks import load
from capeval.benchmarks.loaders import Benchmark
from capeval.benchmarks.runner import metric_scores, run_benchmark

from degenerate_thumb import degenerate_rows, write_raw_thumb


def test_an_undefined_correlation_is_null_in_the_json_with_no_interval(tmp_path, monkeypatch, capsys):
    from capeval.cli import main

    write_raw_thumb(tmp_path / "data", [r[3] for r in degenerate_rows()])
    monkeypatch.setenv("CAPEVAL_CACHE", str(tmp_path / "cache"))
    with pytest.warns(Warning, match="metric scores are constant"):
        assert main(["benchmark", "cider", "thumb", "--data-dir", str(tmp_path / "data"), "--json",
                     "--resamples", "40"]) == 0

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    out = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert out["value"] is None and out["ci95"] == [None, None]
    assert "metric scores are constant" in out["undefined"]


def test_a_null_rating_is_refused_naming_its_row_or_omitted_and_counted(tmp_path):
    ratings = [r[3] for r in degenerate_rows()]
    ratings[3] = None
    write_raw_thumb(tmp_path / "data", ratings)
    options = dict(data_dir=tmp_path / "data", cache_dir=tmp_path / "cache", resamples=30)
    with pytest.raises(InputError, match=r"thumb: human: missing value \(NaN\) at row 3 \(1 of 24 rows\); pass "
                                         r"--nan-policy omit"):
        run_benchmark("bleu1", "thumb", **options)
    out = run_benchmark("bleu1", "thumb", nan_policy="omit", **options)
    c, r, i, h = map(list, zip(*degenerate_rows()))
    bleu = metric_scores("bleu1", Benchmark("thumb", c, r, i, h, "pearson", ""), cache_dir=tmp_path / "cache")
    kept = [k for k in range(24) if k != 3]
    assert out["omitted"] == 1 and out["n"] == 23
    assert out["value"] == pytest.approx(100 * np.corrcoef([bleu[k] for k in kept], [h[k] for k in kept])[0, 1])
    with pytest.raises(InputError, match="nan_policy"):
        run_benchmark("bleu1", "thumb", nan_policy="zero", **options)


def test_the_raters_agreement_is_over_the_rows_kept(tmp_path):
    krippendorff = pytest.importorskip("krippendorff")
    folder = tmp_path / "flickr8k"
    folder.mkdir()
    ratings = {"a dog runs": [4, 4, 3], "a cat sleeps": [1, None, 1], "a red car": [3, 2, 3], "two men walk": [2, 1, 2]}
    refs = ["a dog running on the grass", "a brown dog runs", "a dog outside", "a dog plays", "a dog on a lawn"]
    data = {"0": {"image_path": "1.jpg", "ground_truth": refs,
                  "human_judgement": [{"caption": c, "rating": r} for c, rs in ratings.items() for r in rs]}}
    (folder / "flickr8k_expert_clipscore_format.json").write_text(json.dumps(data))
    with pytest.raises(InputError, match=r"flickr8k_expert: human: missing value \(NaN\) at row 4 \(1 of 12 rows\)"):
        run_benchmark("bleu1", "flickr8k_expert", data_dir=tmp_path, resamples=0, cache_dir=tmp_path / "cache")
    out = run_benchmark("bleu1", "flickr8k_expert", data_dir=tmp_path, resamples=0, cache_dir=tmp_path / "cache",
                        nan_policy="omit")
    table = [[np.nan if rs[k] is None else rs[k] for rs in ratings.values()] for k in range(3)]  # raters x captions
    assert out["omitted"] == 1
    for level in ("ordinal", "interval"):
        expected = 100 * krippendorff.alpha(reliability_data=table, level_of_measurement=level)
        assert out["krippendorff_alpha"][level] == pytest.approx(expected, abs=1e-9)


def test_a_release_value_that_is_not_a_rating_names_the_file_record_and_field(tmp_path):
    ratings = [r[3] for r in degenerate_rows()]
    ratings[6] = "n/a"
    write_raw_thumb(tmp_path / "thumb_data", ratings)
    with pytest.raises(InputError, match=r"THumB-1.0.jsonl: record line 7: field 'human_score': 'n/a' is not a "
                                         r"finite number"):
        load("thumb", tmp_path / "thumb_data")
    folder = tmp_path / "pascal" / "pascal50s"
    folder.mkdir(parents=True)
    pd.DataFrame({"ID": [0, 1], "image_path": ["./VOC2010/JPEGImages/1.jpg"] * 2, "references": [["a dog"]] * 2,
                  "candidate_a": ["a dog", "a cat"], "candidate_b": ["a cat", "a dog"], "category": [1, 2],
                  "scores": [{"label": 0}, {"label": None}]}).to_parquet(folder / "pascal50s_pairs_48refs.parquet")
    with pytest.raises(InputError, match=r"pascal50s_pairs_48refs.parquet: record 1: field 'scores.label': None is "
                                         r"not 0"):
        load("pascal50s", tmp_path / "pascal")


def test_the_ensembeval_text_transfer_names_components_of_tiny_random_weights(tiny_hub, tmp_path, monkeypatch):
    from capeval.benchmarks import catalog, loaders
    from capeval.benchmarks.ensemble_transfer import ensemble_text_transfer

    rows = degenerate_rows()
    c, r, i, h = map(list, zip(*rows))
    made = {"fit_here": Benchmark("fit_here", c, r, i, h, "pearson", "fabricated"),
            "eval_here": Benchmark("eval_here", c[::-1], r[::-1], i[::-1], h, "pearson", "fabricated")}
    for name, benchmark in made.items():  # registered as benchmarks by name (the loaders are data, not models)
        monkeypatch.setitem(loaders.CORRELATION_LOADERS, name, lambda _dir, b=benchmark: b)
        monkeypatch.setitem(catalog.BENCHMARKS, name, lambda _dir, b=benchmark: b)
    out = ensemble_text_transfer("fit_here", ["eval_here"], data_dir=tmp_path, components=("bleu_1", "mpnet_score"),
                                 cache_dir=tmp_path / "cache", device="cpu")
    assert out["tiny_random_weights"] == ["mpnet_score"]
