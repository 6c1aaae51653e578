"""``capeval convert``: an official checkpoint → capeval's safetensors/JSON layout."""

from __future__ import annotations


def configure(parser) -> None:
    from capeval.core.convert import converters

    parser.add_argument("artifact", choices=sorted(converters()),
                        help="; ".join(f"{k}: {v.help}" for k, v in sorted(converters().items())))
    parser.add_argument("official_file")
    parser.add_argument("out_dir")


def run(args) -> int:
    from capeval.core.convert import convert

    out = convert(args.artifact, args.official_file, args.out_dir)
    print(f"wrote {out}")
    return 0
