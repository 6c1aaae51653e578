"""``capeval convert``: an official checkpoint → capeval's safetensors/JSON layout."""

from __future__ import annotations

import argparse

from capeval.cli.arguments import add_json, print_result
from capeval.core.errors import InputError


def configure(parser) -> None:
    from capeval.core.convert import converters

    parser.add_argument("artifact", choices=sorted(converters()),
                        help="; ".join(f"{k}: {v.help}" for k, v in sorted(converters().items())))
    parser.add_argument("official_file", help="the official checkpoint file, as its authors publish it")
    parser.add_argument("--output", metavar="DIR", help="folder to write the converted artifact into")
    parser.add_argument("out_dir", nargs="?", help=argparse.SUPPRESS)  # the old positional spelling of --output
    add_json(parser, "the folder written")


def run(args) -> int:
    from capeval.core.convert import convert

    if args.output and args.out_dir:
        raise InputError(f"the output folder is given twice ({args.out_dir} and --output {args.output}): give "
                         "--output only")
    if not (args.output or args.out_dir):
        raise InputError("--output DIR is required: the folder to write the converted artifact into")
    out = convert(args.artifact, args.official_file, args.output or args.out_dir)
    print_result(args, {"output": str(out)}, f"wrote {out}")
    return 0
