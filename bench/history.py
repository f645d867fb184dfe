"""Benchmark: the compute command history under a churn workload.

Pushes 1,000,000 commands of a legal churn workload (create, compact and drop
dataflows; peeks, answers and cancels; configuration updates) through a
CommandHistory, twice: once for each dataflow mix (``all`` shapes, and
``index``: single-index dataflows only). For each it prints

* push throughput, reductions included: wall clock, CPU time, and the best
  20,000-command batch (the machine is shared, so the spread says how noisy
  the figure is). The workload is generated outside the timed region;
* the largest history length seen;
* the largest ratio of history length to live items (live dataflows + peeks
  not yet cancelled) -- over the whole run, and once the workload has reached
  its target size -- the largest excess of the length over 4 x live items,
  and the largest ratio to live collections + peeks, all measured after every
  push on a second, untimed history fed the same commands. Target: <= 4 plus
  a small constant;
* the largest ratio of history length to the length of its own reduction,
  taken whenever the history is about to reduce (what the doubling rule bounds
  by about 2);
* the reduced history's commands per live dataflow at the end.

Usage: python bench/history.py [--commands N] [--live D] [--seed S] [--mix all|index|both]
"""

from __future__ import annotations

import argparse
import random
import time

from tidegate.spec.history import CommandHistory, reduce_commands
from tidegate.spec.protocol import ComputeCommand
from tidegate.spec.testing.history import DATAFLOW_KINDS, Answered, ChurnWorkload, DataflowShape

BATCH = 20_000


def run(commands: int, live_target: int, seed: int, kinds: tuple[DataflowShape, ...]) -> None:
    rng = random.Random(seed)
    workload = ChurnWorkload(rng.randrange, target_dataflows=live_target, kinds=kinds)
    timed = CommandHistory()
    probe = CommandHistory()
    pending: list[ComputeCommand] = list(workload.preamble())
    pushed = 0
    wall = cpu = 0.0
    best_batch = 0.0
    max_len = 0
    max_ratio_items = max_ratio_collections = max_compression = warm_ratio = 0.0
    max_excess = 0  # largest len - 4 * (live dataflows + peeks)
    warm = False  # once the workload first reaches its target live size

    while pushed < commands:
        # Generate a batch, remembering the live state after each command.
        batch: list[ComputeCommand] = pending
        items: list[int] = [1] * len(batch)
        collections: list[int] = [1] * len(batch)
        while len(batch) < BATCH:
            step = [e for e in workload.step() if not isinstance(e, Answered)]
            batch.extend(step)  # type: ignore[arg-type]
            live_items = workload.live_dataflow_count + workload.live_peek_count
            live_collections = workload.live_collection_count + workload.live_peek_count
            items.extend([live_items] * len(step))
            collections.extend([live_collections] * len(step))
        pending = []

        push = timed.push
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        for cmd in batch:
            push(cmd)
        batch_wall = time.perf_counter() - start_wall
        wall += batch_wall
        cpu += time.process_time() - start_cpu
        best_batch = max(best_batch, len(batch) / batch_wall)

        for cmd, live_items, live_collections in zip(batch, items, collections, strict=True):
            probe.push(cmd)
            n = len(probe)
            if n == 2 * probe.reduced_count:  # full: the next push reduces
                max_compression = max(max_compression, n / max(1, len(reduce_commands(probe))))
            max_len = max(max_len, n)
            max_ratio_items = max(max_ratio_items, n / max(1, live_items))
            max_excess = max(max_excess, n - 4 * live_items)
            warm = warm or live_items >= live_target
            if warm:
                warm_ratio = max(warm_ratio, n / max(1, live_items))
            max_ratio_collections = max(max_ratio_collections, n / max(1, live_collections))
        pushed += len(batch)

    final = list(timed)
    timed.reduce()
    per_dataflow = len(timed) / max(1, timed.live_dataflow_count)
    print(f"-- dataflow kinds: {', '.join(kinds)}; ~{live_target} live dataflows; seed {seed}")
    print(f"commands pushed:                      {pushed:,}")
    print(f"push throughput, wall clock:          {pushed / wall:,.0f} commands/s ({wall:.2f} s)")
    print(f"push throughput, CPU time:            {pushed / cpu:,.0f} commands/s ({cpu:.2f} s)")
    print(f"push throughput, best batch:          {best_batch:,.0f} commands/s")
    print(f"largest history length:               {max_len:,}")
    print(f"largest len / (live dataflows+peeks): {max_ratio_items:.2f}")
    print(f"  ... once {live_target} dataflows are live:  {warm_ratio:.2f}")
    print(f"largest len - 4 * (live dataflows+peeks): {max_excess:,}")
    print(f"largest len / (live collections+peeks): {max_ratio_collections:.2f}")
    print(f"largest len / len(reduced history):   {max_compression:.2f}")
    print(f"reduced commands per live dataflow:   {per_dataflow:.2f} (end of run)")
    print(
        f"end of run: history {len(final):,} commands, {timed.live_dataflow_count} live dataflows "
        f"(workload: {workload.live_dataflow_count}), {timed.live_peek_count} live peeks "
        f"(workload: {workload.live_peek_count})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--commands", type=int, default=1_000_000)
    parser.add_argument("--live", type=int, default=500, help="target number of live dataflows")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mix", choices=["all", "index", "both"], default="both")
    args = parser.parse_args()
    if args.mix in ("all", "both"):
        run(args.commands, args.live, args.seed, DATAFLOW_KINDS)
    if args.mix in ("index", "both"):
        run(args.commands, args.live, args.seed, ("index",))


if __name__ == "__main__":
    main()
