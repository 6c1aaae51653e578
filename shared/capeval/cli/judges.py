"""``capeval judges import-fleur DIR --output CACHE.jsonl``: FLEUR's published per-sample outputs as a judge cache
(replay it with ``capeval benchmark fleur <dataset> --replay CACHE.jsonl``)."""

from __future__ import annotations

from capeval.cli.arguments import add_json, print_result


def configure(parser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    fleur = sub.add_parser("import-fleur", help="read FLEUR's published results files (Yebin46/FLEUR@b9cd6c9 "
                                                "results/) into a new judge cache",
                           description="read FLEUR's published results files into a new judge cache")
    fleur.add_argument("directory", help="folder holding fleur_flickr8k_expert.txt, fleur_composite.txt, "
                                         "fleur_pascal_{HC,HI,HM,MM}.txt (those present are read)")
    fleur.add_argument("--output", required=True, metavar="CACHE", help="the judge cache to write (a new file)")
    add_json(fleur, "what was imported")


def run(args) -> int:
    from capeval.judges.published import import_fleur

    print_result(args, import_fleur(args.directory, args.output))
    return 0
