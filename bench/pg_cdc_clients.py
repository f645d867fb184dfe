"""PostgreSQL change-data-capture clients, measured before one was chosen.

    python bench/pg_cdc_clients.py [--rows 20000] [--txn-rows 1000] [--clients a,b] [--url URL]

Ways to read a logical replication slot's ``pgoutput`` stream, each turning
every row into tidegate values with the same decoder (``_pgoutput`` and the
``_types`` parsers) and acking as it goes:

* ``psycopg2``: psycopg2's ``LogicalReplicationConnection`` streaming
  (``START_REPLICATION``, ``read_message``, ``send_feedback``); left out,
  with a note, unless ``psycopg2-binary`` is installed;
* ``libpq``: the same stream over psycopg 3's libpq binding (``psycopg.pq``),
  CopyBoth frames read with ``get_copy_data``, status updates written by hand;
* ``sql``: polling ``pg_logical_slot_peek_binary_changes`` over an ordinary
  psycopg 3 connection and advancing the slot after each poll
  (``pg_replication_slot_advance``), as a reader acking every poll would;
* ``reader``: tidegate's ``PostgresReader`` (the ``libpq`` client) end to end,
  batches of ``(row, offset, diff)`` updates, acking each batch.

Per client, on a 4-column table (bigint, text, double, timestamp): **drain**
-- rows/s reading ROWS rows committed beforehand in TXN_ROWS-row
transactions; **live** -- rows/s while a writer commits ROWS rows as fast as it
can (the writer's own rate without a slot is printed first: live rows/s cannot
exceed it), and the latency from sending each transaction's COMMIT to the
client holding its decoded rows (median, p99). Starts a throw-away cluster
(``tests/postgres_cluster.py``) unless ``--url`` names one with
``wal_level=logical``. The default is small enough for ``make bench``; the
issue's figures are ``--rows 200000``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import select
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg

from tidegate.runtime.sources.postgres import PostgresReader
from tidegate.runtime.sources.postgres._pgoutput import (
    PG_EPOCH_OFFSET_US,
    Commit,
    Insert,
    Keepalive,
    decode_frame,
    decode_message,
    standby_status_update,
)
from tidegate.runtime.sources.postgres._types import PARSERS
from tidegate.spec.plan.schema import ScalarType
from tidegate.spec.storage.connections import PostgresSource

PUBLICATION, TABLE = "bench_pub", "bench_rows"
PARSE = [
    PARSERS[t]
    for t in (ScalarType.INT64, ScalarType.STRING, ScalarType.FLOAT64, ScalarType.TIMESTAMP)
]


class Sink:
    """Counts decoded rows; records each transaction's latency from its COMMIT being sent."""

    def __init__(self, txn_rows: int, sent: dict[int, float]) -> None:
        self.rows = 0
        self.txn_rows = txn_rows
        self.sent = sent
        self.latencies: list[float] = []
        self.last_lsn = 0
        self._pending: list[tuple[object, ...]] = []

    def holds(self, first_id: int) -> None:
        """The client holds the rows of the transaction whose first row is ``first_id``."""
        sent = self.sent.get(first_id // self.txn_rows)
        if sent is not None:
            self.latencies.append(time.time() - sent)

    def payload(self, data: bytes) -> None:
        msg = decode_message(data)
        if isinstance(msg, Insert):
            self._pending.append(tuple(p(v) for p, v in zip(PARSE, msg.new, strict=True)))  # type: ignore[arg-type]
        elif isinstance(msg, Commit):
            if self._pending:
                self.holds(int(self._pending[0][0]))  # type: ignore[call-overload]
            self.rows += len(self._pending)
            self._pending = []
            self.last_lsn = msg.end_lsn


Reader = Callable[[str, str, Sink, Callable[[], bool]], None]


def _now_pg_us() -> int:
    return int(time.time() * 1e6) - PG_EPOCH_OFFSET_US


def read_psycopg2(url: str, slot: str, sink: Sink, until: Callable[[], bool]) -> None:
    import psycopg2  # type: ignore[import-untyped]
    import psycopg2.extras  # type: ignore[import-untyped]

    conn = psycopg2.connect(url, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    cur = conn.cursor()
    cur.start_replication(
        slot_name=slot,
        decode=False,
        options={"proto_version": "1", "publication_names": PUBLICATION},
    )
    while not until():
        msg = cur.read_message()
        if msg is None:
            select.select([conn], [], [], 0.1)
            continue
        sink.payload(msg.payload)
        if sink.last_lsn:
            cur.send_feedback(flush_lsn=sink.last_lsn)
    conn.close()


def read_libpq(url: str, slot: str, sink: Sink, until: Callable[[], bool]) -> None:
    from psycopg import pq

    conn = pq.PGconn.connect(f"{url}?replication=database".encode())
    if conn.status != pq.ConnStatus.OK:
        raise RuntimeError(conn.get_error_message())
    res = conn.exec_(
        f"START_REPLICATION SLOT {slot} LOGICAL 0/0 "
        f"(proto_version '1', publication_names '{PUBLICATION}')".encode()
    )
    if res.status != pq.ExecStatus.COPY_BOTH:
        raise RuntimeError(conn.get_error_message())
    acked = 0
    while not until():
        n, data = conn.get_copy_data(1)
        if n == 0:
            select.select([conn.socket], [], [], 0.1)
            conn.consume_input()
            continue
        if n < 0:
            raise RuntimeError(conn.get_error_message())
        if data[0] == 0x77:  # XLogData: a 25-byte header, then one pgoutput message
            sink.payload(bytes(data[25:]))
            if sink.last_lsn > acked:
                acked = sink.last_lsn
                conn.put_copy_data(standby_status_update(acked, acked, acked, _now_pg_us()))
                conn.flush()
            continue
        frame = decode_frame(bytes(data))
        if isinstance(frame, Keepalive) and frame.reply:
            conn.put_copy_data(standby_status_update(acked, acked, acked, _now_pg_us()))
            conn.flush()
    conn.finish()


def read_sql(url: str, slot: str, sink: Sink, until: Callable[[], bool]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        while not until():
            rows = conn.execute(
                "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes("
                "%s, NULL, 10000, 'proto_version', '1', 'publication_names', %s)",
                (slot, PUBLICATION),
            ).fetchall()
            for _lsn, data in rows:
                sink.payload(data)
            if rows:
                conn.execute(
                    "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, rows[-1][0])
                )
            else:
                time.sleep(0.01)


def read_reader(url: str, slot: str, sink: Sink, until: Callable[[], bool]) -> None:
    with PostgresReader(PostgresSource(url, TABLE, PUBLICATION, slot)) as reader:
        reader.start(0)
        while not until():
            batch = reader.poll(0.1)
            if batch is None:
                continue
            first = -1
            for row, offset, _diff in batch.updates:
                if offset != first:
                    first = offset
                    sink.holds(row[0])
            sink.rows += len(batch.updates)
            reader.ack(batch.upper)


CLIENTS: dict[str, Reader] = {
    "psycopg2": read_psycopg2,
    "libpq": read_libpq,
    "sql": read_sql,
    "reader": read_reader,
}


def write_rows(url: str, rows: int, txn_rows: int, sent: dict[int, float]) -> None:
    """Commit ``rows`` rows in ``txn_rows``-row transactions (COPY); note when each COMMIT went."""
    ts = dt.datetime(2024, 1, 1)
    with psycopg.connect(url) as conn:
        for start in range(0, rows, txn_rows):
            with conn.cursor().copy(f"COPY {TABLE} FROM STDIN") as copy:
                for i in range(start, min(start + txn_rows, rows)):
                    copy.write_row((i, f"name-{i}", i * 0.5, ts))
            sent[start // txn_rows] = time.time()
            conn.commit()


@contextlib.contextmanager
def fresh_slot(url: str, name: str, *, create: bool) -> Iterator[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {TABLE}")
        if create:
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
    try:
        yield name
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(100):
                try:
                    conn.execute(
                        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                        "WHERE slot_name = %s",
                        (name,),
                    )
                    break
                except psycopg.errors.ObjectInUse:
                    time.sleep(0.1)


def measure(url: str, client: str, rows: int, txn_rows: int) -> dict[str, float]:
    read = CLIENTS[client]
    create = client != "reader"  # the reader creates its slot (with a snapshot) itself
    out: dict[str, float] = {}
    with fresh_slot(url, f"bench_{client}_drain", create=create) as slot:
        if create:
            write_rows(url, rows, txn_rows, {})
            sink = Sink(txn_rows, {})
            t0 = time.perf_counter()
            read(url, slot, sink, lambda: sink.rows >= rows)
        else:  # the reader makes its slot (with an empty snapshot), then resumes past it
            with PostgresReader(PostgresSource(url, TABLE, PUBLICATION, slot)) as reader:
                reader.start(0)
            write_rows(url, rows, txn_rows, {})
            sink = Sink(txn_rows, {})
            t0 = time.perf_counter()
            _resume_reader(url, slot, sink, rows)
        out["drain_rows_s"] = rows / (time.perf_counter() - t0)
    with fresh_slot(url, f"bench_{client}_live", create=create) as slot:
        sent: dict[int, float] = {}
        sink = Sink(txn_rows, sent)
        thread = threading.Thread(target=read, args=(url, slot, sink, lambda: sink.rows >= rows))
        t0 = time.perf_counter()
        thread.start()
        _wait_for_slot(url, slot)
        write_rows(url, rows, txn_rows, sent)
        thread.join()
        out["live_rows_s"] = rows / (time.perf_counter() - t0)
        lat = sorted(sink.latencies)
        out["latency_median_ms"] = statistics.median(lat) * 1e3
        out["latency_p99_ms"] = lat[max(0, int(len(lat) * 0.99) - 1)] * 1e3
    return out


def _wait_for_slot(url: str, slot: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        while not conn.execute(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND active", (slot,)
        ).fetchone():
            time.sleep(0.01)


def _resume_reader(url: str, slot: str, sink: Sink, rows: int) -> None:
    """Drain a backlog with a reader resuming (past its empty snapshot) on an existing slot."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        ).fetchone()
    assert row is not None
    with PostgresReader(PostgresSource(url, TABLE, PUBLICATION, slot)) as reader:
        reader.start(int(row[0]) + 1)
        while sink.rows < rows:
            batch = reader.poll(0.1)
            if batch is not None:
                sink.rows += len(batch.updates)
                reader.ack(batch.upper)


def run(url: str, rows: int, txn_rows: int, clients: list[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(
            f"CREATE TABLE {TABLE} (id bigint NOT NULL, name text, v double precision, "
            "ts timestamp)"
        )
        conn.execute(f"ALTER TABLE {TABLE} REPLICA IDENTITY FULL")
        conn.execute(f"DROP PUBLICATION IF EXISTS {PUBLICATION}")
        conn.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {TABLE}")
    print(f"{rows} rows in {txn_rows}-row transactions; 4 columns; decoded to tidegate values")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {TABLE}")
    t0 = time.perf_counter()
    write_rows(url, rows, txn_rows, {})
    print(f"the writer alone (no slot): {rows / (time.perf_counter() - t0):,.0f} rows/s")
    print(f"{'client':>9} {'drain rows/s':>13} {'live rows/s':>12} {'p50 ms':>8} {'p99 ms':>8}")
    for client in clients:
        if client == "psycopg2" and importlib.util.find_spec("psycopg2") is None:
            print(f"{client:>9} not installed (pip install psycopg2-binary to compare it)")
            continue
        m = measure(url, client, rows, txn_rows)
        print(
            f"{client:>9} {m['drain_rows_s']:>13,.0f} {m['live_rows_s']:>12,.0f} "
            f"{m['latency_median_ms']:>8.1f} {m['latency_p99_ms']:>8.1f}",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--txn-rows", type=int, default=1000)
    ap.add_argument("--url", help="a server with wal_level=logical (default: start one)")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    args = ap.parse_args()
    clients = args.clients.split(",")
    if args.url:
        run(args.url, args.rows, args.txn_rows, clients)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from postgres_cluster import LOGICAL_REPLICATION, postgres_cluster

    with postgres_cluster(LOGICAL_REPLICATION) as url:
        run(url, args.rows, args.txn_rows, clients)


if __name__ == "__main__":
    main()
