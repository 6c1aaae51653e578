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


def install_modules(hf_modules_cache=None) -> Dict[str, Path]:
    """Copy every module into evaluate's dynamic-modules cache as ``capeval--<name>``, so that
    ``evaluate.load("capeval/<name>")`` resolves offline (``HF_EVALUATE_OFFLINE=1``) from this installation."""
    import hashlib
    import shutil

    from evaluate.loading import init_dynamic_modules

    dynamic = Path(init_dynamic_modules(hf_modules_cache=hf_modules_cache))
    installed = {}
    for name, folder in available_modules().items():
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".py", ".md", ".txt"))
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.name.encode() + path.read_bytes())
        parent = dynamic / "metrics" / f"capeval--{name}"
        target = parent / digest.hexdigest()
        target.mkdir(parents=True, exist_ok=True)
        for init in (dynamic / "metrics" / "__init__.py", parent / "__init__.py", target / "__init__.py"):
            init.touch()
        for path in files:
            shutil.copy2(path, target / path.name)
        (target / f"{name}.py").touch()  # newest copy wins when several are cached
        installed[name] = target
    return installed
