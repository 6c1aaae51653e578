"""``capeval push``: upload a converted/trained artifact folder to the Hugging Face Hub."""

from __future__ import annotations

from pathlib import Path

from capeval.cli.arguments import add_json, print_result
from capeval.core.errors import InputError


def configure(parser) -> None:
    parser.add_argument("folder", help="the artifact folder to upload (written by `capeval convert` or `capeval "
                                       "train`)")
    parser.add_argument("repo_id", help="the Hub repository to upload into (created when missing), e.g. org/name")
    parser.add_argument("--repo-type", default="model", choices=["model", "dataset", "space"],
                        help="kind of Hub repository (default: model)")
    parser.add_argument("--private", action="store_true", help="create the repository private")
    parser.add_argument("--message", default="Upload with capeval", help="the commit message")
    add_json(parser, "the repository and the revision to pin")


def run(args) -> int:
    from huggingface_hub import HfApi

    folder = Path(args.folder)
    if not folder.is_dir():
        raise InputError(f"not a directory: {folder}")
    api = HfApi(library_name="capeval")
    api.create_repo(args.repo_id, repo_type=args.repo_type, private=args.private, exist_ok=True)
    info = api.upload_folder(folder_path=str(folder), repo_id=args.repo_id, repo_type=args.repo_type,
                             commit_message=args.message)
    print_result(args, {"folder": str(folder), "repo_id": args.repo_id, "revision": info.oid},
                 f"pushed {folder} to {args.repo_id}; pin revision {info.oid}")
    return 0
