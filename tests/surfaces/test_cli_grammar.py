"""One grammar for every `capeval` command: every option has help, output goes to `--output` (the spellings of
before the first release, `--out`, `--output-dir`, `--dry-run`, `convert`'s positional folder and the `bench`
command, are gone), every command takes `--json` and then prints exactly one JSON document on stdout, `ray-score`
takes every scoring option of `score` (one shared builder; that they reach the scorer alike is checked in
test_ray_integration.py, on a local Ray), one `--weights [METRIC=]SOURCE` grammar, and
`throughput` is told apart from `benchmark`."""

import argparse
import json
import subprocess
import sys

import pytest
from capeval.cli import COMMANDS, build_parser, main

# the output spellings used before `--output` was the only one: none parses any more
OLD_OUTPUT = {("train", "polos"): "--out", ("train", "vcrscore"): "--out", ("leaderboard",): "--output-dir",
              ("publish-spaces",): "--dry-run"}
OLD_OUTPUT_NAMES = ("--out", "--output-dir", "--out-dir", "--dry-run")
# options of `score` that say where records come from or where results go, not how they are scored
SCORE_IO = {"--input", "--split", "--config", "--from-features", "--model", "--output", "--shard", "--chunk-size",
            "--json", "-h", "--help"}


def _subparsers(parser):
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]


def _leaves(parser=None, path=()):
    """(command words, parser) of every runnable command: `score`, ..., `train polos`, `judges import-fleur`."""
    parser = parser or build_parser("*")
    subs = _subparsers(parser)
    if not subs:
        yield path, parser
        return
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _leaves(child, path + (name,))


LEAVES = dict(_leaves())


def test_every_command_of_the_table_is_walked():
    assert {words[0] for words in LEAVES} == set(COMMANDS)
    assert {("train", "polos"), ("train", "vcrscore"), ("judges", "import-fleur")} <= set(LEAVES)


@pytest.mark.parametrize("words", sorted(LEAVES), ids=" ".join)
def test_every_option_has_help(words):
    parser = LEAVES[words]
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue  # a hidden alias: checked below that it is an old spelling of a listed option
        assert action.help, f"capeval {' '.join(words)}: {action.option_strings or action.dest} has no help"


@pytest.mark.parametrize("words", sorted(LEAVES), ids=" ".join)
def test_output_is_spelled_output_only(words):
    parser = LEAVES[words]
    shown = parser.format_help()
    for old in OLD_OUTPUT_NAMES:
        assert f"{old} " not in shown and f"{old}\n" not in shown, f"capeval {' '.join(words)} lists {old}"
        assert old not in parser._option_string_actions, f"capeval {' '.join(words)} parses {old}"
    outputs = [a for a in parser._actions if a.dest in ("output", "out", "out_dir", "output_dir")]
    assert all(action.option_strings == ["--output"] for action in outputs), words
    if words in OLD_OUTPUT:
        assert outputs, words


