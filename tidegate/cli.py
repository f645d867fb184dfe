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
    sim = sub.add_parser(
        "sim",
        help="deterministic simulation: run, campaign, replay, shrink, plot",
        add_help=False,
    )
    sim.add_argument("args", nargs=argparse.REMAINDER, help="see: tidegate sim --help")
    sim.set_defaults(func=_sim)
    return parser


def _sim(args: argparse.Namespace) -> int:
    from tidegate.sim.cli import main as sim_main

    return sim_main(args.args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        return _sim(argparse.Namespace(args=argv[1:]))  # all of sim's options go to its parser
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
