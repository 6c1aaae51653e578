"""Where the evaluate module folders (`metrics/<name>`, `measurements/<name>`) live: in the installed
package (``capeval/evaluate_modules``) or, from a source checkout, at the repository root."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

_PACKAGE = Path(__file__).resolve().parent
KINDS = ("metrics", "measurements")


def modules_root() -> Path:
    bundled = _PACKAGE / "evaluate_modules"
    if (bundled / "metrics").is_dir():
        return bundled
    return _PACKAGE.parents[1]  # shared/capeval -> repository root


def available_modules() -> Dict[str, Path]:
    """``{name: folder}`` of every evaluate module shipped with capeval."""
    root = modules_root()
    found = {}
    for kind in KINDS:
        for folder in sorted((root / kind).glob("*")):
            if (folder / f"{folder.name}.py").is_file():
                found[folder.name] = folder
    return found


def module_dir(name: str) -> Path:
    modules = available_modules()
    if name not in modules:
        raise KeyError(f"unknown capeval module {name!r}; known: {sorted(modules)}")
    return modules[name]
