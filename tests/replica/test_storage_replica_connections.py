"""Real sources and sinks through a storage replica process: PostgreSQL change data capture into a
shard, and a shard into an Apache Iceberg table -- each also across a SIGKILL and a restart.

The PostgreSQL server is the session's throw-away cluster (``postgres_url``,
``wal_level=logical``); the Iceberg table is pyiceberg's, in a SQLite catalog
with its files on local disk, read back with pyiceberg.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from replica_harness import replica_process
from storage_harness import DATA, Shards, StorageClient, at, ingestion, upper_int

from tidegate.runtime.sinks import read_changelog
from tidegate.spec.frontier import Antichain, Row, Update, consolidate
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import (
    ExportDescription,
    IcebergSink,
    PostgresSource,
    RunSink,
    SourceStatus,
    StatusUpdate,
)

pytestmark = [pytest.mark.postgres, pytest.mark.processes, pytest.mark.timeout(180)]

STORAGE_ONLY = ("--services", "storage", "--storage-tick-ms", "30")
KV = Schema.of(("k", "int64", False), ("s", "string"))
_names = itertools.count()


# -- PostgreSQL -----------------------------------------------------------------------------


@dataclass
class Upstream:
    url: str
    conn: psycopg.Connection[Any]
    table: str
    publication: str
    slot: str

    @property
    def source(self) -> PostgresSource:
        return PostgresSource(self.url, self.table, self.publication, self.slot)

    def sql(self, *statements: str) -> None:
        with self.conn.transaction():
            for s in statements:
                self.conn.execute(s)

    def rows(self) -> dict[Row, int]:
        got = self.conn.execute(f"SELECT k, s FROM {self.table}").fetchall()
        return dict(Counter(tuple(r) for r in got))


@pytest.fixture
def upstream(postgres_url: str) -> Iterator[Upstream]:
    n = next(_names)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        up = Upstream(
            postgres_url, conn, f"storage_src_{n}", f"storage_pub_{n}", f"storage_slot_{n}"
        )
        conn.execute(f"CREATE TABLE {up.table} (k bigint NOT NULL, s text)")
        conn.execute(f"ALTER TABLE {up.table} REPLICA IDENTITY FULL")
        conn.execute(f"CREATE PUBLICATION {up.publication} FOR TABLE {up.table}")
        yield up
        for _ in range(100):  # the slot is free once the server noticed its reader is gone
            try:
                conn.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s",
                    (up.slot,),
                )
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.05)
        conn.execute(f"DROP PUBLICATION IF EXISTS {up.publication}")
        conn.execute(f"DROP TABLE IF EXISTS {up.table}")


def contents(shards: Shards, gid: GlobalId) -> dict[Row, int]:
    """The shard's contents at its latest complete time (empty before anything is written)."""
    d = upper_int(shards.upper(gid))
    if d == 0:
        return {}
    return {row: diff for row, _t, diff in shards.store.snapshot_rows(str(gid), d - 1)}


def wait_for_contents(
    shards: Shards, gid: GlobalId, want: dict[Row, int], timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while (got := contents(shards, gid)) != want:
        assert time.monotonic() < deadline, f"the shard holds {got}, upstream {want}"
        time.sleep(0.05)


def test_postgres_inserts_updates_and_deletes_reach_the_shard_across_a_sigkill(
    tmp_path: Path, upstream: Upstream
) -> None:
    shards = Shards(tmp_path)
    shards.create_ingestion(KV)
    run = ingestion(upstream.source, KV)
    upstream.sql(
        f"INSERT INTO {upstream.table} VALUES (1, 'one'), (2, 'two'), (3, NULL)"
    )  # in the snapshot

    async def start(address: str, resume: Antichain) -> StorageClient:
        c = await StorageClient.connect(address)
        await c.start(run(resume))
        await c.until(lambda r: r == StatusUpdate(DATA, SourceStatus.RUNNING))
        return c

    try:
        with replica_process(tmp_path, *STORAGE_ONLY) as first:
            client = anyio.run(start, first.address, at(0))
            wait_for_contents(shards, DATA, upstream.rows())
            upstream.sql(
                f"UPDATE {upstream.table} SET s = 'TWO' WHERE k = 2",
                f"DELETE FROM {upstream.table} WHERE k = 1",
                f"INSERT INTO {upstream.table} VALUES (4, 'four'), (4, 'four')",
            )
            wait_for_contents(shards, DATA, upstream.rows())
            assert upstream.rows()[(4, "four")] == 2
            del client
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait(10)
        # Changes while the replica is down arrive after the restart, exactly once.
        upstream.sql(f"UPDATE {upstream.table} SET s = 'three' WHERE k = 3")
        upstream.sql(f"INSERT INTO {upstream.table} VALUES (5, 'five')")
        with replica_process(tmp_path, *STORAGE_ONLY) as second:
            anyio.run(start, second.address, shards.upper(DATA))
            wait_for_contents(shards, DATA, upstream.rows())
            upstream.sql(f"DELETE FROM {upstream.table} WHERE k = 4")
            wait_for_contents(shards, DATA, upstream.rows())
            assert (
                second.metric("tidegate_storage_ingested_updates_total", source=str(DATA)) or 0
            ) > 0
        # At every time the collection is a multiset: no change was retracted twice.
        counts: Counter[Row] = Counter()
        history = shards.updates(DATA)
        for t in sorted({t for _, t, _ in history}):
            for row, _t, diff in (u for u in history if u[1] == t):
                counts[row] += diff
            assert min(counts.values(), default=0) >= 0, f"a negative count at {t}: {counts}"
    finally:
        shards.close()


# -- Iceberg --------------------------------------------------------------------------------

IN = GlobalId.user(10)
SINK = GlobalId.user(11)


def test_an_iceberg_sink_commits_every_update_once_across_a_sigkill(tmp_path: Path) -> None:
    shards = Shards(tmp_path)
    shards.create(IN, KV)
    first: list[Update] = [
        ((1, "a"), 0, 1),
        ((2, "b"), 0, 1),
        ((3, "c"), 1, 1),
        ((1, "a"), 2, -1),
        ((1, "A"), 2, 1),
        ((4, None), 4, 2),
    ]
    shards.append(IN, first, 5)
    connection = IcebergSink(
        f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'warehouse'}", "tidegate.kv"
    )

    def run(as_of: int, strict: bool) -> RunSink:
        desc = ExportDescription(IN, "storage-1", at(0), connection, KV)
        return RunSink(SINK, desc, at(as_of), strict)

    async def sink(address: str, cmd: RunSink, covered: int) -> None:
        c = await StorageClient.connect(address)
        await c.start(cmd)
        await c.upper_beyond(SINK, covered - 1)

    try:
        with replica_process(tmp_path, *STORAGE_ONLY) as proc:
            anyio.run(sink, proc.address, run(0, False), 5)
            assert sorted(read_changelog(connection)) == sorted(consolidate(first))
            proc.proc.send_signal(signal.SIGKILL)
            proc.proc.wait(10)
        more: list[Update] = [((2, "b"), 5, -1), ((5, "e"), 6, 1), ((3, "c"), 7, -1)]
        shards.append(IN, more, 8)
        with replica_process(tmp_path, *STORAGE_ONLY) as proc:
            # The controller resumes the sink at step_back of its covered upper (5 - 1).
            anyio.run(sink, proc.address, run(4, True), 8)
        changelog = read_changelog(connection)
        assert sorted(changelog) == sorted(consolidate(first + more)), (
            "the table does not hold every update exactly once"
        )
    finally:
        shards.close()
