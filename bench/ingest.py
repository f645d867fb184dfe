"""PostgreSQL change data capture and the Iceberg sink, end to end.

    python bench/ingest.py [--seconds 5] [--rows 100000] [--rate 20000] [--txn-rows 1000]
                           [--url URL] [--profile DIR]

Starts its own PostgreSQL (``wal_level=logical``, ``tests/postgres_cluster.py``;
``--url`` names another) and an ``Environment`` on a temporary data directory
(a managed compute replica with the Python executor; the source starts the
managed storage replica process). Upstream is a table ``bench_cdc (id, txn,
name, amount)`` in a publication, ingested as source ``cdc``. A writer process
commits ``--txn-rows``-row transactions (``COPY``) and records the wall time
each ``COMMIT`` returned; every row carries its transaction's number. The
benchmark subscribes to ``cdc``'s ``txn`` column (consolidated: one update per
transaction and time) and records when each transaction becomes visible: the
wall time its rows arrive in the subscribe, i.e. once the source's upper has
passed their time and a peek there would show them.

Phases:

(a) **steady**: the writer offers ``--rate`` rows/s for ``--seconds``; sustained
    rows/s visible and commit-to-visible latency p50/p99 (targets: keep up with
    >= 20,000 rows/s, p99 <= 1 s);
(b) **saturation**: the writer commits ``--rows`` rows as fast as it can; rows/s
    from its first commit to the last row visible (the writer's own rate is
    printed: the figure cannot exceed it);
(c) **ceiling**: a plain psycopg ``COPY (SELECT ...) TO STDOUT`` of every row
    so far, parsed to Python tuples (rows/s);
(d) **Iceberg sink**: a sink of ``cdc`` into a table of a SQLite catalog with a
    local warehouse: first the backlog (the source's contents at the sink's
    as_of, rows/s until committed), then the steady load of (a) again with the
    sink running: rows committed per second, and per commit the lag from the
    oldest time it covers becoming visible in tidegate to the commit (p50/p99).

``--profile DIR`` records the storage replica process and this process (the
controller) with ``py-spy`` during (b), as collapsed stacks (``py-spy`` must be
installed in the venv; it is not a dependency). Scratch data lives in a
temporary directory. The default is quick (well under a minute); the issue's
figures are ``--seconds 30 --rows 500000``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import anyio
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

TARGET_ROWS_S, TARGET_P99_S = 20_000, 1.0
TABLE, PUBLICATION, SLOT = "bench_cdc", "bench_cdc_pub", "bench_cdc_slot"
RESULTS: dict[str, float] = {}


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))] if s else float("nan")


# -- upstream --------------------------------------------------------------------------------


def _writer(
    url: str, first_txn: int, txns: int, txn_rows: int, rate: float, out: Connection
) -> None:
    """Commit ``txns`` transactions of ``txn_rows`` rows (at ``rate`` rows/s; 0: flat out).

    Sends ``(start wall time, [(txn, commit wall time), ...])`` when done.
    """
    with psycopg.connect(url) as conn:
        interval = txn_rows / rate if rate else 0.0
        commits: list[tuple[int, float]] = []
        start, t0 = time.time(), time.perf_counter()
        for k in range(txns):
            if interval:
                delay = t0 + k * interval - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            txn = first_txn + k
            base = txn * txn_rows
            text = "".join(
                f"{base + i}\t{txn}\tname-{(base + i) % 997}\t{(base + i) * 0.25}\n"
                for i in range(txn_rows)
            )
            with conn.cursor().copy(f"COPY {TABLE} (id, txn, name, amount) FROM STDIN") as cp:
                cp.write(text)
            conn.commit()
            commits.append((txn, time.time()))
        out.send((start, commits))
        out.close()


class Writer:
    """A writer process (see :func:`_writer`); :meth:`result` waits for its commit times."""

    def __init__(self, url: str, first_txn: int, txns: int, txn_rows: int, rate: float) -> None:
        ctx = mp.get_context("spawn")
        self._recv, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(
            target=_writer, args=(url, first_txn, txns, txn_rows, rate, send), daemon=True
        )
        self.proc.start()
        send.close()

    async def result(self) -> tuple[float, list[tuple[int, float]]]:
        got: tuple[float, list[tuple[int, float]]] = await anyio.to_thread.run_sync(self._recv.recv)
        self.proc.join()
        return got


def setup_upstream(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {TABLE} (id bigint NOT NULL, txn bigint NOT NULL, name text, "
            "amount double precision)"
        )
        conn.execute(f"ALTER TABLE {TABLE} REPLICA IDENTITY FULL")
        conn.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {TABLE}")


def copy_ceiling(url: str) -> tuple[int, float]:
    """Rows and rows/s of a plain ``COPY ... TO STDOUT`` of the table, parsed to tuples."""
    with psycopg.connect(url) as conn:
        t0 = time.perf_counter()
        n = 0
        with conn.cursor().copy(
            f"COPY (SELECT id, txn, name, amount FROM {TABLE}) TO STDOUT"
        ) as cp:
            cp.set_types(["int8", "int8", "text", "float8"])
            for _row in cp.rows():
                n += 1
        return n, n / (time.perf_counter() - t0)


@contextlib.contextmanager
def upstream(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from postgres_cluster import LOGICAL_REPLICATION, postgres_cluster

    with postgres_cluster(LOGICAL_REPLICATION) as started:
        yield started


# -- what tidegate shows ------------------------------------------------------------------------


class Visibility:
    """Follows a subscribe of the source's ``txn`` column: rows per transaction, and when seen."""

    def __init__(self) -> None:
        self.rows: dict[int, int] = {}
        self.visible: dict[int, float] = {}  # txn -> wall time its first rows arrived
        self.total = 0
        self.progress: list[tuple[float, int]] = []  # (wall time received, batch upper)
        self.changed = anyio.Event()

    async def follow(self, sub: Any) -> None:
        async for batch in sub:
            now = time.time()
            for _t, (txn,), diff in batch.updates:
                self.rows[txn] = self.rows.get(txn, 0) + diff
                self.total += diff
                self.visible.setdefault(txn, now)
            if batch.upper.elements:
                self.progress.append((now, int(batch.upper.elements[0])))
            self.changed.set()
            self.changed = anyio.Event()

    async def until(self, total: int, timeout_s: float) -> None:
        with anyio.fail_after(timeout_s):
            while self.total < total:
                await self.changed.wait()

    def visible_at(self, t: int) -> float | None:
        """When the source's upper first passed time ``t`` (as the subscribe saw it)."""
        for wall, upper in self.progress:
            if upper > t:
                return wall
        return None


