"""Benchmark of the simulator: speed of the standard scenario, campaigns, and bug-finding power.

The simulator runs the production runtime (``Environment``, catalog, oracle,
group commit, storage IO, the controller driver) among simulated replicas and
disks. This prints:

* the CPU time of a seed (``time.process_time`` around the run, so a busy machine
  changes it less than the wall time), median over seeds 1-10, of ``small`` and
  ``standard`` (targets, on a quiet 2-core machine: ``small`` <= 0.5 s,
  ``standard`` <= 1.5 s wall);
* one standard run (3 replicas, 15 dataflows over 3 tables, 60 + 10 virtual
  seconds, 5 faults): wall and CPU time, protocol messages per wall-second,
  virtual seconds per wall-second, kernel events, task wakeups, storage calls,
  messages sent as fragments;
* a short campaign on ``--jobs`` processes, extrapolated to 1,000 seeds
  (target <= 20 min on 2 cores);
* one ``sources`` run (the storage replica, simulated upstreams and sink
  targets beside the compute world): wall time, events, and how much the
  storage checkers judged (source batches, acknowledgements, sink targets);
* the reach: line coverage of ``runtime/``, ``replica/`` and ``spec/`` by package, from
  seeds 1-2 of every named scenario (``sim/reach.py`` names what is left out and why;
  target >= 85 % in scope);
* for every detectable mutant (``tidegate.sim.mutants``): the first seed of the
  scenario it names (``small`` for most) that catches it and how long that took, and the shrunk
  reproducer's size (faults + client actions; target <= 15) and shrinking time
  (target: median <= 60 s).

    python bench/sim.py [--cpu-seeds 10] [--seed 2] [--campaign 4] [--jobs 2] [--sources-seed 6]
                        [--mutants N] [--reach-seeds N] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

from tidegate.sim import RunOptions, run_simulation, standard
from tidegate.sim.mutants import MUTANTS, mutant_names
from tidegate.sim.scenario import SCENARIOS
from tidegate.sim.shrink import shrink


def _cpu_of(task: tuple[str, int]) -> tuple[str, int, bool, float, float]:
    """One seed of a scenario: its CPU and wall time."""
    name, seed = task
    cpu = time.process_time()
    r = run_simulation(RunOptions(seed=seed, scenario=SCENARIOS[name]()))
    return name, seed, r.ok, time.process_time() - cpu, r.stats.wall_s


def _cpu_per_seed(seeds: int, jobs: int) -> None:
    """Median CPU time per seed over seeds 1..``seeds`` of ``small`` and ``standard``."""
    tasks = [(name, seed) for name in ("small", "standard") for seed in range(1, seeds + 1)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        # A first run in each worker loads what a run imports lazily (not a seed's cost).
        list(pool.map(_cpu_of, [("small", 1)] * jobs))
        results = list(pool.map(_cpu_of, tasks))
    for name, target in (("small", 0.5), ("standard", 1.5)):
        mine = [r for r in results if r[0] == name]
        cpus = [cpu for *_, cpu, _wall in mine]
        failed = [seed for _, seed, ok, *_ in mine if not ok]
        print(
            f"{name} seeds 1..{seeds}: CPU per seed median {statistics.median(cpus):.2f} s "
            f"(min {min(cpus):.2f}, max {max(cpus):.2f}; target <= {target} s), "
            f"wall median {statistics.median(w for *_, w in mine):.2f} s on {jobs} processes, "
            f"failures: {failed or 'none'}"
        )


def _one(seed: int) -> tuple[int, bool, float, int, int]:
    r = run_simulation(RunOptions(seed=seed, scenario=standard()))
    return seed, r.ok, r.stats.wall_s, r.stats.messages, r.stats.virtual_ms


def _standard(seed: int, profile: bool) -> None:
    if profile:
        prof = cProfile.Profile()
        prof.enable()
    cpu = time.process_time()
    r = run_simulation(RunOptions(seed=seed, scenario=standard()))
    cpu = time.process_time() - cpu
    if profile:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    s = r.stats
    print(f"standard seed {seed}: {'ok' if r.ok else r.violation}")
    print(f"  wall time per run        {s.wall_s:8.2f} s      (target <= 1.5 s)")
    print(f"  cpu time of the run      {cpu:8.2f} s")
    print(f"  protocol messages        {s.messages:8d}")
    print(f"  messages per wall-second {s.messages / s.wall_s:8.0f}")
    print(f"  virtual-s per wall-s     {s.virtual_ms / 1000 / s.wall_s:8.2f}")
    print(f"  kernel events            {s.events:8d}   task wakeups {s.task_wakeups}")
    print(
        f"  messages in fragments    {r.sometimes.get('wire_fragmented_message', 0):8d}   "
        f"(frame size: {r.expanded_options['knobs']['frame_size']})"
    )
    print(f"  storage compare-and-sets {s.storage_calls:8d}")
    print(f"  peeks / appends / subscribe batches  {s.peeks} / {s.appends} / {s.subscribe_batches}")


def _sources(seed: int) -> None:
    r = run_simulation(RunOptions(seed=seed, scenario=SCENARIOS["sources"]()))
    s, k = r.stats, r.sometimes
    upstream = sum(1 for a in r.plan.actions or () if a.kind == "upstream")
    print(f"sources seed {seed}: {'ok' if r.ok else r.violation}")
    print(f"  wall time per run        {s.wall_s:8.2f} s   ({s.virtual_ms / 1000:.0f} virtual s)")
    print(f"  kernel events            {s.events:8d}   messages {s.messages}")
    print(f"  upstream transactions    {upstream:8d}")
    print(
        f"  judged: source batches {k.get('source_batch_checked', 0)} "
        f"(+{k.get('source_batch_checked_empty', 0)} empty), acknowledgements "
        f"{k.get('upstream_ack_checked', 0)}, sink targets {k.get('sink_target_checked', 0)}, "
        f"source reads {k.get('source_read_checked', 0)}"
    )


def _campaign(n: int, jobs: int) -> None:
    seeds = list(range(100, 100 + n))
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(_one, seeds))
    wall = time.perf_counter() - start
    failures = [seed for seed, ok, *_ in results if not ok]
    per_seed = wall / len(seeds)
    print(
        f"campaign of {len(seeds)} standard seeds on {jobs} processes: {wall:.1f} s "
        f"({per_seed:.2f} s/seed effective), failures: {failures or 'none'}"
    )
    print(
        f"  extrapolated 1,000-seed campaign on {jobs} cores: "
        f"{per_seed * 1000 / 60:.1f} min   (target <= 20 min)"
    )


def _reach(seeds: int, jobs: int) -> None:
    """Line coverage of the product from simulation alone: seeds 1..N of every named scenario
    (coverage.py in each worker), summed, by package (``sim/reach.py``)."""
    from tidegate.sim.campaign import run_campaign
    from tidegate.sim.reach import reach_report

    lines: dict[str, set[int]] = {}
    start = time.perf_counter()
    for name in sorted(SCENARIOS):
        report = run_campaign(range(1, seeds + 1), SCENARIOS[name](), jobs=jobs, lines=True)
        for f, ran in (report.lines() or {}).items():
            lines.setdefault(f, set()).update(ran)
    print(
        f"reach: lines of runtime/, replica/, spec/ run by seeds 1..{seeds} of every named "
        f"scenario ({time.perf_counter() - start:.0f} s; target >= 85% in scope):"
    )
    for line in reach_report(lines).splitlines():
        print("  " + line)


def _mutants(budget: int, shrink_seconds: float) -> None:
    print(
        f"mutants (their scenario, small for most; seeds 1..{budget}; "
        f"shrinking up to {shrink_seconds:.0f} s):"
    )
    sizes: list[int] = []
    times: list[float] = []
    cpus: list[float] = []
    for name in mutant_names(detectable=True):
        start = time.perf_counter()
        caught = None
        for seed in range(1, budget + 1):
            options = RunOptions(
                seed, SCENARIOS[MUTANTS[name].scenario](), mutant=name, trace_tail=20
            )
            r = run_simulation(options)
            if not r.ok:
                caught = (seed, r, options)
                break
        find = time.perf_counter() - start
        if caught is None:
            print(f"  {name:38s} not caught in {budget} seeds ({find:.0f} s)")
            continue
        seed, r, options = caught
        assert r.violation is not None
        cpu = time.process_time()
        result = shrink(options, max_seconds=shrink_seconds)
        cpu = time.process_time() - cpu
        sizes.append(result.size)
        times.append(result.wall_s)
        cpus.append(cpu)
        print(
            f"  {name:38s} seed {seed:3d} in {find:5.1f} s  [{r.violation.property}]  "
            f"shrunk {result.original_steps} -> {result.size} steps in {result.wall_s:5.1f} s "
            f"({cpu:5.1f} s CPU, {result.runs} runs)"
        )
    if sizes:
        print(
            f"  shrunk sizes: max {max(sizes)} steps (target <= 15); shrinking: median "
            f"{statistics.median(times):.1f} s, max {max(times):.1f} s (target median <= 60 s); "
            f"CPU median {statistics.median(cpus):.1f} s"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cpu-seeds", type=int, default=10, help="seeds 1..N of small and standard (0: skip)"
    )
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--campaign", type=int, default=4, help="seeds in the short campaign (0: skip)")
    ap.add_argument(
        "--sources-seed", type=int, default=6, help="seed of the sources run (-1: skip)"
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--mutants", type=int, default=40, help="seed budget per mutant (0: skip)")
    ap.add_argument("--shrink-seconds", type=float, default=120.0)
    ap.add_argument(
        "--reach-seeds", type=int, default=2, help="seeds per scenario measured (0: skip)"
    )
    ap.add_argument("--profile", action="store_true", help="cProfile the single run")
    args = ap.parse_args()
    if args.cpu_seeds > 0:
        _cpu_per_seed(args.cpu_seeds, args.jobs)
    _standard(args.seed, args.profile)
    if args.campaign > 0:
        _campaign(args.campaign, args.jobs)
    if args.sources_seed >= 0:
        _sources(args.sources_seed)
    if args.reach_seeds > 0:
        _reach(args.reach_seeds, args.jobs)
    if args.mutants > 0:
        _mutants(args.mutants, args.shrink_seconds)


if __name__ == "__main__":
    main()
