"""``capeval install-modules``: make ``evaluate.load("capeval/<name>")`` resolve offline from this installation."""

from __future__ import annotations


def configure(parser) -> None:
    parser.add_argument("--modules-cache", help="evaluate's modules cache (default $HF_MODULES_CACHE)")


def run(args) -> int:
    from capeval.modules import install_modules

    for name, path in install_modules(args.modules_cache).items():
        print(f"capeval/{name} -> {path}")
    return 0
