"""Benchmark of the simulator on the standard scenario (3 replicas, 10 dataflows, 60 s, 5 faults).

Prints the wall time of one run, protocol messages per wall second,
virtual seconds per wall second, and a short campaign on ``--jobs`` processes
extrapolated to 1,000 seeds. Targets (issue 6): >= 20,000 messages/wall-s,
one standard run <= 2 s wall, a 1,000-seed campaign <= 20 min on 2 cores.
The standard scenario ticks its tables every second (``Scenario.tick_ms``, as
Materialize and the runtime do by default); most protocol messages are the
frontier reports those ticks cause.

    python bench/sim.py [--seed 2] [--campaign 4] [--jobs 2] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from concurrent.futures import ProcessPoolExecutor

from tidegate.sim import RunOptions, run_simulation, standard


def _one(seed: int) -> tuple[int, bool, float, int, int]:
    r = run_simulation(RunOptions(seed=seed, scenario=standard()))
    return seed, r.ok, r.stats.wall_s, r.stats.messages, r.stats.virtual_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--campaign", type=int, default=4, help="seeds in the short campaign (0: skip)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--profile", action="store_true", help="cProfile the single run")
    args = ap.parse_args()

    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
    cpu = time.process_time()
    r = run_simulation(RunOptions(seed=args.seed, scenario=standard()))
    cpu = time.process_time() - cpu
    if args.profile:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    s = r.stats
    sc = standard()
    print(f"standard seed {args.seed}: {'ok' if r.ok else r.violation}")
    print(
        f"  table tick / replica step {sc.tick_ms} ms / {sc.replica_step_ms[0]}-{sc.replica_step_ms[1]} ms"
    )
    print(f"  wall time per run        {s.wall_s:8.2f} s      (target <= 2 s)")
    print(f"  cpu time of the run      {cpu:8.2f} s      (wall minus waiting on a shared machine)")
    print(f"  protocol messages        {s.messages:8d}")
    print(f"  messages per wall-second {s.messages / s.wall_s:8.0f}        (target >= 20000)")
    print(f"  messages per cpu-second  {s.messages / cpu:8.0f}")
    print(f"  virtual-s per wall-s     {s.virtual_ms / 1000 / s.wall_s:8.2f}")
    print(f"  kernel events            {s.events:8d}   ({s.events / s.wall_s:.0f}/s)")
    print(f"  peeks / appends / subscribe batches  {s.peeks} / {s.appends} / {s.subscribe_batches}")

    if args.campaign > 0:
        seeds = list(range(100, 100 + args.campaign))
        start = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(_one, seeds))
        wall = time.perf_counter() - start
        failures = [seed for seed, ok, *_ in results if not ok]
        per_seed = wall / len(seeds)
        print(
            f"campaign of {len(seeds)} seeds on {args.jobs} processes: {wall:.1f} s "
            f"({per_seed:.2f} s/seed effective), failures: {failures or 'none'}"
        )
        print(
            f"  extrapolated 1,000-seed campaign on {args.jobs} cores: "
            f"{per_seed * 1000 / 60:.1f} min   (target <= 20 min)"
        )


if __name__ == "__main__":
    main()
