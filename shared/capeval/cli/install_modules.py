"""``capeval install-modules``: make ``evaluate.load("capeval/<name>")`` resolve offline from this installation."""

from __future__ import annotations

from capeval.cli.arguments import add_json, print_result


def configure(parser) -> None:
    parser.add_argument("--modules-cache", help="evaluate's modules cache to install into (default $HF_MODULES_CACHE)")
    add_json(parser, "module → installed folder")


def run(args) -> int:
    from capeval.modules import install_modules

    installed = {f"capeval/{name}": str(path) for name, path in install_modules(args.modules_cache).items()}
    print_result(args, installed, "\n".join(f"{name} -> {path}" for name, path in installed.items()))
    return 0
