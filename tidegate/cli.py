"""The ``tidegate`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidegate", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tidegate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    from .commands import demo, register

    demo.add_parser(sub)
    register(sub)  # up and its clients: status, peek, append, DDL
    sim = sub.add_parser(
        "sim",
        help="deterministic simulation: run, campaign, replay, shrink, plot, scenario",
        add_help=False,
    )
    sim.add_argument("args", nargs=argparse.REMAINDER, help="see: tidegate sim --help")
    sim.set_defaults(func=_sim)
    replica = sub.add_parser(
        "replica", help="run a replica process (gRPC compute server)", add_help=False
    )
    replica.add_argument("args", nargs=argparse.REMAINDER, help="see: tidegate replica --help")
    replica.set_defaults(func=_replica)
    return parser


def _sim(args: argparse.Namespace) -> int:
    from tidegate.sim.cli import main as sim_main

    return sim_main(args.args)


def _replica(args: argparse.Namespace) -> int:
    from tidegate.replica.main import main as replica_main

    return replica_main(args.args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        return _sim(argparse.Namespace(args=argv[1:]))  # all of sim's options go to its parser
    if argv[:1] == ["replica"]:
        return _replica(argparse.Namespace(args=argv[1:]))  # likewise for the replica's
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
