"""Runtime benchmark: the product's latencies and throughput, end to end, on this machine.

    python bench/runtime.py [--quick] [--executor spark|python] [--rows N]

In one run (asyncio host loop):

(a) floor: raw gRPC ping-pong on an established stream -- ``Peek`` -> ``PeekResponse``
    against the scripted echo replica in another process;
(b) peek latency through the embedding API: ``Environment.peek`` -> controller ->
    replica -> back, a point lookup (one key) on an index over ``--rows`` rows;
(c) freshness: from ``append`` returning to the update being visible in a peek
    (waiting for the index to pass the append's write timestamp, then peeking there),
    on the index of the table itself and (c') on an index of a count/sum per bucket
    (100 buckets), which the executor computes incrementally;
(d) sustained append throughput into the indexed table (batches of 10,000 rows),
    and how long the index then takes to catch up.

Medians and p99. Targets: (b) <= 2x (a) at the median; (c) median
<= 2 s on local Spark; (d) >= 50,000 rows/s. ``--quick`` runs fewer iterations
(for smoke runs); the figures to quote come from a full run.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from _grpc_floor import echo_floor

from tidegate.dsl import Schema, col, count, sum_
from tidegate.runtime.transport.aio_thread import shared_aio_thread
from tidegate.spec.ids import GlobalId

BATCH = 10_000


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


def line(label: str, xs: Sequence[float], unit: str = "ms", scale: float = 1e3) -> str:
    return (
        f"{label:44s} median {statistics.median(xs) * scale:8.3f} {unit}   "
        f"p99 {pct(xs, 0.99) * scale:8.3f} {unit}   (n={len(xs)})"
    )


# -- (b) (c) (d) through the Environment ---------------------------------------------------------


async def wait_upper_beyond(env: Any, id: GlobalId, ts: int, timeout_s: float) -> float:
    """Seconds until ``id``'s upper passes ``ts``."""
    t0 = time.perf_counter()
    while True:
        _since, upper = env.frontiers(id)
        if not upper.less_equal(ts):
            return time.perf_counter() - t0
        if time.perf_counter() - t0 > timeout_s:
            raise TimeoutError(f"{id} did not pass {ts} in {timeout_s} s (upper {upper})")
        await anyio.sleep(0.005)


