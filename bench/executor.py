"""Keyed-aggregate workload through the PythonExecutor (``python bench/executor.py``).

K = 10,000 keys; 50 steps of 20,000 updates each, about 20% of them
retractions of earlier rows; the dataflow outputs count and sum per key into
an index that is compacted to the current time after every step. Prints the
per-step latency (median, p95), updates/s and peak memory, then repeats the
50 steps on an executor whose state was preloaded to 10x the size: work per
step should follow the change, not the state, so its median step latency should
stay within 1.5x (printed with a verdict; a benchmark reports, it does not fail
``make bench`` on a noisy figure). The comparison uses CPU
time per step, which other processes on a shared machine do not inflate;
wall-clock latencies are printed too. State that exists before the measured
steps is moved out of CPython's cyclic garbage collector (``gc.freeze``), whose
full collections otherwise scan the whole heap.

Options: ``--keys``, ``--steps``, ``--step-size``, ``--scale``, ``--seed``.
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import statistics
import sys
import time

from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import AggFunc, Aggregate, Get, Reduce, Schema
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport

SRC, OBJ, IDX = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
SCHEMA = Schema.of(("key", "int64", False), ("amount", "int64", False))


def dataflow() -> DataflowDescription:
    plan = Reduce(Get(SRC, SCHEMA), (0,), (Aggregate(AggFunc.COUNT), Aggregate(AggFunc.SUM, 1)))
    return DataflowDescription(
        "keyed_aggregate",
        source_imports=(SourceImport(SRC),),
        objects_to_build=(BuildDesc(OBJ, plan),),
        index_exports=(IndexExport(IDX, OBJ, (0,)),),
        as_of=Antichain([0]),
    )


class Workload:
    """Inserts of random (key, amount) rows and retractions of random live rows."""

    def __init__(self, keys: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.keys = keys
        self.live: list[tuple[int, int]] = []

    def inserts(self, n: int, t: int) -> list[tuple[tuple[int, int], int, int]]:
        rng, keys = self.rng, self.keys
        rows = [(rng.randrange(keys), rng.randrange(1, 1001)) for _ in range(n)]
        self.live.extend(rows)
        return [(r, t, 1) for r in rows]

    def step(self, size: int, t: int) -> list[tuple[tuple[int, int], int, int]]:
        n_retract = min(size // 5, len(self.live))
        out = []
        for _ in range(n_retract):
            i = self.rng.randrange(len(self.live))
            self.live[i], self.live[-1] = self.live[-1], self.live[i]
            out.append((self.live.pop(), t, -1))
        return out + self.inserts(size - n_retract, t)


def run_steps(
    ex: PythonExecutor, handle: int, wl: Workload, start: int, steps: int, size: int
) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU seconds of each step (feed + step + compaction)."""
    wall: list[float] = []
    cpu: list[float] = []
    # CPython's cyclic GC periodically scans every live container, so its cost
    # grows with the heap, not the change; keep the state built so far out of it.
    gc.collect()
    gc.freeze()
    for t in range(start, start + steps):
        ups = wl.step(size, t)
        w0, c0 = time.perf_counter(), time.process_time()
        ex.feed(handle, SRC, ups, Antichain([t + 1]))
        ex.step()
        ex.allow_compaction(IDX, Antichain([t]))
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, -(-len(xs) * 95 // 100) - 1)]


def report(name: str, lat: tuple[list[float], list[float]], size: int) -> float:
    """Print the figures; return the median CPU time per step."""
    wall, cpu = lat
    print(
        f"{name}: step wall median {statistics.median(wall) * 1e3:.1f} ms, p95 {_p95(wall) * 1e3:.1f} ms; "
        f"cpu median {statistics.median(cpu) * 1e3:.1f} ms, p95 {_p95(cpu) * 1e3:.1f} ms; "
        f"{size * len(wall) / sum(wall):,.0f} updates/s (wall); peak RSS {peak_mb():,.0f} MB"
    )
    return statistics.median(cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--step-size", type=int, default=20_000)
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    print(
        f"keyed aggregate: {a.keys:,} keys, {a.steps} steps x {a.step_size:,} updates (~20% retractions)"
    )

    wl = Workload(a.keys, a.seed)
    ex = PythonExecutor()
    h = ex.install(dataflow())
    base = run_steps(ex, h, wl, 1, a.steps, a.step_size)
    state = len(wl.live)
    base_med = report(f"base   (state {state:,} rows)", base, a.step_size)
    del ex

    wl_big = Workload(a.keys, a.seed + 1)
    big = PythonExecutor()
    hb = big.install(dataflow())
    target = state * a.scale
    chunk = 500_000
    t0 = time.perf_counter()
    while len(wl_big.live) < target:
        big.feed(hb, SRC, wl_big.inserts(min(chunk, target - len(wl_big.live)), 0), Antichain([0]))
    big.feed(hb, SRC, [], Antichain([1]))
    big.step()
    big.allow_compaction(IDX, Antichain([0]))
    print(f"preloaded {len(wl_big.live):,} rows in {time.perf_counter() - t0:.1f} s")
    scaled = run_steps(big, hb, wl_big, 1, a.steps, a.step_size)
    big_med = report(f"{a.scale}x    (state {len(wl_big.live):,} rows)", scaled, a.step_size)
    ratio = big_med / base_med
    verdict = "OK" if ratio <= 1.5 else "EXCEEDS 1.5x"
    print(f"median step CPU time at {a.scale}x state / base: {ratio:.2f}x ({verdict}; limit 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
