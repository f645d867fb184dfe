"""Benchmark of the exhaustive explorer (``tidegate sim explore``): how far it gets, how fast.

Prints, with wall and CPU time beside each other (the machine may be busy: CPU time is
the steadier figure):

* small configurations explored to the end: distinct states with and without symmetry
  reduction and partial-order reduction;
* the default configuration (2 replicas, 2 tables, 2 client commands, 1 fault, 1 tick)
  for ``--seconds`` (default 60): states explored, distinct, transitions, the depth up to
  which every interleaving was covered and the deepest path reached, states per second;
* for the planted bugs the explorer is shown to find: the bounds, the length of the
  shortest path found and the states and CPU time it took.

    python bench/explore.py [--seconds 60] [--no-mutants]
"""

from __future__ import annotations

import argparse
import time

from tidegate.sim.explore import Bounds, explore

SMALL = {
    "1 command": Bounds(collections=1, commands=1, faults=0, ticks=0),
    "1 fault": Bounds(collections=1, commands=0, faults=1, ticks=0),
    "1 tick": Bounds(collections=1, commands=0, faults=0, ticks=1),
}

MUTANTS = [
    ("regressing_frontier", Bounds(collections=1, commands=1, faults=0, ticks=1)),
    ("peek_without_hold", Bounds(collections=1, commands=1, faults=0, ticks=1)),
    ("release_hold_before_cancel", Bounds(collections=1, commands=1, faults=0, ticks=1)),
    ("history_drops_live_peek", Bounds(collections=1, commands=1, faults=1, ticks=0)),
    ("accepts_stale_epoch", Bounds(collections=1, commands=0, faults=1, ticks=1)),
    ("rehydrates_from_reported_epoch", Bounds(collections=1, commands=0, faults=1, ticks=0)),
]


def _small() -> None:
    print("small configurations, explored to the end (2 replicas, 1 table):")
    print(f"  {'':<10} {'distinct':>9} {'no symmetry':>12} {'no POR':>8} {'depth':>6} {'CPU s':>6}")
    for name, bounds in SMALL.items():
        cpu = time.process_time()
        both = explore(bounds)
        spent = time.process_time() - cpu
        plain = explore(bounds, symmetry=False)
        full = explore(bounds, reduce=False)
        assert both.complete and plain.complete and full.complete
        print(
            f"  {name:<10} {both.distinct:>9} {plain.distinct:>12} {full.distinct:>8} "
            f"{both.max_depth:>6} {spent:>6.2f}"
        )


def _budget(seconds: float) -> None:
    bounds = Bounds()
    cpu = time.process_time()
    r = explore(bounds, time_budget=seconds)
    spent = time.process_time() - cpu
    reach = (
        f"complete ({r.max_depth} actions)"
        if r.complete
        else f"complete to depth {r.complete_depth}, deepest path {r.max_depth}"
    )
    print(
        f"default configuration ({bounds.replicas} replicas, {bounds.collections} tables, "
        f"{bounds.commands} commands, {bounds.faults} fault, {bounds.ticks} tick) in "
        f"{seconds:g} s: {r.states} states explored, {r.distinct} distinct, {r.transitions} "
        f"transitions, {reach}; {r.states / max(spent, 1e-9):.0f} states per CPU-second, "
        f"{r.states_per_s:.0f} per wall-second ({r.wall_s:.1f} s wall, {spent:.1f} s CPU)"
        + ("" if r.ok else f"; VIOLATION {r.findings[0].violation}")
    )


def _mutants() -> None:
    print("planted bugs:")
    for name, bounds in MUTANTS:
        cpu = time.process_time()
        r = explore(bounds, mutant=name, time_budget=120)
        spent = time.process_time() - cpu
        if r.findings:
            f = r.findings[0]
            print(
                f"  {name:<32} found: {len(f.path)} actions, {r.states} states, {spent:.1f} s "
                f"CPU ({f.violation.property})"
            )
        else:
            print(f"  {name:<32} SURVIVED {r.states} states, {spent:.1f} s CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="budget of the default run (0 skips it)"
    )
    parser.add_argument("--no-mutants", action="store_true", help="skip the planted bugs")
    args = parser.parse_args()
    _small()
    if args.seconds > 0:
        _budget(args.seconds)
    if not args.no_mutants:
        _mutants()


if __name__ == "__main__":
    main()