def test_convert_takes_its_folder_as_output_only(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:  # a usage error: one line, exit 2
        main(["convert", "pac-s", str(tmp_path / "x.pth"), str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert "--output" in capsys.readouterr().err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("words", sorted(LEAVES), ids=" ".join)
def test_every_command_prints_a_result_and_takes_json(words):
    assert "--json" in LEAVES[words]._option_string_actions, f"capeval {' '.join(words)} has no --json"


def test_ray_score_takes_every_scoring_option_of_score_from_the_same_builder():
    score, ray = LEAVES[("score",)], LEAVES[("ray-score",)]
    scoring = set(score._option_string_actions) - SCORE_IO
    assert {"--precision", "--dtype", "--caption-field", "--weights", "--preprocess-workers"} <= scoring
    assert scoring <= set(ray._option_string_actions), sorted(scoring - set(ray._option_string_actions))
    # --batch-size is also Ray Data's batch in ray-score, so it has a value there; score leaves it to each scorer
    assert (score._option_string_actions["--batch-size"].default, ray._option_string_actions["--batch-size"].default) \
        == (None, 64)
    for option in scoring - {"--batch-size"}:
        mine, theirs = score._option_string_actions[option], ray._option_string_actions[option]
        assert (mine.help, mine.type, mine.default, mine.choices) == \
               (theirs.help, theirs.type, theirs.default, theirs.choices), option


def test_throughput_and_benchmark_are_told_apart_and_bench_is_no_command():
    listed = subprocess.run([sys.executable, "-m", "capeval.cli", "--help"], capture_output=True, text=True).stdout
    assert "throughput" in listed and "benchmark" in listed
    assert "bench " not in listed and "bench\n" not in listed and "{" not in listed.split("COMMAND")[0]
    old = subprocess.run([sys.executable, "-m", "capeval.cli", "bench", "--help"], capture_output=True, text=True)
    assert old.returncode == 2 and "invalid choice: 'bench'" in old.stderr


def test_resamples_is_checked_per_command(capsys):
    """`evaluate` and `leaderboard` need at least one resample (a usage error at parse time); `benchmark` takes 0
    (no CI)."""
    for argv in (["evaluate", "--records", "a.jsonl", "--resamples", "0"], ["leaderboard", "--resamples", "0"]):
        with pytest.raises(SystemExit) as exit_:
            build_parser(argv[0]).parse_args(argv)
        assert exit_.value.code == 2
        assert "--resamples: must be a positive integer" in capsys.readouterr().err
    assert build_parser("benchmark").parse_args(["benchmark", "bleu", "thumb", "--resamples", "0"]).resamples == 0


def _records(tmp_path):
    records = [{"caption": "a dog runs on the grass", "references": ["a dog runs on grass", "a dog on the grass"]},
               {"caption": "two cats sit", "references": ["two cats sit on a table", "cats sitting"]}]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _one_document(capsys, argv, status=0):
    assert main([*argv, "--json"]) == status
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # one line: one document
    return json.loads(out)


def test_json_prints_one_document_end_to_end(tmp_path, capsys):
    records = _records(tmp_path)
    scored = _one_document(capsys, ["score", "bleu_4", "--input", str(records), "--output", str(tmp_path / "o.jsonl")])
    assert scored["metric"] == "bleu" and scored["n"] == 2
    for i in range(2):
        assert main(["score", "rouge_l", "--input", str(records), "--shard", f"{i}/2",
                     "--output", str(tmp_path / f"s{i}.jsonl")]) == 0
    capsys.readouterr()
    merged = _one_document(capsys, ["merge", str(tmp_path / "s0.jsonl"), str(tmp_path / "s1.jsonl"),
                                    "--output", str(tmp_path / "m.jsonl")])
    assert merged["n"] == 2
    rows = _one_document(capsys, ["weights"])
    assert isinstance(rows, list) and {"name", "source", "pin", "fetch"} <= set(rows[0])
    installed = _one_document(capsys, ["install-modules", "--modules-cache", str(tmp_path / "modules")])
    assert "capeval/clip_s" in installed and all(isinstance(path, str) for path in installed.values())


def test_json_of_verify_and_fetch_on_tiny_weights(tiny_hub, capsys):
    checked = _one_document(capsys, ["verify", "--only", "vcrscore_regressor"], status=1)  # tiny weights mismatch
    assert checked["checked"] == checked["failed"] == 1 and checked["tiny_random_weights"] == ["vcrscore-gbr"]
    assert checked["anchors"][0]["group"] == "vcrscore_regressor"
    fetched = _one_document(capsys, ["fetch", "openai-clip-vit-b-32"])
    assert list(fetched) == ["openai-clip-vit-b-32"]


def test_weights_grammar_is_metric_equals_source_or_a_bare_source(tiny_hub, tmp_path, capsys):
    from capeval.core.hub import resolve

    records = _records(tmp_path)
    folder = str(resolve("all-mpnet-base-v2"))
    for weights in (folder, f"mpnet_score={folder}"):
        assert main(["score", "mpnet_score", "--input", str(records), "--weights", weights, "--device", "cpu"]) == 0
        capsys.readouterr()
    assert main(["score", "mpnet_score", "--input", str(records), "--weights", f"clip_s={folder}"]) == 2
    assert "--weights clip_s=" in capsys.readouterr().err


def test_weights_grammar_in_evaluate_and_leaderboard(tmp_path, capsys):
    """`leaderboard` keeps its several-pairs-per-flag spelling and takes the repeated flag; `evaluate` refuses weights
    for a metric it does not score, and a bare source when it scores several, before any model loads."""
    parsed = build_parser("leaderboard").parse_args(["leaderboard", "--weights", "mpnet_score=a", "clip_s=b",
                                                     "--weights", "pac_s=c"])
    assert parsed.weights == [("mpnet_score", "a"), ("clip_s", "b"), ("pac_s", "c")]
    records = _records(tmp_path)
    for weights, message in (("clip_s=DIR", "--weights clip_s=DIR: clip_s is not scored here"),
                             ("DIR", "--weights DIR: several metrics are scored")):
        assert main(["evaluate", "--records", str(records), "--metrics", "bleu", "rouge_l", "--weights", weights]) == 2
        assert message in capsys.readouterr().err
