"""The ``tidegate`` command line."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from . import __version__
from .commands.help_text import Parser

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(prog="tidegate", description=__doc__)
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
        "replica",
        help="manage a running controller's replicas (add, drop, list), or run a replica process",
        add_help=False,
    )
    replica.add_argument("args", nargs=argparse.REMAINDER, help="see: tidegate replica --help")
    replica.set_defaults(func=_replica)
    return parser


def _sim(args: argparse.Namespace) -> int:
    from tidegate.sim.cli import main as sim_main

    return sim_main(args.args)


def _replica(args: argparse.Namespace) -> int:
    """``tidegate replica``: its first word says which; add/drop/list manage replicas, anything
    else runs a replica process; ``--help`` (or nothing) describes both."""
    from .commands.replicas import ACTIONS

    argv = list(args.args)
    if argv[:1] in ([a] for a in ACTIONS):
        from .commands.replicas import main as manage

        return manage(argv)
    if not argv or argv[:1] in (["-h"], ["--help"]):
        from .commands.replicas import help_text

        print(help_text(), end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    from tidegate.replica.main import main as replica_main

    return replica_main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `tidegate ... | head`: the reader has gone, nothing to say
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sim"]:
        return _sim(argparse.Namespace(args=argv[1:]))  # all of sim's options go to its parser
    if argv[:1] == ["replica"]:
        return _replica(argparse.Namespace(args=argv[1:]))  # likewise for replica's
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
