"""``capeval train <name>``: train a learned metric (every registered trainer is a sub-command)."""

from __future__ import annotations

from capeval.cli.arguments import add_json, print_result


def configure(parser) -> None:
    from capeval.core.training import trainers

    sub = parser.add_subparsers(dest="name", required=True, metavar="NAME")
    for name, spec in sorted(trainers().items()):
        trainer = sub.add_parser(name, help=spec.help, description=spec.help)
        spec.add_arguments(trainer)
        add_json(trainer, "the output written")


def run(args) -> int:
    from capeval.core.training import trainers

    out = trainers()[args.name](args)
    print_result(args, {"output": str(out)}, f"wrote {out}")
    return 0
