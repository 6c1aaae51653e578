"""``capeval weights``: every registered weight, where it comes from, what it is pinned to, whether it is cached
here (and whether that copy is tiny random test weights), and the command that fetches it. ``--check`` exits
non-zero while a hub weight follows a branch instead of a commit."""

from __future__ import annotations

from typing import Dict, List

from capeval.cli.arguments import print_result

UNPINNED = "unpinned"


def _source(spec) -> str:
    if spec.upstream is None:
        return f"hub {spec.repo_id}"
    upstream = spec.upstream
    where = upstream.url or f"{upstream.page} (manual download: no direct link)"
    return f"{upstream.filename} from {where}, converted with `capeval convert {upstream.converter}`"


def _pin(spec) -> str:
    if spec.upstream is not None:
        if spec.upstream.sha256:
            return f"sha256 {spec.upstream.sha256}"
        return f"{UNPINNED} (no published sha256; the file's sha256 is recorded at conversion)"
    if spec.pinned:
        return f"commit {spec.revision}"
    return f"{UNPINNED} (revision {spec.revision}; results record the commit loaded)"


def weight_rows(*, with_cache: bool = True) -> List[Dict[str, object]]:
    """One row per registered weight: ``name``, ``source``, ``pin``, ``fetch`` (and ``cached``: the local
    directory holding it, or None; ``tiny``: whether that copy is tiny random test weights)."""
    from capeval.core.constants import TINY_MARKER_FILE
    from capeval.core.hub import cached_location, fetch_command, registered_weights

    rows = []
    for name, spec in sorted(registered_weights().items()):
        row = {"name": name, "source": _source(spec), "pin": _pin(spec), "fetch": fetch_command(spec)}
        if with_cache:
            location = cached_location(spec)
            row["cached"] = str(location) if location is not None else None
            row["tiny"] = location is not None and (location / TINY_MARKER_FILE).exists()
        rows.append(row)
    return rows


def unpinned_hub_weights() -> List[str]:
    """Registered hub weights that follow a branch (``main``) instead of a commit."""
    from capeval.core.hub import registered_weights

    return sorted(name for name, spec in registered_weights().items() if spec.upstream is None and not spec.pinned)


def markdown_table() -> str:
    """The README's weights table (a test keeps the README equal to it)."""
    lines = ["| weight | source | pinned to | fetch |", "|---|---|---|---|"]
    for row in weight_rows(with_cache=False):
        lines.append(f"| `{row['name']}` | {row['source']} | {row['pin']} | `{row['fetch']}` |")
    return "\n".join(lines)


def configure(parser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print the weights as one JSON document (a list: one object "
                                                           "per weight) on stdout")
    group.add_argument("--markdown", action="store_true", help="the README's weights table (no cache column)")
    group.add_argument("--check", action="store_true", help="exit 1 while a hub weight is not pinned to a commit "
                                                            "(each is named)")


def _check() -> int:
    unpinned = unpinned_hub_weights()
    for name in unpinned:
        print(f"{name}: {UNPINNED}: follows a branch, not a commit")
    print(f"{len(unpinned)} hub weights unpinned" if unpinned else "every hub weight is pinned to a commit")
    return 1 if unpinned else 0


def run(args) -> int:
    if args.markdown:
        print(markdown_table())
        return 0
    if args.check:
        return _check()
    rows = weight_rows()
    if args.json:
        print_result(args, rows)
        return 0
    for row in rows:
        cached = f"cached here: {row['cached']}" if row["cached"] else f"not cached here; fetch: {row['fetch']}"
        if row["tiny"]:
            cached += " (TINY RANDOM TEST WEIGHTS written by capeval.testing: scores from them mean nothing)"
        print(f"{row['name']}\n    source: {row['source']}\n    pin:    {row['pin']}\n    {cached}")
    return 0
