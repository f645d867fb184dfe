"""``tidegate sim explore``: its arguments and its command (registered by ``tidegate.sim.cli``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_explore_parser"]

EXIT_OK, EXIT_VIOLATION = 0, 1


def _cmd_explore(args: argparse.Namespace) -> int:
    from .model import Bounds
    from .search import explore

    bounds = Bounds(
        replicas=args.replicas,
        collections=args.collections,
        commands=args.commands,
        faults=args.faults,
        ticks=args.ticks,
        stale_responses=not args.no_stale_responses,
    )
    result = explore(
        bounds,
        depth=args.depth,
        time_budget=args.time_budget,
        symmetry=not args.no_symmetry,
        stop_at_first=not args.all_violations,
        mutant=args.mutant,
    )
    if args.json:
        print(json.dumps(result.as_dict(), indent=2, default=str))
    else:
        print(result.summary())
    return EXIT_OK if result.ok else EXIT_VIOLATION


def _positive(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def add_explore_parser(sub: Any) -> None:
    """Add the ``explore`` subcommand to ``tidegate sim``'s subparsers."""
    from ..mutants import EXPLORER_MUTANTS, mutant_names

    names = [*mutant_names(), *EXPLORER_MUTANTS]
    p = sub.add_parser(
        "explore",
        help="explore every interleaving of the spec's controller, protocol sessions and "
        "replica cores for a small configuration, checking the invariants at each state",
    )
    p.add_argument("--replicas", type=int, choices=(1, 2, 3), default=2)
    p.add_argument("--collections", type=int, choices=(1, 2, 3), default=2, help="tables")
    p.add_argument(
        "--commands",
        type=_positive,
        default=2,
        help="client commands per path (create an index, peek, cancel, allow compaction, drop)",
    )
    p.add_argument(
        "--faults", type=_positive, default=1, help="replica crashes and disconnects per path"
    )
    p.add_argument("--ticks", type=_positive, default=1, help="times the tables advance, per path")
    p.add_argument("--depth", type=_positive, help="cut paths longer than this many actions")
    p.add_argument(
        "--time-budget", type=float, default=60.0, metavar="SECONDS", help="stop after this long"
    )
    p.add_argument(
        "--no-symmetry", action="store_true", help="do not identify states up to replica names"
    )
    p.add_argument(
        "--no-stale-responses",
        action="store_true",
        help="drop a closed connection's responses instead of delivering them late",
    )
    p.add_argument("--all-violations", action="store_true", help="go on after the first violation")
    p.add_argument("--mutant", choices=names, metavar="NAME", help="switch on a planted bug")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_cmd_explore)
