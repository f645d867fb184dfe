"""Group commit: single-row appends from many clients, and how soon each is visible.

    python bench/appends.py [--executor python|spark] [--seconds 5] [--clients 1,4,16,64]

With a table ``t (id, v)``, an index on ``id`` and a maintained view (count and
sum per ``v % 100``, indexed), for each number of concurrent clients:

(a) through the embedding API: ``Environment.append`` of one row per call,
    from that many tasks for ``--seconds``; appends/s;
(b) through the control endpoint of a ``tidegate up`` process: ``POST /append``
    of one row per request, from that many kept-alive connections (asyncio and h11
    in this process: see :func:`http_clients`); appends/s;
(c) freshness, during (a): a probe client appends one row, then waits for the
    index to pass the append's timestamp and peeks the row there; the time
    from ``append`` returning to the peek answering with the row, p50/p99.

With (a), the appends each commit carried and this process's CPU per commit (every
thread's: they share one GIL, so at 16 clients the commit cycle is about that, and it
is steadier than appends/s on a noisy machine; a cut shows there first).

Each level first runs ``WARMUP_S`` unmeasured. Appends that arrive while a commit
is in flight join the next one (one timestamp, one compare-and-append per table,
one consensus write), so throughput grows with concurrency. Targets:
>= 5,000 appends/s from 16 clients through ``Environment``, >= 1,000/s through the
control endpoint, freshness p99 <= 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio
import h11

from tidegate.dsl import Schema, col, count, sum_
from tidegate.runtime.environment import Environment

SCHEMA = Schema.of(("id", "int64", False), ("v", "int64", False))
TARGET_ENV, TARGET_HTTP, TARGET_FRESH_P99_MS = 5_000, 1_000, 100.0
WARMUP_S = 1.0
"""Each level first runs this long unmeasured (connections made, caches and the shard warm)."""
RESULTS: dict[str, float] = {}
"""What the summary prints: ``env16``, ``http16`` (appends/s), ``fresh99`` (ms)."""


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


async def define(env: Environment) -> None:
    await env.create_table("t", SCHEMA)
    await env.create_index(env.table("t"), ["id"], name="t_by_id")
    buckets = (
        env.table("t")
        .with_columns(bucket=col("v") % 100)
        .group_by("bucket")
        .agg(count(), sum_("v"))
    )
    await env.create_index(buckets, ["bucket"], name="buckets")


async def embedded(executor: str, clients: Sequence[int], seconds: float) -> None:
    ids = itertools.count()
    async with Environment.open(replicas=1, executor=executor) as env:
        await define(env)
        await env.wait_connected()
        await env.peek("t_by_id")  # hydrated
        for c in clients:
            done = [0]
            fresh: list[float] = []

            async def client(stop: float, done: list[int]) -> None:
                while time.perf_counter() < stop:
                    i = next(ids)
                    await env.append("t", [(i, i)])
                    done[0] += 1

            async def probe(stop: float, fresh: list[float]) -> None:
                while time.perf_counter() < stop:
                    i = next(ids)
                    ts = await env.append("t", [(i, i)])
                    t0 = time.perf_counter()
                    await env.wait_for("t_by_id", ts)
                    rows = await env.peek("t_by_id", ts, key=(i,))
                    assert rows == [((i, i), 1)], rows
                    fresh.append(time.perf_counter() - t0)
                    await anyio.sleep(0.01)

            async with anyio.create_task_group() as tg:  # warm-up, not counted
                for _ in range(c):
                    tg.start_soon(client, time.perf_counter() + WARMUP_S, [0])
            stop = time.perf_counter() + seconds
            t0 = time.perf_counter()
            cpu0, commits0 = time.process_time(), env.driver.commits
            async with anyio.create_task_group() as tg:
                for _ in range(c):
                    tg.start_soon(client, stop, done)
                tg.start_soon(probe, stop, fresh)
            rate = done[0] / (time.perf_counter() - t0)
            commits = max(1, env.driver.commits - commits0)
            cpu_ms = (time.process_time() - cpu0) / commits * 1e3
            if c == 16:
                RESULTS["env16"] = rate
            RESULTS["fresh99"] = max(RESULTS.get("fresh99", 0.0), pct(fresh, 0.99) * 1e3)
            mark = "  target >= 5,000/s" if c == 16 else ""
            print(
                f"(a) Environment.append, {c:3} clients: {rate:8.0f} appends/s{mark}\n"
                f"      {done[0] / commits:.1f} appends per commit; this process's CPU per commit "
                f"{cpu_ms:.2f} ms (all threads: one GIL, so about a commit's cycle)\n"
                f"(c)   freshness append -> visible in a peek: p50 {pct(fresh, 0.5) * 1e3:6.1f} ms"
                f"  p99 {pct(fresh, 0.99) * 1e3:6.1f} ms  (n={len(fresh)}, target p99 <= 100 ms)",
                flush=True,
            )


async def http_clients(
    address: str, token: str, clients: int, seconds: float, ids: Iterator[int]
) -> float:
    """``clients`` connections appending one row per ``POST /append`` for ``seconds``; appends/s.

    Each client is a task on one asyncio loop speaking HTTP/1.1 through h11 over a kept-alive
    connection, so the figure is the endpoint's: a client costs a few tens of microseconds
    per request, where a thread per client (``ControlClient``) held the GIL for longer than
    the endpoint took to answer.
    """
    host, port = address.rsplit(":", 1)
    done = 0
    stop = time.perf_counter() + seconds

    async def client() -> None:
        nonlocal done
        reader, writer = await asyncio.open_connection(host, int(port))
        conn = h11.Connection(h11.CLIENT)
        try:
            while time.perf_counter() < stop:
                i = next(ids)
                body = json.dumps({"table": "t", "rows": [[i, i]]}).encode()
                headers = [
                    ("host", host),
                    ("authorization", f"Bearer {token}"),
                    ("content-type", "application/json"),
                    ("content-length", str(len(body))),
                ]
                writer.write(
                    conn.send(h11.Request(method="POST", target="/append", headers=headers))
                    + conn.send(h11.Data(data=body))
                    + conn.send(h11.EndOfMessage())
                )
                status = 0
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        conn.receive_data(await reader.read(65536))
                    elif isinstance(event, h11.Response):
                        status = event.status_code
                    elif isinstance(event, h11.EndOfMessage):
                        break
                if status != 200:
                    raise SystemExit(f"POST /append answered {status}")
                conn.start_next_cycle()
                done += 1
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return done / (time.perf_counter() - t0)


def control_endpoint(executor: str, clients: Sequence[int], seconds: float) -> None:
    from tidegate.commands.control import ControlClient, ControlError

    with tempfile.TemporaryDirectory(prefix="tidegate-appends-") as tmp:
        data = Path(tmp) / "data"
        log = open(Path(tmp) / "up.log", "w")  # noqa: SIM115
        up = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tidegate",
                "up",
                "--data-dir",
                str(data),
                "--executor",
                executor,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 180
            while True:
                try:
                    api = ControlClient.for_data_dir(data)
                    api.call("GET", "/status")
                    break
                except (OSError, ValueError, KeyError, ControlError):
                    if time.monotonic() > deadline or up.poll() is not None:
                        raise SystemExit(f"tidegate up did not start; see {log.name}") from None
                    time.sleep(0.2)
            columns = [{"name": "id", "type": "int64"}, {"name": "v", "type": "int64"}]
            api.call("POST", "/create-table", {"name": "t", "columns": columns})
            api.call("POST", "/create-index", {"on": "t", "keys": ["id"], "name": "t_by_id"})
            ids = itertools.count(10**9)
            for c in clients:
                asyncio.run(http_clients(api.info.address, api.info.token, c, WARMUP_S, ids))
                rate = asyncio.run(http_clients(api.info.address, api.info.token, c, seconds, ids))
                if c == 16:
                    RESULTS["http16"] = rate
                mark = "  target >= 1,000/s" if c == 16 else ""
                print(
                    f"(b) control endpoint,     {c:3} clients: {rate:8.0f} appends/s{mark}",
                    flush=True,
                )
        finally:
            up.terminate()
            up.wait(60)
            log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--executor", choices=["python", "spark"], default="spark")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", default="1,4,16,64")
    args = ap.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    print(
        f"group commit, single-row appends, {args.executor} replica, {args.seconds:g} s per level"
    )
    anyio.run(embedded, args.executor, clients, args.seconds)
    control_endpoint(args.executor, clients, args.seconds)
    print("summary (targets):")
    for label, got, target in (
        ("Environment.append, 16 clients /s", RESULTS.get("env16"), f">= {TARGET_ENV:,}"),
        ("control endpoint, 16 clients /s", RESULTS.get("http16"), f">= {TARGET_HTTP:,}"),
        ("freshness p99 ms, worst level", RESULTS.get("fresh99"), f"<= {TARGET_FRESH_P99_MS:g}"),
    ):
        print(f"  {label:34s} {'-' if got is None else f'{got:,.0f}':>8}   target {target}")


if __name__ == "__main__":
    main()
