"""`tf-placeto examples`: the bundled examples:NAME graphs and graph families."""

from __future__ import annotations

from tf_placeto import choices
from tf_placeto.cli.common import EXIT_OK


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("examples", help="list the bundled examples:NAME graphs")
    parser.set_defaults(handler=run)


def run(args) -> int:
    for name, description in choices.examples().items():
        print(f"examples:{name:<14} {description}")
    for family, (members, description) in choices.example_families().items():
        print(f"examples:{family + '-K':<14} K = 0 .. {members - 1}, seed K: {description}")
    return EXIT_OK
