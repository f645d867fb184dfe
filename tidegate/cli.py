"""The ``tidegate`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__

__all__ = ["main"]


def _demo(_args: argparse.Namespace) -> int:
    """Until the runtime lands: a deterministic simulation of the real controller and replicas.

    The end-to-end demo (two Spark replicas, tables, an index, a materialized
    view and a subscribe, a replica kill and a controller restart) arrives with
    the runtime; this runs what exists today and says so.
    """
    print(
        "tidegate demo: the end-to-end runtime demo (Spark replicas over gRPC) is not built yet.\n"
        "Running what exists: the spec's controller and replicas under faults in the simulator.\n"
    )
    from tidegate.sim.cli import main as sim_main

    code = sim_main(["run", "--seed", "1", "--scenario", "small"])
    print("\nmore: tidegate sim campaign --seeds 1..50 --jobs 2 ; see README.md for the spec tour")
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidegate", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tidegate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the demo (for now: a deterministic simulation)")
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
