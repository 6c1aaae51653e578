"""``capeval publish-spaces``: push every module folder as a Hugging Face Space."""

from __future__ import annotations

from capeval.core.errors import InputError


def configure(parser) -> None:
    parser.add_argument("--org", default="capeval")
    parser.add_argument("--modules", nargs="*", help="only these modules (default: all)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be pushed")


def run(args) -> int:
    """Push every module folder (card, script, app.py, requirements.txt) as a Gradio Space ``<org>/<name>``."""
    from huggingface_hub import HfApi

    from capeval.modules import available_modules

    modules = available_modules()
    names = args.modules or sorted(modules)
    unknown = [n for n in names if n not in modules]
    if unknown:
        raise InputError(f"unknown modules {unknown}; known: {sorted(modules)}")
    without_app = [n for n in names if not (modules[n] / "app.py").exists()]
    if without_app:
        raise InputError(f"modules without app.py cannot be Spaces: {without_app}")
    api = None if args.dry_run else HfApi(library_name="capeval")
    for name in names:
        repo_id = f"{args.org}/{name}"
        if api is None:
            print(f"would push {modules[name]} -> spaces/{repo_id}")
            continue
        api.create_repo(repo_id, repo_type="space", space_sdk="gradio", exist_ok=True)
        info = api.upload_folder(folder_path=str(modules[name]), repo_id=repo_id, repo_type="space",
                                 commit_message=f"capeval: publish {name}")
        print(f"pushed spaces/{repo_id} at {info.oid}")
    return 0