class IcebergCommits:
    """Polls the sink's Iceberg table and records each new snapshot: (wall ms, lower, upper, rows)."""

    def __init__(self, catalog_url: str, warehouse: str, ident: str) -> None:
        self.args = (catalog_url, warehouse, ident)
        self.seen: dict[int, tuple[int, int, int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> IcebergCommits:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.exceptions import NoSuchTableError

        from tidegate.runtime.sinks.iceberg import CATALOG_NAME

        catalog_url, warehouse, ident = self.args
        catalog = SqlCatalog(CATALOG_NAME, uri=catalog_url, warehouse=warehouse)
        while not self._stop.wait(0.1):
            try:
                table = catalog.load_table(ident)
            except NoSuchTableError:
                continue
            for s in table.metadata.snapshots:
                summary = s.summary
                if s.snapshot_id in self.seen or summary is None:
                    continue
                if "tidegate.upper" not in summary.additional_properties:
                    continue
                props = summary.additional_properties
                self.seen[s.snapshot_id] = (
                    s.timestamp_ms,
                    int(props["tidegate.lower"]),
                    int(props["tidegate.upper"]),
                    int(props.get("added-records", 0)),
                )
        catalog.engine.dispose()

    def commits(self) -> list[tuple[int, int, int, int]]:
        return sorted(self.seen.values(), key=lambda c: c[2])


async def until_committed(env: Any, polls: IcebergCommits, rows: int, timeout_s: float) -> None:
    """Wait until the sink's commits hold ``rows`` rows (or fail, saying where the sink is)."""
    deadline = time.monotonic() + timeout_s
    while sum(c[3] for c in polls.commits()) < rows:
        if time.monotonic() > deadline:
            raise SystemExit(
                f"the sink committed {sum(c[3] for c in polls.commits()):,} of {rows:,} rows in "
                f"{timeout_s:.0f} s; its status: {env.storage_status('cdc_out')}"
            )
        await anyio.sleep(0.1)


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- profiling ------------------------------------------------------------------------------


def start_profiles(
    out: Path, pids: dict[str, int], seconds: float
) -> list[subprocess.Popen[bytes]]:
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        raise SystemExit("--profile needs py-spy in the venv: .venv/bin/pip install py-spy")
    out.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                spy,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(max(1, round(seconds))),
                "--rate",
                "200",
                "--format",
                "raw",
                "--output",
                str(out / f"{name}.txt"),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, pid in pids.items()
    ]


# -- the run --------------------------------------------------------------------------------


async def run(args: argparse.Namespace, url: str, tmp: Path) -> None:
    from tidegate.runtime import Environment
    from tidegate.spec.storage import IcebergSink, PostgresSource

    txn_rows, rate = args.txn_rows, args.rate
    steady_txns = max(1, round(rate * args.seconds / txn_rows))
    sat_txns = max(1, args.rows // txn_rows)
    next_txn = 0
    setup_upstream(url)
    async with Environment.open(tmp / "data", replicas=1, executor="python") as env:
        t0 = time.perf_counter()
        await env.create_source("cdc", PostgresSource(url, TABLE, PUBLICATION, SLOT))
        await env.wait_connected()
        await env.wait_storage_connected(timeout_s=120)
        seen = Visibility()
        sub = await env.subscribe(env.table("cdc").select("txn"), buffer=100_000)
        print(f"  environment, source and subscribe ready in {time.perf_counter() - t0:.1f} s")
        async with anyio.create_task_group() as tg, sub:
            tg.start_soon(seen.follow, sub)

            # (a) steady
            w = Writer(url, next_txn, steady_txns, txn_rows, rate)
            next_txn += steady_txns
            _, commits = await w.result()
            await seen.until(next_txn * txn_rows, timeout_s=120 + args.seconds * 4)
            lat = [seen.visible[txn] - at for txn, at in commits]
            span = max(seen.visible[txn] for txn, _ in commits) - (commits[0][1] - txn_rows / rate)
            steady_rate = steady_txns * txn_rows / span
            RESULTS.update(steady=steady_rate, p50=pct(lat, 0.5), p99=pct(lat, 0.99))
            print(
                f"(a) steady, {rate:,.0f} rows/s offered for {args.seconds:g} s: "
                f"{steady_rate:8,.0f} rows/s visible  (target: keeps up, >= {TARGET_ROWS_S:,})\n"
                f"    commit -> visible: p50 {pct(lat, 0.5) * 1e3:6.0f} ms  "
                f"p99 {pct(lat, 0.99) * 1e3:6.0f} ms  max {max(lat) * 1e3:6.0f} ms  "
                f"(n={len(lat)} transactions, target p99 <= {TARGET_P99_S * 1e3:.0f} ms)",
                flush=True,
            )

            # (b) saturation
            assert env.orchestrator is not None
            st = env.orchestrator.status()
            pids = {
                "storage": st["storage"].pid,
                "compute": st["r1"].pid,
                "controller": os.getpid(),
            }
            procs = {k: v for k, v in pids.items() if v}
            profiles: list[subprocess.Popen[bytes]] = []
            if args.profile:
                profiles = start_profiles(Path(args.profile), procs, args.profile_s)
            cpu0 = {k: cpu_s(v) for k, v in procs.items()}
            w = Writer(url, next_txn, sat_txns, txn_rows, 0)
            next_txn += sat_txns
            start, commits = await w.result()
            write_rate = sat_txns * txn_rows / (commits[-1][1] - start)
            await seen.until(next_txn * txn_rows, timeout_s=120 + args.rows / 2_000)
            last = max(seen.visible[txn] for txn, _ in commits)
            sat_rate = sat_txns * txn_rows / (last - start)
            lat = [seen.visible[txn] - at for txn, at in commits]
            cpu = {k: (cpu_s(v) - cpu0[k]) / (sat_txns * txn_rows) * 1e6 for k, v in procs.items()}
            RESULTS["saturation"] = sat_rate
            RESULTS.update({f"cpu_{k}": v for k, v in cpu.items()})
            print(
                f"(b) saturation, {sat_txns * txn_rows:,} rows: {sat_rate:8,.0f} rows/s visible  "
                f"(target >= {TARGET_ROWS_S:,}; the writer committed {write_rate:,.0f} rows/s)\n"
                f"    commit -> visible under backlog: p50 {pct(lat, 0.5):.2f} s  "
                f"max {max(lat):.2f} s\n"
                f"    CPU per row: "
                + ", ".join(f"{k} {v:.1f} us" for k, v in cpu.items())
                + " (the storage replica's bounds its rows/s: 1e6 / us on one core)",
                flush=True,
            )
            for p in profiles:
                p.wait(60)

            # (c) ceiling
            n, copy_rate = copy_ceiling(url)
            RESULTS["copy"] = copy_rate
            print(f"(c) ceiling: psycopg COPY TO STDOUT of {n:,} rows: {copy_rate:8,.0f} rows/s")

            # (d) the Iceberg sink: the backlog, then the steady load again
            catalog_url = f"sqlite:///{tmp / 'iceberg.db'}"
            warehouse = f"file://{tmp / 'warehouse'}"
            polls = IcebergCommits(catalog_url, warehouse, "bench.cdc").start()
            try:
                backlog = seen.total
                t1 = time.time()
                await env.create_sink(
                    "cdc_out", "cdc", IcebergSink(catalog_url, warehouse, "bench.cdc")
                )
                await until_committed(env, polls, backlog, 120 + backlog / 2_000)
                done = max(c[0] for c in polls.commits()) / 1e3
                RESULTS["sink_backlog"] = backlog / (done - t1)
                first = len(polls.commits())
                print(
                    f"(d) Iceberg sink, backlog of {backlog:,} rows: "
                    f"{backlog / (done - t1):8,.0f} rows/s committed "
                    f"({first} commit(s), from create_sink)",
                    flush=True,
                )
                w = Writer(url, next_txn, steady_txns, txn_rows, rate)
                next_txn += steady_txns
                _, commits = await w.result()
                total = next_txn * txn_rows
                await seen.until(total, timeout_s=120 + args.seconds * 4)
                await until_committed(env, polls, total, 120 + args.seconds * 4)
            finally:
                polls.stop()
            later = [c for c in polls.commits()[first:] if c[3]]
            lags = []
            for wall_ms, lower, _upper, _rows in later:
                vis = seen.visible_at(lower)
                if vis is not None:
                    lags.append(wall_ms / 1e3 - vis)
            span = later[-1][0] / 1e3 - commits[0][1] if later else float("nan")
            sink_rate = sum(c[3] for c in later) / span
            RESULTS.update(sink=sink_rate, sink_p99=pct(lags, 0.99))
            print(
                f"    with {rate:,.0f} rows/s offered for {args.seconds:g} s: "
                f"{sink_rate:8,.0f} rows/s committed, {len(later)} commits; "
                f"visible -> committed lag p50 {pct(lags, 0.5) * 1e3:.0f} ms  "
                f"p99 {pct(lags, 0.99) * 1e3:.0f} ms",
                flush=True,
            )
            tg.cancel_scope.cancel()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each steady phase")
    ap.add_argument("--rows", type=int, default=100_000, help="rows of the saturation run")
    ap.add_argument("--rate", type=float, default=20_000, help="rows/s offered in steady phases")
    ap.add_argument("--txn-rows", type=int, default=1_000, help="rows per upstream transaction")
    ap.add_argument("--url", help="a PostgreSQL server with wal_level=logical (default: start one)")
    ap.add_argument("--profile", help="record py-spy profiles of the saturation run into DIR")
    ap.add_argument("--profile-s", type=float, default=8.0, help="seconds of each profile")
    args = ap.parse_args()
    print(
        f"PostgreSQL CDC into tidegate: {args.txn_rows}-row transactions; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    t0 = time.perf_counter()
    with upstream(args.url) as url, tempfile.TemporaryDirectory(prefix="tidegate-ingest-") as tmp:
        anyio.run(run, args, url, Path(tmp))
    print(f"summary (targets), {time.perf_counter() - t0:.0f} s in all:")
    for label, key, target, fmt in (
        ("CDC steady rows/s", "steady", f">= {TARGET_ROWS_S:,}", "{:,.0f}"),
        ("CDC saturation rows/s", "saturation", f">= {TARGET_ROWS_S:,}", "{:,.0f}"),
        ("commit -> visible p99 ms", "p99", f"<= {TARGET_P99_S * 1e3:.0f}", "{:,.0f}"),
        ("storage replica CPU us/row", "cpu_storage", "", "{:,.1f}"),
        ("COPY ceiling rows/s", "copy", "", "{:,.0f}"),
        ("Iceberg backlog rows/s", "sink_backlog", "", "{:,.0f}"),
        ("Iceberg steady rows/s", "sink", "", "{:,.0f}"),
        ("Iceberg lag p99 ms", "sink_p99", "", "{:,.0f}"),
    ):
        got = RESULTS.get(key)
        scale = 1e3 if key in ("p99", "sink_p99") else 1
        shown = "-" if got is None else fmt.format(got * scale)
        print(f"  {label:26s} {shown:>9}   {'target ' + target if target else ''}")
    print(f"  load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
