"""The ``tidegate`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__

__all__ = ["main"]


def _demo(_args: argparse.Namespace) -> int:
    print(
        "tidegate demo: the end-to-end demo (two Spark replicas, tables, an index, a\n"
        "materialized view and a subscribe, a replica kill and a controller restart)\n"
        "arrives with the runtime issue. What works today is the executable model:\n"
        "  python -m pytest tests/spec   # the spec's laws and protocol rules\n"
        "  see README.md, 'A tour of the spec'."
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidegate", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tidegate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the end-to-end demo")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
