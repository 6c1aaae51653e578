"""``capeval publish-spaces``: build every module folder into a Gradio Space that installs and starts on its own,
and push it (or, with ``--output DIR``, only write the Space folders under ``DIR``).

A Space folder holds the module's card (``README.md``, whose YAML pins the Gradio ``sdk_version``), script,
``app.py``, ``packages.txt`` (the Debian packages the Hub installs with apt: every module folder declares its own,
an empty file when it needs none; ``default-jre-headless`` only for a Space that scores SPICE),
the built capeval wheel and a ``requirements.txt`` whose capeval line installs that wheel by URL:
the Hub installs ``requirements.txt`` before it copies the repository into the image, so a relative path would
not exist yet; the wheel is fetched from the Space repository itself (``resolve/main/<wheel>``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

from capeval.cli.arguments import add_json, print_result
from capeval.core.errors import InputError

WHEEL_URL = "https://huggingface.co/spaces/{repo_id}/resolve/main/{wheel}"
_CAPEVAL_LINE = re.compile(r"^capeval(\[[\w,\s-]+\])?\s*$")
_DEBIAN_PACKAGE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_YAML_FIELD = re.compile(r"^(sdk_version|python_version|app_file):\s*(\S+)\s*$", re.M)


def configure(parser) -> None:
    parser.add_argument("--org", default="capeval", help="the Hub organisation of the Spaces (default: capeval)")
    parser.add_argument("--modules", nargs="*", help="only these modules (default: all)")
    parser.add_argument("--output", metavar="DIR",
                        help="write the Space folders under DIR/<name> and push nothing (default: build them in a "
                             "temporary folder and push each)")
    parser.add_argument("--wheel", help="a built capeval wheel to ship (default: build one from this checkout)")
    parser.add_argument("--wheel-url", default=WHEEL_URL,
                        help="where a Space's requirements.txt fetches the wheel; {repo_id}, {name} and {wheel} are "
                             f"filled in (default: the Space repository's own copy, {WHEEL_URL})")
    add_json(parser, "module → the Space folder written, or the Space pushed and its revision")


def card_fields(readme: Path) -> Dict[str, str]:
    """``sdk_version``, ``python_version`` and ``app_file`` from a card's YAML header (quotes stripped)."""
    text = readme.read_text(encoding="utf-8")
    if not text.startswith("---\n") or "\n---" not in text[4:]:
        raise InputError(f"{readme}: no YAML header")
    header = text[4:text.index("\n---", 4)]
    return {key: value.strip("'\"") for key, value in _YAML_FIELD.findall(header)}


def build_wheel(out_dir: Path) -> Path:
    """Build capeval's wheel from the source checkout this package runs from."""
    from capeval.modules import modules_root

    root = modules_root()
    if not (root / "setup.cfg").is_file():
        raise InputError("capeval is not running from a source checkout: pass --wheel <built capeval wheel>")
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(out_dir), str(root)], capture_output=True, text=True)
    wheels = sorted(out_dir.glob("capeval-*.whl"))
    if run.returncode != 0 or len(wheels) != 1:
        raise InputError(f"building the capeval wheel failed: {run.stderr[-2000:]}")
    return wheels[0]


def space_requirements(module_requirements: str, wheel_url: str) -> str:
    """The module's ``requirements.txt`` with its ``capeval[extras]`` line pointing at the shipped wheel."""
    lines, found = [], False
    for line in module_requirements.splitlines():
        match = _CAPEVAL_LINE.match(line.strip())
        if match:
            lines.append(f"capeval{match.group(1) or ''} @ {wheel_url}")
            found = True
        elif line.strip():
            lines.append(line.strip())
    if not found:
        raise InputError(f"requirements.txt names no capeval line: {module_requirements!r}")
    return "\n".join(lines) + "\n"


def system_packages(module: Path) -> List[str]:
    """The Debian packages a module folder declares in ``packages.txt``, one per line (an empty file: none)."""
    path = module / "packages.txt"
    if not path.is_file():
        raise InputError(f"{path} is missing: every module declares its system packages (an empty file if none)")
    names = path.read_text(encoding="utf-8").split()
    bad = [name for name in names if not _DEBIAN_PACKAGE.match(name)]
    if bad:
        raise InputError(f"{path}: not Debian package names: {bad}")
    return names


def write_space(name: str, module: Path, target: Path, wheel: Path, wheel_url: str) -> Path:
    """Write the Space folder of module ``name`` (its folder ``module``) into ``target``."""
    fields = card_fields(module / "README.md")
    missing = [key for key in ("sdk_version", "python_version", "app_file") if key not in fields]
    if missing:
        raise InputError(f"{module / 'README.md'}: the YAML header lacks {missing}")
    if not (module / fields["app_file"]).is_file():
        raise InputError(f"{name}: app_file {fields['app_file']} is missing: modules without an app cannot be Spaces")
    packages = system_packages(module)
    target.mkdir(parents=True, exist_ok=True)
    (target / "packages.txt").write_text("".join(f"{name}\n" for name in packages), encoding="utf-8")
    for path in sorted(module.iterdir()):
        if path.is_file() and path.suffix in (".py", ".md") and path.name != "__init__.py":
            shutil.copy2(path, target / path.name)
    shutil.copy2(wheel, target / wheel.name)
    requirements = space_requirements((module / "requirements.txt").read_text(encoding="utf-8"), wheel_url)
    (target / "requirements.txt").write_text(requirements, encoding="utf-8")
    return target


def run(args) -> int:
    """Build the Space folder of every module (or ``--modules``) and push it as the Gradio Space ``<org>/<name>``."""
    from capeval.modules import available_modules

    modules = available_modules()
    names = args.modules or sorted(modules)
    unknown = [n for n in names if n not in modules]
    if unknown:
        raise InputError(f"unknown modules {unknown}; known: {sorted(modules)}")
    with tempfile.TemporaryDirectory(prefix="capeval-spaces-") as scratch:
        wheel = Path(args.wheel) if args.wheel else build_wheel(Path(scratch) / "wheel")
        if not wheel.is_file() or not wheel.name.startswith("capeval-") or wheel.suffix != ".whl":
            raise InputError(f"not a capeval wheel: {wheel}")
        out = Path(args.output) if args.output else Path(scratch) / "spaces"
        folders = {}
        for name in names:
            repo_id = f"{args.org}/{name}"
            url = args.wheel_url.format(repo_id=repo_id, name=name, wheel=wheel.name)
            folders[name] = write_space(name, modules[name], out / name, wheel, url)
        if args.output:
            print_result(args, {name: {"folder": str(folder), "space": f"{args.org}/{name}"}
                                for name, folder in folders.items()},
                         "\n".join(f"wrote {folder} (would push to spaces/{args.org}/{name})"
                                   for name, folder in folders.items()))
            return 0
        pushed = _push(folders, args.org)
    if args.json:
        print_result(args, pushed)
    return 0


def _push(folders: Dict[str, Path], org: str) -> Dict[str, Dict[str, str]]:
    """Push each Space folder (each printed when pushed); module → its Space and revision."""
    from huggingface_hub import HfApi

    api = HfApi(library_name="capeval")
    pushed = {}
    for name, folder in folders.items():
        repo_id = f"{org}/{name}"
        api.create_repo(repo_id, repo_type="space", space_sdk="gradio", exist_ok=True)
        info = api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="space",
                                 commit_message=f"capeval: publish {name}")
        print(f"pushed spaces/{repo_id} at {info.oid}")
        pushed[name] = {"space": repo_id, "revision": info.oid}
    return pushed
