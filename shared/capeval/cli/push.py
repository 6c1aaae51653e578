"""``capeval push``: upload a converted/trained artifact folder to the Hugging Face Hub."""

from __future__ import annotations

from pathlib import Path

from capeval.core.errors import InputError


def configure(parser) -> None:
    parser.add_argument("out_dir")
    parser.add_argument("repo_id")
    parser.add_argument("--repo-type", default="model", choices=["model", "dataset", "space"])
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--message", default="Upload with capeval")


def run(args) -> int:
    from huggingface_hub import HfApi

    folder = Path(args.out_dir)
    if not folder.is_dir():
        raise InputError(f"not a directory: {folder}")
    api = HfApi(library_name="capeval")
    api.create_repo(args.repo_id, repo_type=args.repo_type, private=args.private, exist_ok=True)
    info = api.upload_folder(folder_path=str(folder), repo_id=args.repo_id, repo_type=args.repo_type,
                             commit_message=args.message)
    print(f"pushed {folder} to {args.repo_id}; pin revision {info.oid}")
    return 0
