"""Every option of every registered scorer reaches it from the command line, one way: ``--option METRIC.NAME=VALUE``
(VALUE read as JSON when it parses, else as text), ``--options FILE`` (JSON or TOML) and the shorthands, for
``capeval score`` and ``capeval evaluate``; each shorthand sets its option on the scorers it names and on no other.
The commands run for real up to the scorer's load (``load_scorer``) or the suite's start (``evaluate_captions``),
where the options they pass are captured."""

import json
import typing

import pytest

from capeval.cli import main
from capeval.cli.arguments import SHORTHANDS
from capeval.core import scoring
from capeval.core.option_types import OneOf, value_problem
from capeval.core.scoring import REQUIRED, scorers

NAMES = sorted(scorers())


class Reached(Exception):
    """The command got as far as loading: what it would load with is ``options``."""

    def __init__(self, options):
        super().__init__("reached")
        self.options = options


@pytest.fixture
def captured_load(monkeypatch):
    """``capeval score`` up to ``load_scorer``: raises :class:`Reached` with the options it would load with."""
    def load_scorer(name, **options):
        scoring.get_scorer_spec(name).check_options(options)  # what the real load_scorer checks first
        raise Reached({"metric": name, **options})

    monkeypatch.setattr(scoring, "load_scorer", load_scorer)


@pytest.fixture
def captured_suite(monkeypatch):
    """``capeval evaluate`` up to ``prepare_evaluation``: raises :class:`Reached` with the resolved plan."""
    import capeval.suite.run

    def prepare_evaluation(suite, *args, **kwargs):
        raise Reached(suite)

    monkeypatch.setattr(capeval.suite.run, "prepare_evaluation", prepare_evaluation)


def _choices(declared):
    """The choices a declaration names (its ``OneOf`` rules and ``Literal`` values), in order."""
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if origin is typing.Annotated:
        return [c for rule in args[1:] if isinstance(rule, OneOf) for c in rule.choices] + _choices(args[0])
    if origin is typing.Literal:
        return list(args)
    return [c for member in args for c in _choices(member)] if origin is typing.Union else []


def sample(option, existing_file):
    """A value of ``option`` to pass on the command line: another of its choices, another number or the other
    bool where it has a default, else the first of a path, a number, an empty mapping or null that it takes."""
    declared, default = option.declared, option.default
    choices = [c for c in _choices(declared) if c != default]
    if choices:
        return choices[0]
    if isinstance(default, bool):
        return not default
    if isinstance(default, (int, float)) and value_problem(declared, default + 1) is None:
        return default + 1
    if isinstance(default, (int, float, str)):
        return default
    return next(value for value in (str(existing_file), 2, {}, None) if value_problem(declared, value) is None)


