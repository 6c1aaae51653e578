"""``capeval convert``: an official checkpoint → capeval's safetensors/JSON layout."""

from __future__ import annotations

from capeval.cli.arguments import add_json, print_result


def configure(parser) -> None:
    from capeval.core.convert import converters

    parser.add_argument("artifact", choices=sorted(converters()),
                        help="; ".join(f"{k}: {v.help}" for k, v in sorted(converters().items())))
    parser.add_argument("official_file", help="the official checkpoint file, as its authors publish it")
    parser.add_argument("--output", metavar="DIR", required=True, help="folder to write the converted artifact into")
    add_json(parser, "the folder written")


def run(args) -> int:
    from capeval.core.convert import convert

    out = convert(args.artifact, args.official_file, args.output)
    print_result(args, {"output": str(out)}, f"wrote {out}")
    return 0
