"""The PostgreSQL wire protocol beside a real PostgreSQL, same client, one run.

    python bench/pgwire.py [--rows 10000] [--lookups 2000] [--seconds 5] [--clients 64]
                           [--copy-rows 1000000] [--idle 500]

Starts ``tidegate up --executor python --sql-listen 127.0.0.1:0`` (a controller process and
a python-executor replica process) and a throw-away PostgreSQL (``tests/postgres_cluster.py``),
and measures each with psycopg 3, prepared statements and binary results:

* **point lookups**: ``SELECT v FROM <x> WHERE k = $1`` one after another, on tidegate an
  indexed view (``CREATE VIEW ... ; CREATE INDEX ON view (k)``: a key lookup in the index
  the replica holds), on PostgreSQL an indexed table (a primary key): p50 and p99 latency
  (targets: at most 2x PostgreSQL's p50, 3x its p99);
* **throughput**: CLIENTS connections doing point lookups at once for SECONDS seconds
  (asyncio, one process): lookups per second (target: at least half of PostgreSQL's);
* **COPY FROM STDIN** of COPY_ROWS rows (bigint, text, double) into a table, rows per
  second from the first byte sent to the command's completion (target: 100,000 rows/s);
* **idle connections**: IDLE connections opened and left idle, the server's resident memory
  before and after (tidegate: the controller process; PostgreSQL: the sum of the new
  backends' unique memory); target: at most 200 MB for tidegate.

Every figure is printed with PostgreSQL's beside it, and the client's CPU time beside the
wall time (the machine is shared: wall time is noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


@contextmanager
def tidegate_up(data: Path) -> Iterator[tuple[str, int, int]]:
    """``tidegate up`` serving SQL; yields (url, pid of the controller, port)."""
    from tidegate.commands.control import ControllerInfo

    log = open(data.parent / "up.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tidegate.cli",
            "up",
            "--data-dir",
            str(data),
            "--executor",
            "python",
            "--sql-listen",
            "127.0.0.1:0",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise SystemExit((data.parent / "up.log").read_text()[-3000:])
            try:
                info = ControllerInfo.read(data)
            except Exception:
                info = None
            if info is not None and info.sql:
                break
            if time.monotonic() > deadline:
                raise SystemExit("tidegate up did not serve SQL in 120 s")
            time.sleep(0.2)
        host, _, port = info.sql.rpartition(":")
        url = f"postgresql://materialize:{info.token}@{host}:{port}/materialize"
        yield url, proc.pid, int(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def setup(url: str, rows: int, tidegate: bool) -> None:
    with psycopg.connect(url, autocommit=True) as c:
        if tidegate:
            c.execute("CREATE TABLE base (k bigint NOT NULL, v text NOT NULL)")
        else:
            c.execute("CREATE TABLE base (k bigint PRIMARY KEY, v text NOT NULL)")
        with c.cursor().copy("COPY base FROM STDIN") as copy:
            for k in range(rows):
                copy.write_row((k, f"value-{k}"))
        if tidegate:
            c.execute("CREATE VIEW lookup AS SELECT k, v FROM base")
            c.execute("CREATE INDEX lookup_k ON lookup (k)")
            deadline = time.monotonic() + 120
            while True:  # until the index has caught up (the replica hydrated it)
                got = c.execute(
                    "SELECT v FROM lookup WHERE k = %s", [rows - 1], prepare=True, binary=True
                ).fetchall()
                if got == [(f"value-{rows - 1}",)]:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit("the index did not answer")
                time.sleep(0.2)
        else:
            c.execute("CREATE VIEW lookup AS SELECT k, v FROM base")
            c.execute("ANALYZE base")


def point_latency(url: str, rows: int, n: int) -> dict[str, float]:
    rng = random.Random(1)
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as c:
        cur = c.cursor(binary=True)
        sql = "SELECT v FROM lookup WHERE k = %s"
        for _ in range(min(200, n)):
            cur.execute(sql, [rng.randrange(rows)], prepare=True).fetchall()
        times = []
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        for _ in range(n):
            k = rng.randrange(rows)
            t0 = time.perf_counter()
            got = cur.execute(sql, [k], prepare=True).fetchall()
            times.append(time.perf_counter() - t0)
            assert got == [(f"value-{k}",)], got
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
    times.sort()
    return {
        "p50_ms": statistics.median(times) * 1000,
        "p99_ms": times[int(len(times) * 0.99) - 1] * 1000,
        "client_cpu_per_query_ms": cpu / n * 1000,
        "wall_per_query_ms": wall / n * 1000,
    }


async def _throughput(url: str, rows: int, clients: int, seconds: float) -> dict[str, float]:
    conns = [
        await psycopg.AsyncConnection.connect(url, autocommit=True, prepare_threshold=0)
        for _ in range(clients)
    ]
    count = 0
    stop = False

    async def worker(i: int, c: psycopg.AsyncConnection) -> None:
        nonlocal count
        rng = random.Random(i)
        cur = c.cursor(binary=True)
        sql = "SELECT v FROM lookup WHERE k = %s"
        await cur.execute(sql, [0], prepare=True)
        await cur.fetchall()
        while not stop:
            await cur.execute(sql, [rng.randrange(rows)], prepare=True)
            await cur.fetchall()
            count += 1

    tasks = [asyncio.create_task(worker(i, c)) for i, c in enumerate(conns)]
    await asyncio.sleep(1.0)  # warm up
    count = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    done, wall, cpu = count, time.perf_counter() - wall0, time.process_time() - cpu0
    stop = True
    await asyncio.gather(*tasks)
    for c in conns:
        await c.close()
    return {"qps": done / wall, "client_cpu_s": cpu, "wall_s": wall}


def throughput(url: str, rows: int, clients: int, seconds: float) -> dict[str, float]:
    return asyncio.run(_throughput(url, rows, clients, seconds))


def copy_in(url: str, n: int) -> dict[str, float]:
    chunk_rows = 10_000
    block = []
    for k in range(chunk_rows):
        block.append(f"{k}\tname-{k % 997}\t{k * 0.5}\n")
    text = "".join(block).encode()
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE copied (k bigint NOT NULL, name text, x double precision)")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        with c.cursor().copy("COPY copied FROM STDIN") as copy:
            sent = 0
            while sent < n:
                copy.write(text)
                sent += chunk_rows
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        got = c.execute("SELECT count(*) FROM copied").fetchone()
        assert got == (sent,), got
    return {"rows_per_s": sent / wall, "wall_s": wall, "client_cpu_s": cpu}


def idle_connections(url: str, n: int, server_pid: int, postgres: bool) -> dict[str, float]:
    server = psutil.Process(server_pid)
    before_children = {p.pid for p in server.children(recursive=True)}
    before = server.memory_info().rss
    conns = [psycopg.connect(url, autocommit=True) for _ in range(n)]
    try:
        for c in conns[:: max(1, n // 10)]:
            c.execute("SELECT 1 AS one FROM lookup LIMIT 1").fetchall()
        time.sleep(2.0)
        if postgres:
            new = [p for p in server.children(recursive=True) if p.pid not in before_children]
            uss = 0
            for p in new:
                with suppress(psutil.Error):
                    uss += p.memory_full_info().uss
            return {"mb": uss / 2**20, "per_connection_kb": uss / n / 1024, "processes": len(new)}
        after = server.memory_info().rss
        return {"mb": (after - before) / 2**20, "per_connection_kb": (after - before) / n / 1024}
    finally:
        for c in conns:
            c.close()


def postmaster_pid(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as c:
        backend = c.execute("SELECT pg_backend_pid()").fetchone()
    assert backend is not None
    return psutil.Process(backend[0]).ppid()


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rows", type=int, default=10_000)
    p.add_argument("--lookups", type=int, default=2_000)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--copy-rows", type=int, default=1_000_000)
    p.add_argument("--idle", type=int, default=500)
    p.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))

    from postgres_cluster import postgres_cluster

    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="tidegate-bench-pgwire-") as tmp:
        data = Path(tmp) / "data"
        with (
            postgres_cluster({"max_connections": str(args.idle + 100)}) as pg_url,
            tidegate_up(data) as (tg_url, tg_pid, _port),
        ):
            for label, url in (("tidegate", tg_url), ("postgresql", pg_url)):
                setup(url, args.rows, label == "tidegate")
            for label, url in (("tidegate", tg_url), ("postgresql", pg_url)):
                r: dict[str, dict[str, float]] = {}
                # idle connections first: a big COPY before would leave the heap grown
                pid = tg_pid if label == "tidegate" else postmaster_pid(url)
                r["idle"] = idle_connections(url, args.idle, pid, label == "postgresql")
                r["point"] = point_latency(url, args.rows, args.lookups)
                r["throughput"] = throughput(url, args.rows, args.clients, args.seconds)
                r["copy"] = copy_in(url, args.copy_rows)
                results[label] = r
                print(f"{label}: done", file=sys.stderr, flush=True)
    t, g = results["tidegate"], results["postgresql"]

    def row(name: str, ours: float, theirs: float, unit: str, ratio: str, target: str) -> None:
        print(f"{name:<42} {ours:>12.3f} {theirs:>12.3f} {unit:<8} {ratio:>10} {target}")

    print(f"\nwire protocol vs PostgreSQL (psycopg 3, prepared, binary; {os.cpu_count()} cores)")
    print(f"{'':<42} {'tidegate':>12} {'postgresql':>12} {'':<8} {'ratio':>10} target")
    for q in ("p50_ms", "p99_ms"):
        ratio = t["point"][q] / g["point"][q]
        row(
            f"point SELECT {q[:3]} (indexed view / table)",
            t["point"][q],
            g["point"][q],
            "ms",
            f"{ratio:.2f}x",
            "<= 2x" if q == "p50_ms" else "<= 3x",
        )
    row(
        "  client CPU per query",
        t["point"]["client_cpu_per_query_ms"],
        g["point"]["client_cpu_per_query_ms"],
        "ms",
        "",
        "",
    )
    share = t["throughput"]["qps"] / g["throughput"]["qps"]
    row(
        f"{args.clients} clients, point SELECTs",
        t["throughput"]["qps"],
        g["throughput"]["qps"],
        "q/s",
        f"{share:.0%}",
        ">= 50%",
    )
    row(
        "COPY FROM STDIN",
        t["copy"]["rows_per_s"],
        g["copy"]["rows_per_s"],
        "rows/s",
        f"{t['copy']['rows_per_s'] / g['copy']['rows_per_s']:.2f}x",
        ">= 100,000 rows/s",
    )
    row("  wall (s)", t["copy"]["wall_s"], g["copy"]["wall_s"], "s", "", "")
    row(
        f"{args.idle} idle connections",
        t["idle"]["mb"],
        g["idle"]["mb"],
        "MB",
        "",
        "<= 200 MB (tidegate: controller RSS; PostgreSQL: backends' USS)",
    )
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
