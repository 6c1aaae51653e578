"""``capeval compare report.json`` (issue #42 item 6): a saved report's CIs, p-values, marks and clusters recomputed
from the per-image statistics it keeps (``report["statistics"]``), nothing scored again.

- With the report's own resamples and seed every number is the original run's, bit for bit: the recomputed document,
  the Markdown table and the written report set equal ``capeval evaluate``'s, on real runs of examples/coco_small
  (the COCO group: BLEU's counts, METEOR's statistics, means; CLIP-S on tiny random weights) and on 20 inline images
  (the sampled randomization test, whose draws depend on the seed).
- Other ``--resamples`` / ``--seed`` / ``--p-values`` / ``--baseline`` give what ``compare_systems`` gives with those
  arguments on the statistics the scorers return when the systems are scored again here.
- The statistics keep every bit through JSON (NaN, ±inf, -0.0, float32, integers beyond 2**53).
- A report without statistics, a combine function outside capeval, a malformed column: one line, exit 2."""

import contextlib
import functools
import io
import json
import re
import shlex
import warnings
from pathlib import Path

import numpy as np
import pytest

from capeval import InputError
from capeval.cli import build_parser, main
from capeval.core.corpus_statistics import CorpusStatistics, mean_statistics
from capeval.report.schema import SCHEMA_VERSION
from capeval.report.write import json_ready
from capeval.statistics.systems import compare_systems
from capeval.suite.engine import score_evaluation
from capeval.suite.plan import resolve_plan
from capeval.suite.run import prepare_evaluation
from capeval.suite.saved_statistics import read_statistics, saved_statistics
from capeval.text.bleu import combine_bleu

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "coco_small"
SYSTEMS = ("baseline", "model_a", "model_b")
COMPARED = ("baseline", "systems", "comparisons", "clusters", "undefined", "significance")
FILES = ("report.json", "scores.csv", "summary.csv", "table.tex", "report.html")
REFERENCES = ["a dog runs on the grass", "a brown dog running in a field", "the dog is playing outside"]
WORDS = ["a", "dog", "runs", "on", "the", "grass", "brown", "cat", "field", "park", "plays", "in"]


def cli(*args):
    """``capeval ARGS``: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main([str(a) for a in args])
    return status, out.getvalue(), err.getvalue()


def coco_inputs():
    return {"annotations": EXAMPLE / "captions_val2014.json", "results": [EXAMPLE / f"{s}.json" for s in SYSTEMS],
            "images": EXAMPLE / "images" / "val2014"}


def evaluated(folder: Path, metrics, *extra, inputs):
    """A real ``capeval evaluate`` run writing its report set into ``folder / "out"``: (inputs, evaluate's table)."""
    sources = (["--records", *inputs["records"]] if "records" in inputs else
               ["--annotations", inputs["annotations"], "--results", *inputs["results"], "--images", inputs["images"]])
    status, table, err = cli("evaluate", *sources, "--metrics", *metrics, "--baseline", "baseline",
                             "--output", folder / "out", *extra)
    assert status == 0, err
    return {**inputs, "metrics": metrics, "folder": folder, "table": table}


@pytest.fixture(scope="module")
def coco_run(tmp_path_factory):
    """The COCO group (BLEU-1..4 from counts, METEOR from its statistics, ROUGE-L and CIDEr-D means), 6 images."""
    return evaluated(tmp_path_factory.mktemp("coco"), ["coco"], "--resamples", 200, "--seed", 7, inputs=coco_inputs())


@pytest.fixture(scope="module")
def clip_run(tiny_hub, tmp_path_factory):
    """Per-sample metrics of a model (CLIP-S, RefCLIP-S on tiny random weights) beside ROUGE-L."""
    return evaluated(tmp_path_factory.mktemp("clip"), ["clip_s", "rouge_l"], "--device", "cpu", "--resamples", 100,
                     inputs=coco_inputs())


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    """20 inline images (above 16: the randomization test draws its swaps from the seed), sacrebleu's counting."""
    folder = tmp_path_factory.mktemp("sampled")
    rng = np.random.default_rng(0)
    records = []
    for name in SYSTEMS:
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"caption": " ".join(rng.choice(WORDS, size=rng.integers(3, 8))),
                                            "references": REFERENCES}) + "\n" for _ in range(20)))
        records.append(path)
    return evaluated(folder, ["bleu", "rouge_l"], "--resamples", 300, "--seed", 11, "--p-values", "sacrebleu",
                     inputs={"records": records})


RUNS = ("coco_run", "clip_run", "sampled_run")


def report_of(run) -> dict:
    return json.loads((run["folder"] / "out" / "report.json").read_text(encoding="utf-8"))


