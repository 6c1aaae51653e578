"""``capeval fetch <metric|weight>…``: download (and convert) everything a metric or weight needs into the local
caches, for machines without internet access: fetch once, then copy the Hugging Face cache and capeval's cache."""

from __future__ import annotations

from capeval.cli.arguments import add_json, print_result


def configure(parser) -> None:
    parser.add_argument("names", nargs="+", metavar="NAME",
                        help="registered weight names (see `capeval weights`) or metric names (every weight the "
                             "metric loads with its default options)")
    parser.add_argument("--file", help="the official file, downloaded by hand, of the one converted weight named "
                                       "(its sha256 is checked when one is published)")
    parser.add_argument("--mirror", help="base URL serving the official files by name (default "
                                         "$CAPEVAL_UPSTREAM_MIRROR)")
    add_json(parser, "name → the local folders fetched")


def _fetch_metric(name: str):
    """Build the scorer on the CPU: every weight it resolves is fetched (and recorded)."""
    from capeval.core.hub import recording_resolutions
    from capeval.core.scoring import load_scorer

    with recording_resolutions() as loaded:
        load_scorer(name, device="cpu")
    return loaded


def run(args) -> int:
    import os

    from capeval.core.errors import InputError
    from capeval.core.hub import MIRROR_ENV, fetch_upstream, registered_weights, resolve
    from capeval.core.scoring import scorers

    weights, metrics = registered_weights(), scorers()
    unknown = [n for n in args.names if n not in weights and n not in metrics]
    if unknown:
        raise InputError(f"unknown weight or metric {unknown}; weights: {sorted(weights)}; metrics: {sorted(metrics)}")
    if args.file is not None and (len(args.names) != 1 or getattr(weights.get(args.names[0]), "upstream", None)
                                  is None):
        raise InputError("--file takes exactly one weight converted from an official file "
                         f"({sorted(n for n, s in weights.items() if s.upstream is not None)})")
    previous = os.environ.get(MIRROR_ENV)
    if args.mirror:
        os.environ[MIRROR_ENV] = args.mirror
    fetched = {}  # name -> {weight: local folder}
    try:
        for name in args.names:  # each printed when fetched (on stderr with --json)
            if args.file is not None:
                fetched[name] = {name: str(fetch_upstream(weights[name], file=args.file))}
            elif name in weights:
                fetched[name] = {name: str(resolve(name))}
            else:
                fetched[name] = {ref: str(directory) for ref, directory in _fetch_metric(name)}
            for ref, folder in fetched[name].items():
                print(f"{name}: {folder}" if ref == name else f"{name}: {ref}: {folder}")
    finally:
        if args.mirror and previous is None:
            del os.environ[MIRROR_ENV]
        elif args.mirror:
            os.environ[MIRROR_ENV] = previous
    if args.json:
        print_result(args, fetched)
    return 0
