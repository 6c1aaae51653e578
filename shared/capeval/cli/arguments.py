"""The options several commands share, declared once: where the result goes (``--json``), how records map to what is
scored (``--caption-field``, ...), which weights (``--weights [METRIC=]SOURCE``) and the scoring runtime
(``--device``, ``--dtype``, ``--precision``, ...). ``score`` and ``ray-score`` take every scoring option through
:func:`add_scoring_options`; ``evaluate`` takes the runtime and field options for the metrics of its suite.

Every command prints its result with :func:`print_result`: with ``--json`` exactly one JSON document (one line) on
stdout, anything else the command prints goes to stderr (:func:`capeval.cli.main` redirects it)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Dict, Iterable, Optional, Sequence, Tuple

from capeval.cli.options import device, dtype, non_negative_int, positive_int
from capeval.core.errors import InputError

FIELD_DEFAULTS = {"caption": "caption", "image": "image", "references": "references"}
METRIC_NAME = re.compile(r"[A-Za-z][\w-]*")  # what may stand before '=' in --weights METRIC=SOURCE
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


def add_runtime_options(parser: argparse.ArgumentParser, *, batch_size: Optional[int] = None) -> None:
    """Which weights and how the models run: ``--weights``, ``--device``, ``--dtype``, ``--precision``,
    ``--batch-size``, ``--preprocess-workers`` and ``--cider-idf``; the metric-specific ones apply to every metric
    that has the option."""
    add_weights(parser)
    parser.add_argument("--device", type=device, default="auto",
                        help="auto (a GPU when there is one), cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--dtype", type=dtype, help="model dtype: float32, float16 or bfloat16 (default: the "
                                                    "scorer's, float32)")
    parser.add_argument("--precision", choices=["official"],
                        help="official: the official pipeline's numerics (e.g. OpenAI CLIP's fp16 GPU mix), to "
                             "reproduce a paper's numbers; for clip_s, pac_s, polos, blip2_score, ensembeval "
                             "(default: capeval's fp32)")
    default_size = batch_size or "each scorer's own"
    parser.add_argument("--batch-size", type=positive_int, default=batch_size,
                        help=f"inputs per model batch; values do not depend on it (default: {default_size})")
    parser.add_argument("--preprocess-workers", type=non_negative_int, default=0,
                        help="clip_s, pac_s, polos, ensembeval: run the official CLIP image preprocessing in N worker "
                             "processes (same pixels; for many-core hosts feeding a GPU; default: threads)")
    parser.add_argument("--coco-backend", choices=["python", "java"],
                        help="bleu, meteor, rouge_l, cider: python (the PTB tokenizer and METEOR 1.5 in Python, equal "
                             "to pycocoevalcap's jars; no Java) or java (pycocoevalcap's jars, for cross-checking; "
                             "default: python)")
    parser.add_argument("--cider-idf", help="ensembeval: CIDEr with document frequencies fixed by this folder/file "
                                            "(`capeval train cider-idf`); makes every score per-sample (so --shard, "
                                            "--chunk-size and ray-score run it in one pass)")


def add_scoring_options(parser: argparse.ArgumentParser, *, batch_size: Optional[int] = None) -> None:
    """Every option of how ``score`` and ``ray-score`` score records: runtime, weights, fields, empty captions
    (``batch_size``: the ``--batch-size`` default, None for each scorer's own)."""
    add_runtime_options(parser, batch_size=batch_size)
    add_record_fields(parser)
    parser.add_argument("--empty-caption", type=empty_caption, default="error", metavar="error|skip|SCORE",
                        help="an empty caption: an error (default); 'skip' (no score, null in the output, the other "
                             "captions scored as the corpus, counted in skipped_empty_captions); or a finite score "
                             "counted in the means (refused by corpus-level metrics)")


def empty_caption(text: str):
    """argparse type of ``--empty-caption``: ``error``, ``skip`` or a finite score."""
    from capeval.core.scoring import empty_caption_policy

    try:
        return empty_caption_policy(text if text in ("error", "skip") else float(text))
    except (ValueError, InputError):
        raise argparse.ArgumentTypeError(f"use error, skip or a finite score, not {text!r}") from None


FLAGS = {"backend": "--coco-backend"}  # scorer option -> its flag, where the flag is not --<option>


def flag(option: str) -> str:
    return FLAGS.get(option, f"--{option.replace('_', '-')}")


def scorer_options(args: argparse.Namespace, spec, metric_as_given: str) -> Dict:
    """The ``load_scorer`` options of :func:`add_runtime_options` for the metric of ``spec`` (``metric_as_given``: its
    name on the command line, which ``--weights METRIC=`` may use); an option the metric lacks is an InputError."""
    from capeval.core.scoring import scorers

    options = {"device": args.device}
    weights = chosen_weights(args.weights, [metric_as_given]).get(metric_as_given)
    for option, value in (("batch_size", args.batch_size), ("weights", weights), ("dtype", args.dtype),
                          ("precision", args.precision), ("preprocess_workers", args.preprocess_workers or None),
                          ("cider_idf", args.cider_idf), ("backend", args.coco_backend)):
        if value is None:  # not given: the scorer's own default
            continue
        if option not in spec.options:  # the registry says which metrics take it
            takers = sorted(name for name, other in scorers().items() if option in other.options)
            raise InputError(f"{flag(option)} applies to {', '.join(takers)}, not {spec.name}")
        options[option] = value
    return options


def suite_options(args: argparse.Namespace, names: Sequence[str]) -> Dict[str, Dict]:
    """Per metric of a suite (``names``: scorer names), its options of :func:`add_runtime_options` beyond the suite's
    runtime (device, dtype, batch size): ``--weights METRIC=`` for that metric, the metric-specific options for every
    metric that has them (refused when none has)."""
    from capeval.core.scoring import get_scorer_spec

    options: Dict[str, Dict] = {name: {"weights": source} for name, source in chosen_weights(args.weights,
                                                                                            names).items()}
    wanted = {"precision": args.precision, "preprocess_workers": args.preprocess_workers or None,
              "cider_idf": args.cider_idf, "backend": args.coco_backend}
    for option, value in wanted.items():
        if value is None:
            continue
        takers = [name for name in names if option in get_scorer_spec(name).options]
        if not takers:
            raise InputError(f"{flag(option)} applies to none of the metrics {list(names)}")
        for name in takers:
            options.setdefault(name, {})[option] = value
    return options
