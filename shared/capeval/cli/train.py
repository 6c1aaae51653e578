"""``capeval train <name>``: train a learned metric (every registered trainer is a sub-command)."""

from __future__ import annotations


def configure(parser) -> None:
    from capeval.core.training import trainers

    sub = parser.add_subparsers(dest="name", required=True)
    for name, spec in sorted(trainers().items()):
        spec.add_arguments(sub.add_parser(name, help=spec.help, description=spec.help))


def run(args) -> int:
    from capeval.core.training import trainers

    out = trainers()[args.name](args)
    print(f"wrote {out}")
    return 0