def compared(run, *options) -> dict:
    status, out, err = cli("compare", run["folder"] / "out" / "report.json", "--json", *options)
    assert status == 0, err
    return json.loads(out)


def text(document, field):
    return json.dumps(document[field], allow_nan=False)


@pytest.mark.parametrize("run_name", RUNS)
def test_the_report_s_resamples_and_seed_give_every_number_of_the_original_run_bit_for_bit(run_name, request,
                                                                                           tmp_path):
    run = request.getfixturevalue(run_name)
    original = report_of(run)
    recomputed = compared(run)
    for field in COMPARED:  # the CIs, p-values, marks and clusters, as JSON text: every bit of every number
        assert text(recomputed, field) == text(original, field), field
    assert recomputed == original
    status, table, err = cli("compare", run["folder"] / "out" / "report.json")
    assert status == 0, err
    assert table == run["table"]
    images = [] if "records" in run else ["--images", run["images"]]
    status, _, err = cli("compare", run["folder"] / "out" / "report.json", "--output", tmp_path / "again", *images)
    assert status == 0, err
    for name in FILES:
        assert (tmp_path / "again" / name).read_bytes() == (run["folder"] / "out" / name).read_bytes(), name


def scored_again(run):
    """Every system scored again here, as ``capeval evaluate`` scores them: the scorers' own statistics."""
    plan = prepare_evaluation(resolve_plan(run["metrics"]), run.get("results", ()), annotations=run.get("annotations"),
                              records=run.get("records", ()), images=run.get("images"), baseline="baseline")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return score_evaluation(plan.evaluation, plan.suite, images_root=run.get("images"), show_progress=False)


@pytest.mark.parametrize("run_name, options", [
    ("coco_run", {"resamples": 150, "seed": 99}),
    ("coco_run", {"resamples": 200, "seed": 7, "baseline": "model_b", "p_values": "sacrebleu"}),
    ("sampled_run", {"resamples": 300, "seed": 12}),
    ("sampled_run", {"resamples": 250, "seed": 11, "p_values": "noreen"}),
])
def test_other_options_recompute_what_compare_systems_gives_on_the_scorers_own_statistics(run_name, options,
                                                                                          request):
    run = request.getfixturevalue(run_name)
    original = report_of(run)
    assert original["undefined_images"] == {}  # no mean is undefined: compare_systems is told of none
    scores = scored_again(run)
    p_values = options.get("p_values", original["significance"]["p_values"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = compare_systems(scores.statistics, baseline=options.get("baseline", "baseline"),
                                   resamples=options["resamples"], seed=options["seed"], p_values=p_values,
                                   higher_is_better={key: scores.metrics[key]["higher_is_better"]
                                                     for key in scores.keys})
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in options.items()]
    recomputed = compared(run, *flags)
    for field in ("comparisons", "clusters", "undefined", "significance"):
        assert text(recomputed, field) == json.dumps(json_ready(expected[field]), allow_nan=False), field
    for name in SYSTEMS:
        for key in scores.keys:
            assert recomputed["systems"][name]["scores"][key]["ci"] == expected["systems"][name][key]["ci"]
            assert recomputed["systems"][name]["scores"][key]["value"] == original["systems"][name]["scores"][key][
                "value"]
    assert text(recomputed, "comparisons") != text(original, "comparisons")


def test_bleu_s_orders_share_one_set_of_counts_and_a_mean_s_count_column_is_one_number(coco_run):
    statistics = report_of(coco_run)["statistics"]
    for name in SYSTEMS:
        assert [statistics[name][key]["columns"] for key in ("bleu_2", "bleu_3", "bleu_4")] == ["bleu_1"] * 3
        assert [statistics[name][key]["arguments"] for key in ("bleu_1", "bleu_4")] == [{"order": 1}, {"order": 4}]
        assert statistics[name]["cider"]["columns"][1] == 1 and len(statistics[name]["cider"]["columns"][0]) == 6


RATIO = mean_statistics([1.0]).combine  # capeval's own combine of a mean: sums[:, 0] / sums[:, 1]


def _halves(sums):
    return sums[:, 0] / sums[:, 1]


def test_the_statistics_keep_every_bit_through_json():
    per_unit = np.array([[0.1, -0.0, np.nan, 3.0, 2.0 ** 60, 7.0],
                         [np.inf, 0.0, 1.0, 3.0, 1.0, 7.0],
                         [-np.inf, 2.5, 2.0, 3.0, -5.0, 7.0]])
    statistics = {"a": {"float": CorpusStatistics(per_unit, RATIO),
                        "float32": CorpusStatistics(per_unit[:, :2].astype(np.float32) + np.float32(0.3), RATIO),
                        "ints": CorpusStatistics(np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int64), RATIO),
                        "bleu": CorpusStatistics(per_unit[:, 3:], functools.partial(combine_bleu, order=2)),
                        "again": CorpusStatistics(per_unit.copy(), RATIO)},
                  "b": {"float": mean_statistics([0.25, 1 / 3, 0.5]), "float32": mean_statistics([0, 1, 2]),
                        "ints": mean_statistics([1, 1, 1]), "bleu": mean_statistics([1, 2, 3]),
                        "again": mean_statistics([3, 2, 1])}}
    saved = json.loads(json.dumps(saved_statistics(statistics), allow_nan=False))
    assert saved["a"]["again"]["columns"] == "float" and saved["a"]["float"]["columns"][5] == 7
    read = read_statistics(saved, 3)
    for name, per_key in statistics.items():
        for key, stats in per_key.items():
            again = read[name][key]
            assert again.per_unit.dtype == np.asarray(stats.per_unit).dtype
            assert again.per_unit.tobytes() == np.asarray(stats.per_unit).tobytes(), (name, key)
    assert read["a"]["bleu"].combine.func is combine_bleu and read["a"]["bleu"].combine.keywords == {"order": 2}
    assert read["b"]["float"].combine is RATIO


