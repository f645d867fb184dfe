"""Benchmark: Frontiers responses through the compute controller.

One instance, 3 replicas, dataflows in chains of depth 3 (storage -> index ->
index -> index) over 100 storage collections, each index with a lag read
policy. Every round advances every storage collection by one tick and then
feeds, for every replica, one Frontiers response per collection (inputs
first). The per-response work must depend on a collection's dependencies, not
on how many collections exist: the two sizes are printed side by side.

    python bench/controller.py [--rounds N]
"""

from __future__ import annotations

import argparse
import gc
import time

from tidegate.spec.compute import ComputeController, InMemoryStorage
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.responses import Frontiers
from tidegate.spec.testing.controller import index_dataflow

STORAGE = 100
DEPTH = 3
REPLICAS = ("r1", "r2", "r3")


def build(dataflows: int) -> tuple[ComputeController, InMemoryStorage, list[GlobalId]]:
    storage = InMemoryStorage()
    sources = [GlobalId.user(i) for i in range(1, STORAGE + 1)]
    for s in sources:
        storage.add_collection(s, since=0, upper=1)
    ctl = ComputeController(storage)
    ctl.create_instance("c")
    ctl.initialization_complete()
    for r in REPLICAS:
        ctl.add_replica("c", r)
    order: list[GlobalId] = []
    next_id = 1000
    chains = dataflows // DEPTH
    for c in range(chains):
        prev: GlobalId | None = None
        for _ in range(DEPTH):
            gid = GlobalId.user(next_id)
            next_id += 1
            if prev is None:
                df = index_dataflow(gid, sources=[sources[c % STORAGE]], as_of=0)
            else:
                df = index_dataflow(gid, indexes=[prev], as_of=0)
            ctl.create_dataflow("c", df)
            ctl.set_read_policy("c", [(gid, LagWriteFrontier(2, 1))])
            order.append(gid)
            prev = gid
    ctl.drain()
    return ctl, storage, order


def run(dataflows: int, rounds: int, *, collector: bool = True) -> dict[str, float]:
    """Feed ``rounds`` of Frontiers responses; ``collector=False`` pauses CPython's cyclic GC meanwhile."""
    ctl, storage, order = build(dataflows)
    sources = storage.collections()
    responses = 0
    handle_time = 0.0
    handle_cpu = 0.0
    maintain_time = 0.0
    effects = 0
    handle, drain = ctl.handle_response, ctl.drain
    gc.collect()
    if not collector:
        gc.disable()
    for t in range(2, rounds + 2):
        upper = Antichain([t])
        for s in sources:
            storage.advance_upper(s, upper)
        ctl.storage_frontiers_advanced(sources)
        drain()
        batch = [(r, Frontiers(gid, upper, upper, upper)) for r in REPLICAS for gid in order]
        start, cpu = time.perf_counter(), time.process_time()
        for replica, resp in batch:
            handle("c", replica, 1, resp)
            effects += len(drain())
        handle_time += time.perf_counter() - start
        handle_cpu += time.process_time() - cpu
        responses += len(batch)
        start = time.perf_counter()
        ctl.maintain()
        effects += len(drain())
        maintain_time += time.perf_counter() - start
    gc.enable()
    view = ctl.instance("c")
    return {
        "collections": float(len(order)),
        "responses": float(responses),
        "per_second": responses / handle_time,
        "per_cpu_second": responses / handle_cpu,
        "us_per_response": handle_time / responses * 1e6,
        "cpu_us_per_response": handle_cpu / responses * 1e6,
        "maintain_ms": maintain_time / rounds * 1e3,
        "effects": float(effects),
        "history": float(view.history_len()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    small = run(1_000, args.rounds)
    large = run(10_000, max(3, args.rounds // 4))
    print(
        "compute controller: Frontiers responses, 3 replicas, chains of depth 3 over 100 storage collections"
    )
    print(f"{'':28}{'1,000 dataflows':>18}{'10,000 dataflows':>18}")
    rows = [
        ("collections", "collections", "{:,.0f}"),
        ("responses processed", "responses", "{:,.0f}"),
        ("responses / s (wall)", "per_second", "{:,.0f}"),
        ("responses / CPU-s", "per_cpu_second", "{:,.0f}"),
        ("wall time / response (us)", "us_per_response", "{:.2f}"),
        ("CPU time / response (us)", "cpu_us_per_response", "{:.2f}"),
        ("maintain() per round (ms)", "maintain_ms", "{:.1f}"),
        ("history length at end", "history", "{:,.0f}"),
    ]
    for label, key, fmt in rows:
        print(f"{label:28}{fmt.format(small[key]):>18}{fmt.format(large[key]):>18}")
    ratio = large["cpu_us_per_response"] / small["cpu_us_per_response"]
    print(
        f"per-response CPU time ratio 10,000 / 1,000 collections: {ratio:.2f} (1.0 = independent of size)"
    )
    # CPython's cyclic collector walks the whole heap now and then, so its share grows with the
    # number of live objects; pausing it isolates the controller's own per-response work.
    small_nogc = run(1_000, args.rounds, collector=False)
    large_nogc = run(10_000, max(3, args.rounds // 4), collector=False)
    ratio_nogc = large_nogc["cpu_us_per_response"] / small_nogc["cpu_us_per_response"]
    print(
        f"the same with the cyclic GC paused: {small_nogc['cpu_us_per_response']:.2f} vs "
        f"{large_nogc['cpu_us_per_response']:.2f} us/response, ratio {ratio_nogc:.2f}"
    )
    target = 50_000
    for label, key in (("wall clock", "per_second"), ("CPU time", "per_cpu_second")):
        verdict = "meets" if small[key] >= target else "misses"
        print(f"target >= {target:,} responses/s at 1,000 dataflows ({label}): {verdict}")
    print("(wall-clock figures drop when other processes share the cores; CPU time does not)")


if __name__ == "__main__":
    main()