async def runtime_figures(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    from tidegate.runtime.environment import Environment
    from tidegate.runtime.orchestrator import Orchestrator

    figures: dict[str, Any] = {}
    t0 = time.perf_counter()
    orchestrator = Orchestrator(data_dir, executor=args.executor, spark_master=args.spark_master)
    async with (
        orchestrator,
        Environment.open(
            data_dir,
            replicas=1,
            executor=args.executor,
            spark_master=args.spark_master,
            orchestrator=orchestrator,
        ) as env,
    ):
        await env.create_table("kv", Schema.of(("k", "int64", False), ("v", "int64", False)))
        idx = await env.create_index(env.table("kv"), ["k"], name="kv_by_k")
        figures["start_s"] = time.perf_counter() - t0

        # load the index
        t0 = time.perf_counter()
        last = 0
        for start in range(0, args.rows, BATCH):
            rows = [((k, k * 7), 1) for k in range(start, min(args.rows, start + BATCH))]
            last = await env.append("kv", rows)
        await wait_upper_beyond(env, idx, last, 600)
        figures["load_s"] = time.perf_counter() - t0

        # (b) point lookups
        peeks = []
        for i in range(args.peeks + 20):
            k = (i * 7919) % args.rows
            t1 = time.perf_counter()
            got = await env.peek(idx, key=(k,))  # at the freshest complete time
            if i >= 20:
                peeks.append(time.perf_counter() - t1)
            if _rows(got) != [((k, k * 7), 1)]:
                raise SystemExit(f"point lookup of {k} returned {got!r}")
        figures["peek"] = peeks

        # (c) freshness
        fresh = []
        for i in range(args.fresh):
            k = args.rows + i
            ts = await env.append("kv", [((k, -k), 1)])
            t1 = time.perf_counter()
            await env.wait_for(idx, ts, timeout_s=120)
            got = await env.peek(idx, at=ts, key=(k,))
            fresh.append(time.perf_counter() - t1)
            if _rows(got) != [((k, -k), 1)]:
                raise SystemExit(f"fresh row {k} not visible at {ts}: {got!r}")
            await anyio.sleep(0.05)
        figures["fresh"] = fresh

        # (c') freshness through an aggregate the executor computes (count and sum per bucket)
        buckets = (
            env.table("kv").with_columns(b=col("k") % 100).group_by("b").agg(count(), sum_("v"))
        )
        agg = await env.create_index(buckets, ["b"], name="kv_buckets")
        await env.wait_for(agg, ts, timeout_s=600)
        fresh_agg = []
        for i in range(args.fresh):
            k = args.rows + args.fresh + i
            ts = await env.append("kv", [((k, 1), 1)])
            t1 = time.perf_counter()
            await env.wait_for(agg, ts, timeout_s=120)
            got = await env.peek(agg, at=ts, key=(k % 100,))
            fresh_agg.append(time.perf_counter() - t1)
            if len(_rows(got)) != 1:
                raise SystemExit(f"bucket {k % 100} missing at {ts}: {got!r}")
            await anyio.sleep(0.05)
        figures["fresh_agg"] = fresh_agg

        # (d) sustained appends
        base = args.rows + 2 * args.fresh
        sent = 0
        t1 = time.perf_counter()
        batch_s = []
        while time.perf_counter() - t1 < args.append_s:
            rows = [((base + sent + j, j), 1) for j in range(BATCH)]
            tb = time.perf_counter()
            last = await env.append("kv", rows)
            batch_s.append(time.perf_counter() - tb)
            sent += BATCH
        elapsed = time.perf_counter() - t1
        figures["append_rows_per_s"] = sent / elapsed
        figures["append_batch"] = batch_s
        figures["append_rows"] = sent
        figures["catch_up_s"] = await wait_upper_beyond(env, idx, last, 600)
    return figures


def _rows(got: Any) -> list[tuple[tuple[Any, ...], int]]:
    return [(tuple(r), int(n)) for r, n in getattr(got, "rows", got)]


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    p.add_argument("--executor", default="spark", choices=["spark", "python"])
    p.add_argument("--spark-master", default="local[1]")
    p.add_argument("--rows", type=int, default=100_000, help="rows in the indexed table")
    args = p.parse_args()
    args.pings = 300 if args.quick else 2000
    args.peeks = 50 if args.quick else 500
    args.fresh = 5 if args.quick else 30
    args.append_s = 3.0 if args.quick else 15.0

    floor = echo_floor(args.pings)
    print(line("(a) raw gRPC peek ping-pong (floor)", floor))

    with tempfile.TemporaryDirectory(prefix="tidegate-bench-") as d:
        f = anyio.run(runtime_figures, args, Path(d), backend="asyncio")
    shared_aio_thread().stop()
    print(
        f"    environment up {f['start_s']:.1f} s; {args.rows:,} rows loaded and indexed "
        f"in {f['load_s']:.1f} s ({args.executor})"
    )
    print(line(f"(b) peek, point lookup on a {args.rows:,}-row index", f["peek"]))
    ratio = statistics.median(f["peek"]) / statistics.median(floor)
    print(
        f"    (b)/(a) at the median: {ratio:.2f}x   target <= 2x:"
        f" {'met' if ratio <= 2 else 'MISSED'}"
    )
    print(line("(c) freshness, append returned -> visible", f["fresh"]))
    fresh_ok = statistics.median(f["fresh"]) <= 2.0
    print(f"    target median <= 2 s: {'met' if fresh_ok else 'MISSED'}")
    print(line("(c') freshness through a count/sum per bucket", f["fresh_agg"]))
    rate = f["append_rows_per_s"]
    print(
        f"(d) sustained appends, indexed table              {rate:,.0f} rows/s "
        f"({f['append_rows']:,} rows in batches of {BATCH:,}; batch median "
        f"{statistics.median(f['append_batch']) * 1e3:.1f} ms, p99 {pct(f['append_batch'], 0.99) * 1e3:.1f} ms)"
    )
    print(
        f"    target >= 50,000 rows/s: {'met' if rate >= 50_000 else 'MISSED'}; "
        f"the index caught up {f['catch_up_s']:.1f} s after the last append"
    )


if __name__ == "__main__":
    main()