def test_a_combine_function_outside_capeval_or_not_importable_is_refused():
    outside = saved_statistics({"a": {"x": CorpusStatistics(np.ones((2, 2)), _halves)}})
    with pytest.raises(InputError, match=r"statistics\['a'\]\['x'\]\.combine: '.*:_halves' is not a capeval "
                                         r"function"):
        read_statistics(outside, 2)
    local = saved_statistics({"a": {"x": CorpusStatistics(np.ones((2, 2)), lambda sums: sums[:, 0])}})
    with pytest.raises(InputError, match=r"\.combine: '.*<lambda>' is not a capeval function"):
        read_statistics(local, 2)
    gone = saved_statistics({"a": {"x": mean_statistics([1.0, 2.0])}})
    gone["a"]["x"]["combine"] = "capeval.core.corpus_statistics:no_such_function"
    with pytest.raises(InputError, match=r"\.combine: 'capeval\.core\.corpus_statistics:no_such_function' is not in "
                                         r"this capeval"):
        read_statistics(gone, 2)


def write_changed(run, tmp_path, change) -> Path:
    document = report_of(run)
    change(document)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def one_line_refusal(path, message):
    status, out, err = cli("compare", path)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("capeval compare: error: "), err
    assert message in err, err


def test_a_report_without_statistics_is_refused_in_one_line(coco_run, tmp_path):
    path = write_changed(coco_run, tmp_path, lambda d: (d.update(schema="capeval-report/1"), d.pop("statistics")))
    one_line_refusal(path, f"{path}: a capeval-report/1 document keeps no per-image statistics to compare from")
    path = write_changed(coco_run, tmp_path, lambda d: d.pop("statistics"))
    one_line_refusal(path, f"{path}: a {SCHEMA_VERSION} document keeps no per-image statistics to compare from")
    path = write_changed(coco_run, tmp_path, lambda d: d.update(schema="capeval-report/9"))
    one_line_refusal(path, f"{path}: schema 'capeval-report/9', expected '{SCHEMA_VERSION}'")


def test_a_malformed_report_is_refused_in_one_line_naming_the_field(coco_run, tmp_path):
    path = write_changed(coco_run, tmp_path, lambda d: d["statistics"]["model_a"]["meteor"].update(combine="os:system"))
    one_line_refusal(path, "statistics['model_a']['meteor'].combine: 'os:system' is not a capeval function")
    path = write_changed(coco_run, tmp_path, lambda d: d["statistics"]["model_b"]["cider"]["columns"][0].pop())
    one_line_refusal(path, "statistics['model_b']['cider'].columns[0]: 5 values, expected one per image (6)")
    path = write_changed(coco_run, tmp_path, lambda d: d["statistics"]["model_b"]["cider"]["columns"][0].__setitem__(
        0, "high"))
    one_line_refusal(path, "statistics['model_b']['cider'].columns[0]: not numbers of dtype float64")
    path = tmp_path / "truncated.json"
    path.write_text((coco_run["folder"] / "out" / "report.json").read_text()[:100])
    one_line_refusal(path, f"{path}: not a JSON document")


def test_the_readme_s_compare_commands_parse_as_written():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"`(capeval compare [^`]*)`", readme)
    assert "capeval compare report.json" in commands and len(commands) >= 2
    for command in commands:
        args = build_parser("compare").parse_args(shlex.split(command)[1:])
        assert args.command == "compare" and args.report == "report.json"
