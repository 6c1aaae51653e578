"""The options several commands share, declared once: where the result goes (``--json``), how records map to what is
scored (``--caption-field``, ...), which weights (``--weights [METRIC=]SOURCE``), the scoring runtime (``--device``,
``--dtype``, ``--batch-size``) and every scorer option (``--option METRIC.NAME=VALUE``, ``--options FILE`` and the
shorthands of :data:`SHORTHANDS`: :func:`chosen_options`). ``score`` and ``ray-score`` take every scoring option
through :func:`add_scoring_options`; ``evaluate`` takes the runtime, scorer and field options for the metrics of its
suite.

Every command prints its result with :func:`print_result`: with ``--json`` exactly one JSON document (one line) on
stdout, anything else the command prints goes to stderr (:func:`capeval.cli.main` redirects it)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

from capeval.cli.options import (METRIC_NAME, device, dtype, non_negative_int, option_setting, options_file,
                                 positive_int)
from capeval.core.errors import InputError

FIELD_DEFAULTS = {"caption": "caption", "image": "image", "references": "references"}
WEIGHTS_HELP = ("[METRIC=]SOURCE: the weights of METRIC (default: the one metric scored): a registry name (`capeval "
                "weights`), a hub id or a folder (write ./PATH for a folder whose name holds '='); repeatable")


def add_json(parser: argparse.ArgumentParser, what: str = "the result") -> None:
    """``--json``: ``what`` as one JSON document on stdout (progress and warnings on stderr)."""
    parser.add_argument("--json", action="store_true",
                        help=f"print {what} as one JSON document (one line) on stdout; progress and warnings go to "
                             "stderr")


def print_result(args: argparse.Namespace, document, text: Optional[str] = None) -> None:
    """The command's result: with ``--json`` one line of strict JSON (NaN and inf as null) on the stdout the command
    started with; otherwise ``text``, or the document as indented strict JSON when it has no text form."""
    from capeval.report.write import json_ready

    if getattr(args, "json", False):
        stream = getattr(args, "result_stream", None) or sys.stdout
        print(json.dumps(json_ready(document, "result"), ensure_ascii=False, allow_nan=False), file=stream)
    elif text is not None:
        print(text)
    else:
        print(json.dumps(json_ready(document, "result"), indent=2, allow_nan=False))


def weights_source(text: str) -> Tuple[Optional[str], str]:
    """argparse type of ``--weights``: ``METRIC=SOURCE`` → (METRIC, SOURCE); a bare ``SOURCE`` → (None, SOURCE)."""
    metric, sep, source = text.partition("=")
    if sep and METRIC_NAME.fullmatch(metric):
        if not source:
            raise argparse.ArgumentTypeError(f"{text!r}: no weights after '=' (METRIC=SOURCE)")
        return metric, source
    if not text:
        raise argparse.ArgumentTypeError("empty weights source")
    return None, text


def add_weights(parser: argparse.ArgumentParser, *, several_per_flag: bool = False) -> None:
    """``--weights [METRIC=]SOURCE``, repeatable; ``several_per_flag`` also takes several values after one flag
    (``leaderboard``'s ``--weights a=X b=Y``: commands without a positional argument it could swallow)."""
    parser.add_argument("--weights", type=weights_source, metavar="[METRIC=]SOURCE", default=[],
                        action="extend" if several_per_flag else "append", nargs="+" if several_per_flag else None,
                        help=WEIGHTS_HELP)


def chosen_weights(values: Iterable[Tuple[Optional[str], str]], metrics: Sequence[str]) -> Dict[str, str]:
    """Metric (as named in ``metrics``) → weights source, from ``--weights`` values. A bare source needs exactly one
    metric; a named metric must be one of ``metrics`` (any case, '-' for '_'), and at most once."""
    by_key = {_key(metric): metric for metric in metrics}
    chosen: Dict[str, str] = {}
    for metric, source in values or ():
        if metric is None:
            if len(metrics) != 1:
                raise InputError(f"--weights {source}: several metrics are scored ({', '.join(metrics)}): name one, "
                                 "--weights METRIC=SOURCE")
            metric = metrics[0]
        elif _key(metric) not in by_key:
            raise InputError(f"--weights {metric}={source}: {metric} is not scored here (scored: "
                             f"{', '.join(metrics)})")
        metric = by_key[_key(metric)]
        if metric in chosen:
            raise InputError(f"--weights: {metric} is given weights twice ({chosen[metric]}, {source})")
        chosen[metric] = source
    return chosen


def _key(metric: str) -> str:
    return metric.strip().lower().replace("-", "_")


def add_record_fields(parser: argparse.ArgumentParser, *, images: bool = True) -> None:
    """How records map to what is scored: their caption, image and references fields, ``--image-format`` and (with
    ``images``) the folder relative image paths are under."""
    parser.add_argument("--caption-field", help="the records' caption field (default: caption)")
    parser.add_argument("--image-field", help="the records' image field (default: image)")
    parser.add_argument("--references-field",
                        help="the records' references field (default: references); text holding a list, as in a CSV "
                             "cell '[\"a\", \"b\"]', is read as that list")
    parser.add_argument("--image-format", help="build each image path from the record's fields, e.g. "
                                               "'COCO_val2014_{image_id:012d}.jpg' for COCO-style results")
    if images:
        parser.add_argument("--images", help="directory the records' relative image paths are under")


def record_fields(args: argparse.Namespace) -> Dict[str, str]:
    """Role → field of :func:`add_record_fields`, the defaults filled in."""
    return {role: getattr(args, f"{role}_field") or default for role, default in FIELD_DEFAULTS.items()}


def given_fields(args: argparse.Namespace) -> Dict[str, str]:
    """Role → field of the field options given on the command line only."""
    return {role: getattr(args, f"{role}_field") for role in FIELD_DEFAULTS if getattr(args, f"{role}_field")}


@dataclass(frozen=True)
class Shorthand:
    """A flag that stands for ``--option METRIC.<option>=VALUE`` on each of ``scorers`` that the command scores
    (and on no other scorer, whatever its options are called)."""

    flag: str
    option: str
    scorers: Tuple[str, ...]
    metavar: str
    help: str
    type: Any = str

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")


SHORTHANDS = (
    Shorthand("--precision", "precision", ("blip2_score", "clip_s", "ensembeval", "pac_s", "polos"), "official",
              "official: the official pipeline's numerics (e.g. OpenAI CLIP's fp16 GPU mix), to reproduce a paper's "
              "numbers (default: capeval's fp32)"),
    Shorthand("--preprocess-workers", "preprocess_workers", ("clip_s", "ensembeval", "pac_s", "polos"), "N",
              "run the official CLIP image preprocessing in N worker processes (same pixels; for many-core hosts "
              "feeding a GPU; default: threads)", non_negative_int),
    Shorthand("--coco-backend", "coco_backend", ("bleu", "cider", "meteor", "rouge_l"), "python|java",
              "python (the default: the PTB tokenizer and METEOR 1.5 in Python, equal to pycocoevalcap's jars; no "
              "Java) or java (pycocoevalcap's jars, for cross-checking)"),
    Shorthand("--cider-idf", "cider_idf", ("ensembeval",), "PATH",
              "CIDEr with document frequencies fixed by this folder/file (`capeval train cider-idf`); makes every "
              "score per-sample (so --shard, --chunk-size and ray-score run it in one pass)"),
)


def add_runtime_options(parser: argparse.ArgumentParser, *, batch_size: Optional[int] = None) -> None:
    """Which weights, how the models run and every scorer option: ``--weights``, ``--device``, ``--dtype``,
    ``--batch-size``, ``--option``, ``--options`` and the :data:`SHORTHANDS`."""
    add_weights(parser)
    parser.add_argument("--device", type=device, default="auto",
                        help="auto (a GPU when there is one), cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--dtype", type=dtype, help="model dtype: float32, float16 or bfloat16 (default: the "
                                                    "scorer's, float32)")
    default_size = batch_size or "each scorer's own"
    parser.add_argument("--batch-size", type=positive_int, default=batch_size,
                        help=f"inputs per model batch; values do not depend on it (default: {default_size})")
    parser.add_argument("--option", type=option_setting, action="append", default=[], metavar="METRIC.NAME=VALUE",
                        help="any option of a metric (its card's options table: e.g. clip_s.definition=torchmetrics, "
                             "fleur.replay=judge_cache.jsonl, polos.statistics=batch); VALUE is read as JSON when it "
                             "parses (8, true, null, {\"points_per_side\": 4}), else as text; NAME=VALUE alone when "
                             "one metric is scored; wins over --device/--dtype/--batch-size for that metric; "
                             "repeatable; checked before any model loads")
    parser.add_argument("--options", type=options_file, metavar="FILE",
                        help="metric options from a TOML file ([clip_s] then precision = \"official\") or a JSON file "
                             "({\"clip_s\": {\"precision\": \"official\"}}); an option given here and again by a "
                             "flag is an error")
    for shorthand in SHORTHANDS:
        parser.add_argument(shorthand.flag, type=shorthand.type, metavar=shorthand.metavar,
                            help=f"{shorthand.help}. Shorthand of --option METRIC.{shorthand.option}=VALUE for "
                                 f"{', '.join(shorthand.scorers)} (no other metric)")


def add_scoring_options(parser: argparse.ArgumentParser, *, batch_size: Optional[int] = None) -> None:
    """Every option of how ``score`` and ``ray-score`` score records: runtime, weights, fields, empty captions
    (``batch_size``: the ``--batch-size`` default, None for each scorer's own)."""
    add_runtime_options(parser, batch_size=batch_size)
    add_record_fields(parser)
    add_empty_caption(parser)


def add_empty_caption(parser: argparse.ArgumentParser, *, suite: bool = False) -> None:
    """``--empty-caption``: what an empty (or whitespace-only) caption gets (``suite``: a suite's choices, score or
    error: every system is scored on every image)."""
    scored = ("score (default): scored as the metric's official implementation scores it (the COCO metrics, as "
              "pycocoevalcap: empty references too; a metric that does not score it refuses it, naming the record)")
    if suite:
        parser.add_argument("--empty-caption", choices=("score", "error"), default="score",
                            help=f"an empty caption or reference: {scored}; error: refused")
        return
    parser.add_argument("--empty-caption", type=empty_caption, default="score", metavar="score|error|skip|SCORE",
                        help=f"an empty caption: {scored}; error: refused; 'skip' (no score, null in the output, the "
                             "other captions scored as the corpus, counted in skipped_empty_captions); or a finite "
                             "score counted in the means (refused by corpus-level metrics)")


def empty_caption(text: str):
    """argparse type of ``--empty-caption``: ``score``, ``error``, ``skip`` or a finite score."""
    from capeval.core.empty_captions import EMPTY_CAPTION_POLICIES, empty_caption_policy

    try:
        return empty_caption_policy(text if text in EMPTY_CAPTION_POLICIES else float(text))
    except (ValueError, InputError):
        raise argparse.ArgumentTypeError(f"use score, error, skip or a finite score, not {text!r}") from None


def chosen_options(args: argparse.Namespace, names: Sequence[str], specs: Optional[Mapping[str, Any]] = None,
                   spelled: Optional[Sequence[str]] = None) -> Dict[str, Dict]:
    """Per scorer of ``names`` (the scorers a command scores; ``specs``: the registry as the command read it, default:
    read now; ``spelled``: as the command line named them, for ``--weights METRIC=``), the options of
    :func:`add_runtime_options` beyond the runtime: ``--options FILE``, each ``--option``, ``--weights`` and the
    :data:`SHORTHANDS` (each on the scorers it names that are scored; none of them scored is an error). An unknown metric, a metric not scored, two spellings of one metric in the file,
    and an option given twice are :class:`InputError`; the values are checked by the scorers' declarations
    (:meth:`capeval.core.scoring.ScorerSpec.check_options`, before any model loads)."""
    from capeval.core.scoring import get_scorer_spec, options_by_scorer

    chosen: Dict[str, Dict] = {}
    given_by: Dict[Tuple[str, str], str] = {}

    def put(metric: Optional[str], option: str, value, source: str) -> None:
        if metric is None and len(names) != 1:
            raise InputError(f"{source}: several metrics are scored ({', '.join(names)}): name one, "
                             "--option METRIC.NAME=VALUE")
        try:
            name = names[0] if metric is None else get_scorer_spec(metric, specs).name
        except InputError as error:
            raise InputError(f"{source}: {error}") from None
        if name not in names:
            raise InputError(f"{source}: {metric} is not scored here (scored: {', '.join(names)})")
        if (name, option) in given_by:
            raise InputError(f"{name}'s {option} is given twice: by {given_by[name, option]} and by {source}")
        given_by[name, option] = source
        chosen.setdefault(name, {})[option] = value

    if args.options is not None:
        source = f"--options {args.options.path}"
        for name, values in options_by_scorer(args.options.options, source, specs).items():
            for option, value in values.items():
                put(name, option, value, source)
    for setting in args.option:
        put(setting.metric, setting.name, setting.value, f"--option {setting.text}")
    for metric, source in chosen_weights(args.weights, list(spelled or names)).items():
        put(metric, "weights", source, f"--weights {source}")
    for shorthand in SHORTHANDS:
        value = getattr(args, shorthand.dest)
        if value is None:  # not given: each scorer's own default
            continue
        takers = [name for name in names if name in shorthand.scorers]
        if not takers and len(names) == 1:
            raise InputError(f"{shorthand.flag} applies to {', '.join(shorthand.scorers)}, not {names[0]}")
        if not takers:
            raise InputError(f"{shorthand.flag} applies to none of the metrics {list(names)} (it sets "
                             f"{shorthand.option} of {', '.join(shorthand.scorers)})")
        for name in takers:
            put(name, shorthand.option, value, shorthand.flag)
    return chosen


def scorer_options(args: argparse.Namespace, spec, metric_as_given: str) -> Dict:
    """The ``load_scorer`` options of the one metric a command scores (``spec``; ``metric_as_given``: its name on the
    command line): the runtime given and :func:`chosen_options` (which win), checked by the scorer's declarations."""
    runtime = {"device": args.device, "batch_size": args.batch_size, "dtype": args.dtype}
    options = {option: value for option, value in runtime.items() if value is not None}
    options.update(chosen_options(args, [spec.name], spelled=[metric_as_given]).get(spec.name, {}))
    spec.check_options(options)
    return options