def _as_argument(value) -> str:
    """A value as written after ``NAME=``: text as itself (the text fallback), anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value)


def _records(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps({"caption": "a dog", "image": "a.png", "references": ["a dog"]}) + "\n")
    return path


@pytest.fixture
def existing_file(tmp_path):
    path = tmp_path / "judge_cache.jsonl"
    path.write_text("")
    return path


@pytest.mark.parametrize("name", NAMES)
def test_every_option_reaches_the_scorer_from_capeval_score(name, tmp_path, captured_load, existing_file):
    """``--option NAME=VALUE`` one option at a time (the metric named, then implied), then all of them from an
    options file: the scorer is loaded with exactly these values."""
    spec = scorers()[name]
    values = {option.name: sample(option, existing_file) for option in spec.option_list()}
    required = {option.name: values[option.name] for option in spec.option_list() if option.default is REQUIRED}
    base = ["score", name, "--input", str(_records(tmp_path)), "--device", "cpu"]
    for option, value in values.items():
        for target in (f"{name}.{option}", option):
            argv = [*base, *(a for o, v in required.items() if o != option
                             for a in ("--option", f"{o}={_as_argument(v)}")),
                    "--option", f"{target}={_as_argument(value)}"]
            with pytest.raises(Reached) as reached:
                main(argv)
            assert reached.value.options["metric"] == name
            assert reached.value.options[option] == value, (option, value, reached.value.options)
    (tmp_path / "options.json").write_text(json.dumps({name: values}))
    with pytest.raises(Reached) as reached:
        main([*base, "--options", str(tmp_path / "options.json")])
    assert {option: reached.value.options[option] for option in values} == values


@pytest.mark.parametrize("name", NAMES)
def test_every_option_reaches_the_suite_plan_from_capeval_evaluate(name, tmp_path, captured_suite, existing_file,
                                                                   capsys):
    """One option at a time: the suite's plan holds it for that scorer, or a suite's rule refuses it (EnsembEval takes
    only its weights in a suite, its components being the suite's scorers; Polos' batch statistics make it
    corpus-level, which a suite that decodes images in chunks cannot score)."""
    spec = scorers()[name]
    reached_options = []
    for option in spec.option_list():
        value = sample(option, existing_file)
        argv = ["evaluate", "--records", str(_records(tmp_path)), "--metrics", name, "--device", "cpu",
                "--option", f"{name}.{option.name}={_as_argument(value)}"]
        try:
            code = main(argv)
        except Reached as reached:
            assert dict(reached.options.option(name)) == {option.name: value}
            reached_options.append(option.name)
        else:
            err = capsys.readouterr().err
            assert code == 2 and (f"in a suite, {name} takes only" in err or "score it alone" in err), err
    assert reached_options, f"no option of {name} reaches a suite"


def test_the_judges_replay_reaches_a_real_judge_from_the_command_line(tiny_hub, tmp_path, capsys, monkeypatch):
    """FLEUR scored once writing a judge cache (``--option fleur.judge_cache=``), then replayed from it
    (``--option replay=``): the replayed run loads no judge and gives the same scores."""
    from PIL import Image

    import capeval.judges.generation

    Image.new("RGB", (16, 12), "red").save(tmp_path / "a.png")
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"caption": f"a red square {i}", "image": "a.png"}) + "\n"
                                               for i in range(2)))
    base = ["score", "fleur", "--input", str(tmp_path / "in.jsonl"), "--images", str(tmp_path), "--device", "cpu",
            "--json", "--option", "max_new_tokens=8"]
    cache = tmp_path / "judge.jsonl"
    assert main([*base, "--option", f"fleur.judge_cache={cache}", "--output", str(tmp_path / "first.jsonl")]) == 0
    first = json.loads(capsys.readouterr().out)
    def no_judge_load(*args, **kwargs):
        raise AssertionError("the replayed run loaded a judge")

    monkeypatch.setattr(capeval.judges.generation.JudgeModel, "__init__", no_judge_load)  # none may happen
    assert main([*base, "--option", f"replay={cache}", "--output", str(tmp_path / "again.jsonl")]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["provenance"]["replayed"] == {"replayed": True, "cache": str(cache),
                                               "cache_sha256": again["provenance"]["replayed"]["cache_sha256"]}
    assert "replayed" not in first["provenance"]
    rows = [[json.loads(line)["scores"] for line in (tmp_path / f"{run}.jsonl").read_text().splitlines()]
            for run in ("first", "again")]
    assert json.dumps(rows[0]) == json.dumps(rows[1])  # NaN where the tiny judge wrote no number, alike
    assert first["n"] == again["n"] == 2


@pytest.mark.parametrize("shorthand", SHORTHANDS, ids=lambda s: s.flag)
def test_each_shorthand_targets_only_the_scorers_it_names(shorthand, tmp_path, captured_load, captured_suite):
    """Each scorer a shorthand names declares the option and is loaded with it by ``capeval score``; a suite gives it
    to those of its scorers only (EnsembEval, which takes only its weights in a suite, left out)."""
    value = {"--precision": "official", "--preprocess-workers": "2", "--coco-backend": "java",
             "--cider-idf": str(tmp_path)}[shorthand.flag]
    for name in shorthand.scorers:
        assert shorthand.option in scorers()[name].options, (shorthand.flag, name)
        with pytest.raises(Reached) as reached:
            main(["score", name, "--input", str(_records(tmp_path)), shorthand.flag, value])
        assert str(reached.value.options[shorthand.option]) == value
    metrics = sorted({*shorthand.scorers, "mpnet_score", "clip_s", "bleu"} - {"ensembeval"})
    if not set(metrics) & set(shorthand.scorers):  # --cider-idf: EnsembEval's alone
        return
    with pytest.raises(Reached) as reached:
        main(["evaluate", "--records", str(_records(tmp_path)), "--metrics", *metrics, shorthand.flag, value])
    plan = reached.value.options
    given = {name for name in plan.metrics if shorthand.option in plan.option(name)}
    assert given == set(shorthand.scorers) & set(plan.metrics)
    assert all(str(plan.option(name)[shorthand.option]) == value for name in given)


def test_a_shorthand_no_scored_metric_takes_is_refused(tmp_path, capsys):
    assert main(["score", "bleu", "--input", str(_records(tmp_path)), "--preprocess-workers", "2"]) == 2
    assert "--preprocess-workers applies to clip_s, ensembeval, pac_s, polos, not bleu" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--option", "clip_s.precision=official", "--precision", "official"],
     "clip_s's precision is given twice: by --option clip_s.precision=official and by --precision"),
    (["--option", "precision=official"], "--option precision=official: several metrics are scored"),
    (["--option", "polos.statistics=batch"], "--option polos.statistics=batch: polos is not scored here"),
    (["--option", "nosuch.x=1"], "--option nosuch.x=1: unknown metric 'nosuch'"),
    (["--option", "clip_s.precision=offcial"], "clip_s: precision must be one of (None, 'official'), not 'offcial'"),
    (["--option", "clip_s.batch_size=-3"], "clip_s: batch_size must be a positive integer, not -3"),
    (["--option", "pac_s.nosuch=1"], r"pac_s: unknown option(s) ['nosuch']"),
    (["--option", "clip_s.definition"], "argument --option: 'clip_s.definition': use METRIC.NAME=VALUE"),
])
def test_bad_options_are_one_line_exit_2(extra, message, tmp_path, capsys, captured_suite):
    argv = ["evaluate", "--records", str(_records(tmp_path)), "--metrics", "clip_s", "pac_s", *extra]
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_an_options_file_naming_one_metric_twice_is_refused(tmp_path, capsys):
    (tmp_path / "options.json").write_text(json.dumps({"clip_s": {"precision": "official"}, "CLIPScore": {}}))
    assert main(["score", "clip_s", "--input", str(_records(tmp_path)), "--options",
                 str(tmp_path / "options.json")]) == 2
    assert "clip_s is given twice, as 'clip_s' and 'CLIPScore'" in capsys.readouterr().err


def test_a_toml_options_file_equals_the_json_one(tmp_path, captured_load):
    (tmp_path / "options.toml").write_text('[CLIPScore]\ndefinition = "torchmetrics"\nbatch_size = 3\n')
    (tmp_path / "options.json").write_text(json.dumps({"clip_s": {"definition": "torchmetrics", "batch_size": 3}}))
    loaded = []
    for file in ("options.toml", "options.json"):
        with pytest.raises(Reached) as reached:
            main(["score", "clip_s", "--input", str(_records(tmp_path)), "--options", str(tmp_path / file)])
        loaded.append(reached.value.options)
    assert loaded[0] == loaded[1] and loaded[0]["definition"] == "torchmetrics" and loaded[0]["batch_size"] == 3
