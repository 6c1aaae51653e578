"""The ``capeval`` command line. Every command is a module of this package with ``configure(parser)`` and
``run(args) -> int``; only the command being run is imported (``capeval --help`` imports no model code)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shlex
import sys
from typing import List, Optional

from capeval.cli.options import check_shared_options
from capeval.core.errors import ConversionError, InputError, ModelNotAvailableError, ScoredThenFailedError
from capeval.core.version import __version__

BROKEN_PIPE_STATUS = 128 + 13  # a Unix tool killed by SIGPIPE, as the shell reports it
INTERRUPTED_STATUS = 128 + 2  # a Unix tool stopped by SIGINT (Ctrl-C), as the shell reports it
# command -> (module under capeval.cli, one-line help); the order is the order of `capeval --help`
COMMANDS = {
    "score": ("score", "score captions from a file, a datasets folder or a hub dataset"),
    "evaluate": ("evaluate", "systems' captions on COCO / Karpathy / inline references: a metric suite in one pass, "
                             "CIs, paired significance tests, a report"),
    "compare": ("compare", "a saved report.json's CIs, p-values and clusters recomputed without scoring again"),
    "merge": ("merge", "join `capeval score --shard` outputs (or `capeval train polos-features --shard` folders) "
                       "in input order"),
    "ray-score": ("ray_score", "score a dataset with Ray Data actors (local or a cluster) into parquet shards"),
    "benchmark": ("benchmark", "correlate a metric with human judgments on a benchmark (Flickr8k, Pascal-50S, ...)"),
    "leaderboard": ("leaderboard", "metrics x benchmarks: literature statistic, CI, significance clusters, published"),
    "judges": ("judges", "judge caches: import FLEUR's published per-sample outputs (replayed by `benchmark "
                         "--replay`)"),
    "convert": ("convert", "convert an official checkpoint to capeval's safetensors/JSON layout"),
    "weights": ("weights", "list every registered weight: source, pin, whether cached here, how to fetch it"),
    "fetch": ("fetch", "download (and convert) every weight a metric or weight needs, for offline use"),
    "verify": ("verify", "recompute the published anchors with the real weights and compare"),
    "push": ("push", "upload a converted/trained artifact folder to the Hugging Face Hub"),
    "train": ("train", "train a learned metric"),
    "throughput": ("throughput", "speed: CLIP-S throughput on a full-size random CLIP vs a naive per-sample loop"),
    "publish-spaces": ("publish_spaces", "push every module folder as a Hugging Face Space"),
    "install-modules": ("install_modules",
                        'make evaluate.load("capeval/<name>") resolve offline from this installation'),
}


def _command_named(argv: List[str]) -> Optional[str]:
    """The command word of ``argv`` (its first positional argument; the top level takes no valued options)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


class _Parser(argparse.ArgumentParser):
    """A usage error is one line (exit 2): what is wrong and where the help is, without the usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(command: Optional[str] = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported and configured (all of them when ``command`` is "*").
    Every command's ``--device``, ``--dtype``, ``--batch-size`` and ``--resamples`` are checked by the types of
    :mod:`.options`."""
    parser = _Parser(prog="capeval", description="Faithful, fast image-captioning metrics.")
    parser.add_argument("--version", action="version", version=f"capeval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if command in (name, "*"):
            module = importlib.import_module(f"capeval.cli.{module_name}")
            module.configure(command_parser)
            check_shared_options(command_parser)
            command_parser.set_defaults(func=module.run)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run a command; its exit status. Output piped into a reader that stops early (``| head``) ends it quietly;
    Ctrl-C (SIGINT) ends it with one line on stderr, status 130 (what it was writing is left whole or not at all)."""
    try:
        try:
            return _run(sys.argv[1:] if argv is None else list(argv), sys.argv if argv is None else ["capeval", *argv])
        finally:
            sys.stdout.flush()  # a closed pipe shows here at the latest, not at interpreter exit
    except BrokenPipeError:
        _discard_stdout()
        return BROKEN_PIPE_STATUS
    except KeyboardInterrupt:
        print("capeval: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS


def _run(argv: List[str], given: List[str]) -> int:
    args = build_parser(_command_named(argv)).parse_args(argv)
    args.command_line = shlex.join(given)  # the command as given, shell-quoted (the report names it)
    try:
        if getattr(args, "json", False):  # stdout holds the one JSON document: anything else printed goes to stderr
            args.result_stream = sys.stdout
            with contextlib.redirect_stdout(sys.stderr):
                return args.func(args)
        return args.func(args)
    except (InputError, ModelNotAvailableError, ConversionError, FileNotFoundError, KeyError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"capeval {args.command}: error: {message}", file=sys.stderr)
        return 2
    except ScoredThenFailedError as exc:
        print(f"capeval {args.command}: error: {exc}", file=sys.stderr)
        return 1


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that Python's final flush of the closed pipe stays silent."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (captured): nothing will flush to the pipe
        pass


if __name__ == "__main__":
    sys.exit(main())
