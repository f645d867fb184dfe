"""A PostgreSQL source in the Environment: a real server (``postgres_url``, wal_level=logical), a
managed storage replica process, logical replication through a publication and a slot.

The schema comes from the upstream table at ``create_source`` (refusals typed,
nothing created); inserts, updates and deletes appear in peeks; an upstream
that becomes unreachable (a TCP proxy in front of the server is cut) puts the
source in ``stalled`` with the error, and once it is reachable again every
change made meanwhile arrives, none twice.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from postgres_cluster import free_port

from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment
from tidegate.runtime.controller.errors import SourceCeased, SourceSchemaMismatch, SourceStalled
from tidegate.runtime.errors import DuplicateCatalogName
from tidegate.spec.errors import ReplicaIdentityNotFull, UpstreamUnreachable
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import PostgresSource

pytestmark = [pytest.mark.postgres, pytest.mark.processes, pytest.mark.timeout(180)]

OPTIONS: dict[str, Any] = {"tick_ms": 100, "storage_tick_ms": 50}
SCHEMA = Schema.of(("id", "int64", False), ("name", "string"))
_names = itertools.count()


def _table(conn: psycopg.Connection[Any], full: bool = True) -> tuple[str, str, str]:
    """A fresh table (REPLICA IDENTITY FULL unless told) in a publication; (table, pub, slot)."""
    n = next(_names)
    table, pub, slot = f"env_src_{n}", f"env_pub_{n}", f"env_slot_{n}"
    conn.execute(f"CREATE TABLE {table} (id bigint NOT NULL, name text)")
    if full:
        conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    conn.execute(f"CREATE PUBLICATION {pub} FOR TABLE {table}")
    return table, pub, slot


@contextlib.asynccontextmanager
async def _environment(tmp_path: Path, timeout_s: float) -> AsyncIterator[Environment]:
    """An environment on ``tmp_path`` with an in-process compute replica, bounded in time."""
    with in_process_replica(tmp_path) as compute, anyio.fail_after(timeout_s):
        async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
            yield env


def _drop_slot(conn: psycopg.Connection[Any], slot: str) -> None:
    for _ in range(200):
        try:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (slot,),
            )
            return
        except psycopg.errors.ObjectInUse:
            threading.Event().wait(0.05)


async def until_rows(env: Environment, name: str, want: list[Any], timeout_s: float = 60) -> None:
    with anyio.fail_after(timeout_s):
        while True:
            got = sorted(await env.peek(name))
            if got == sorted(want):
                return
            await anyio.sleep(0.1)


async def until_status(env: Environment, name: str, status: str, timeout_s: float = 60) -> Any:
    with anyio.fail_after(timeout_s):
        while True:
            [s] = env.storage_status(name)
            if s.status == status:
                return s
            await anyio.sleep(0.05)


def test_a_postgres_table_is_replicated_inserts_updates_deletes(
    tmp_path: Path, postgres_url: str
) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table, pub, slot = _table(conn)
        conn.execute(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")

        async def main() -> None:
            async with _environment(tmp_path, 120) as env:
                source = PostgresSource(postgres_url, table, pub, slot)
                await env.create_source("orders", source)
                assert env.schema("orders") == SCHEMA  # discovered from the upstream
                await env.create_index("orders", ["id"], name="orders_by_id")
                await until_rows(env, "orders", [((1, "a"), 1), ((2, "b"), 1)])
                conn.execute(f"INSERT INTO {table} VALUES (3, 'c')")
                conn.execute(f"UPDATE {table} SET name = 'z' WHERE id = 1")
                conn.execute(f"DELETE FROM {table} WHERE id = 2")
                want = [((1, "z"), 1), ((3, "c"), 1)]
                await until_rows(env, "orders", want)
                assert sorted(await env.peek("orders_by_id")) == want
                assert await env.peek("orders_by_id", key=(3,)) == [((3, "c"), 1)]
                status = await until_status(env, "orders", "running")
                assert status.type == "postgres" and status.error is None
                sql = await env.execute("SELECT name FROM orders ORDER BY id")
                assert sql.rows == [("z",), ("c",)]
                # the progress collection holds an LSN, past the last change's commit
                [((lsn,), count)] = await env.peek("orders_progress")
                assert count == 1
                found = conn.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()
                assert found is not None and 0 < lsn <= int(found[0]) + 1
                await env.drop("orders", cascade=True)

        try:
            anyio.run(main)
        finally:
            _drop_slot(conn, slot)


def _slot_exists(conn: psycopg.Connection[Any], slot: str) -> bool:
    found = conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot,))
    return found.fetchone() is not None


def test_dropping_a_source_drops_its_replication_slot(tmp_path: Path, postgres_url: str) -> None:
    """The upstream keeps WAL for a slot until it is dropped: DROP SOURCE drops it (as in
    Materialize), once the storage replica lets go of it, and closing the environment
    right after the drop waits for that."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table, pub, slot = _table(conn)
        kept_table, kept_pub, kept_slot = _table(conn)

        async def main() -> None:
            async with _environment(tmp_path, 120) as env:
                await env.create_source("s", PostgresSource(postgres_url, table, pub, slot))
                kept = PostgresSource(postgres_url, kept_table, kept_pub, kept_slot)
                await env.create_source("kept", kept)
                await until_status(env, "s", "running")
                await until_status(env, "kept", "running")
                assert _slot_exists(conn, slot) and _slot_exists(conn, kept_slot)
                await env.execute("DROP SOURCE s")
            # closed at once: the close waited for the slot to go

        try:
            anyio.run(main)
            assert not _slot_exists(conn, slot)
            assert _slot_exists(conn, kept_slot)  # a source not dropped keeps its slot
        finally:
            _drop_slot(conn, slot)
            _drop_slot(conn, kept_slot)


def test_a_slot_left_by_an_environment_that_died_is_dropped_by_the_next(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Materialize drops a dropped source's slot best-effort and forgets it if it crashes first
    (its issue 14551). Here the drop records the slot in the catalog in the same commit: an
    environment that dies before dropping it upstream (simulated: its slot drops are switched
    off) leaves it recorded, and the next open drops it and forgets it."""
    from tidegate.runtime.environment._sources import SourcesAndSinks

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table, pub, slot = _table(conn)

        async def main() -> None:
            async with _environment(tmp_path, 120) as env:
                await env.create_source("s", PostgresSource(postgres_url, table, pub, slot))
                await until_status(env, "s", "running")
                with monkeypatch.context() as m:
                    m.setattr(SourcesAndSinks, "drop_replication_slots", lambda self, *states: None)
                    await env.execute("DROP SOURCE s")
                (left,) = env.slots_to_drop()
                assert (left.source, left.slot, left.dropping) == ("s", slot, False)
            assert _slot_exists(conn, slot)  # it "died": the slot is still upstream
            async with _environment(tmp_path, 120) as env:
                with anyio.fail_after(60):
                    while env.slots_to_drop():
                        await anyio.sleep(0.1)
                assert env.state.slots_to_drop == ()
            assert not _slot_exists(conn, slot)

        try:
            anyio.run(main)
        finally:
            _drop_slot(conn, slot)


def test_a_slot_whose_secret_was_dropped_is_still_dropped_after_a_restart(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DROP SECRET pw CASCADE`` drops the source whose password comes from ``pw``; the
    environment "dies" before dropping the slot upstream. The record keeps the secret's value
    (Materialize reads the connection's secrets before the catalog change drops anything): the
    next open drops the slot with it, then deletes the value. Before, the slot stayed listed
    with "no secret named 'pw'" and had to be dropped by hand."""
    from tidegate.runtime.environment._sources import SourcesAndSinks

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table, pub, slot = _table(conn)

        async def main() -> None:
            async with _environment(tmp_path, 120) as env:
                secret = await env.create_secret("pw", "not-needed-with-trust-auth")
                source = PostgresSource(postgres_url, table, pub, slot, password_secret="pw")
                await env.create_source("s", source)
                await until_status(env, "s", "running")
                with monkeypatch.context() as m:
                    m.setattr(SourcesAndSinks, "drop_replication_slots", lambda self, *states: None)
                    await env.execute("DROP SECRET pw CASCADE")
                assert env.state.secrets == () and env.state.sources == ()
                (left,) = env.slots_to_drop()
                assert (left.source, left.slot, left.error) == ("s", slot, None)
            assert _slot_exists(conn, slot)  # it "died": the slot is still upstream
            kept = tmp_path / "secrets" / str(secret)
            assert kept.exists()  # the value the slot's drop needs
            async with _environment(tmp_path, 120) as env:
                with anyio.fail_after(60):
                    while env.slots_to_drop():
                        assert env.slots_to_drop()[0].error is None or "no secret" not in str(
                            env.slots_to_drop()[0].error
                        )
                        await anyio.sleep(0.1)
                assert env.state.slots_to_drop == ()
            assert not _slot_exists(conn, slot)
            assert not kept.exists()  # gone with the record

        try:
            anyio.run(main)
        finally:
            _drop_slot(conn, slot)


def test_a_table_that_cannot_be_replicated_or_a_bad_schema_changes_nothing(
    tmp_path: Path, postgres_url: str
) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table, pub, slot = _table(conn, full=False)
        good, good_pub, good_slot = _table(conn)

        async def main() -> None:
            async with _environment(tmp_path, 120) as env:
                before = env.state
                with pytest.raises(ReplicaIdentityNotFull):
                    await env.create_source("s", PostgresSource(postgres_url, table, pub, slot))
                wrong = Schema.of(("id", "int64", False), ("name", "int64"))
                with pytest.raises(SourceSchemaMismatch):
                    await env.create_source(
                        "s",
                        PostgresSource(postgres_url, good, good_pub, good_slot),
                        schema=wrong,
                    )
                nobody = postgres_url.replace(
                    f":{postgres_url.rsplit(':', 1)[1].split('/')[0]}/", f":{free_port()}/"
                )
                with pytest.raises(UpstreamUnreachable):
                    await env.create_source("s", PostgresSource(nobody, good, good_pub, good_slot))
                assert env.state == before
                assert env.orchestrator is None  # no storage replica was started
                await env.create_table("t", Schema.of(("x", "int64", False)))
                with pytest.raises(DuplicateCatalogName):
                    await env.create_source(
                        "t", PostgresSource(postgres_url, good, good_pub, good_slot)
                    )
                assert env.state.sources == ()

        anyio.run(main)


class _Proxy:
    """A TCP proxy on a fixed loopback port in front of ``target``; :meth:`cut` closes the
    listener and every connection (the upstream is unreachable) until :meth:`start`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(16)
        s.settimeout(0.1)
        self._listener = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            socks, self._socks = self._socks, []
        if listener is not None:
            with contextlib.suppress(OSError):  # wakes the accepting thread
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                if self._listener is not listener:
                    return
                continue
            except OSError:
                return
            client.settimeout(None)
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[_Proxy]:
    hostport = postgres_url.split("@")[-1].split("/")[0]
    host, port = hostport.rsplit(":", 1)
    p = _Proxy((host, int(port)))
    p.start()
    yield p
    p.cut()


def test_an_unreachable_upstream_stalls_the_source_and_nothing_is_lost(
    tmp_path: Path, postgres_url: str, proxy: _Proxy, caplog: pytest.LogCaptureFixture
) -> None:
    hostport = postgres_url.split("@")[-1].split("/")[0]
    via_proxy = postgres_url.replace(hostport, f"127.0.0.1:{proxy.port}")
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table, pub, slot = _table(conn)
        conn.execute(f"INSERT INTO {table} VALUES (1, 'a')")

        async def main() -> None:
            async with _environment(tmp_path, 150) as env:
                await env.create_source("s", PostgresSource(via_proxy, table, pub, slot))
                await until_rows(env, "s", [((1, "a"), 1)])
                proxy.cut()
                conn.execute(f"INSERT INTO {table} VALUES (2, 'b')")
                stalled = await until_status(env, "s", "stalled")
                assert stalled.error is not None and "unreachable" in stalled.error
                # A fresh read that needs the stalled source's data is answered with its error,
                # directly or through a view, in Python and in SQL, instead of waiting for ever.
                # (A stalled source mints no more bindings; once the timestamp oracle is past
                # its upper, every fresh read needs data it does not have.)
                await env.execute("CREATE VIEW s_count AS SELECT count(*) AS n FROM s")
                await env.create_table("clock", Schema.of(("x", "int64")))
                (upper,) = env.frontiers("s")[1].elements
                while await env.append("clock", [(1,)]) < int(upper):
                    await anyio.sleep(0.05)
                for read in (
                    lambda: env.peek("s"),
                    lambda: env.execute("SELECT count(*) FROM s"),
                    lambda: env.execute("SELECT n FROM s_count"),
                ):
                    with anyio.fail_after(30), pytest.raises(SourceStalled) as refused:
                        await read()
                    # (the source's latest error: a retry may have met the cut otherwise)
                    assert refused.value.name == "s" and refused.value.error is not None
                    assert refused.value.error.startswith("UpstreamUnreachable")
                    assert "'s'" in str(refused.value) and "unreachable" in str(refused.value)
                with anyio.fail_after(30):  # the next group commit writes it
                    while True:
                        history = await env.execute(
                            "SELECT status, error FROM mz_source_status_history "
                            "WHERE status = 'stalled'"
                        )
                        if history.rows:
                            break
                        await anyio.sleep(0.05)
                assert history.rows[0][1] is not None
                conn.execute(f"UPDATE {table} SET name = 'A' WHERE id = 1")
                proxy.start()
                conn.execute(f"INSERT INTO {table} VALUES (3, 'c')")
                await until_status(env, "s", "running")  # reads wait for a running source
                await until_rows(env, "s", [((1, "A"), 1), ((2, "b"), 1), ((3, "c"), 1)])
                assert (await env.execute("SELECT n FROM s_count")).rows == [(3,)]
                # dropped while the upstream is unreachable: the slot stays, and the log says
                # how to drop it by hand
                proxy.cut()
                await env.drop("s", cascade=True)
                await env.drop("clock")

        try:
            with caplog.at_level(logging.WARNING, logger="tidegate.runtime.environment"):
                anyio.run(main)
            [left] = [r.getMessage() for r in caplog.records if "replication slot" in r.message]
            assert f"SELECT pg_drop_replication_slot('{slot}')" in left
            assert _slot_exists(conn, slot)
        finally:
            proxy.cut()
            _drop_slot(conn, slot)


async def until_ceased_with(env: Environment, name: str, error: str, timeout_s: float = 60) -> Any:
    """Wait until source ``name`` is ``ceased`` with an error of type ``error``; its status."""
    with anyio.fail_after(timeout_s):
        while True:
            [s] = env.storage_status(name)
            if s.status == "ceased" and (s.error or "").startswith(f"{error}: "):
                return s
            await anyio.sleep(0.05)


async def until_history_has(env: Environment, gid: str, error: str, timeout_s: float = 30) -> Any:
    """Wait until ``mz_source_status_history`` has a ``ceased`` row of ``gid`` with ``error``."""
    with anyio.fail_after(timeout_s):
        while True:
            history = await env.execute(
                f"SELECT status, error FROM mz_source_status_history WHERE id = '{gid}'"
            )
            ceased = [e for s, e in history.rows if s == "ceased" and e.startswith(f"{error}: ")]
            if ceased:
                return ceased[0]
            await anyio.sleep(0.05)


async def rows_at_the_upper(env: Environment, name: str) -> tuple[int, list[Any]]:
    """The source's upper and its rows just below it (a stalled source's freshest time never
    comes: a read there would wait for the source)."""
    (upper,) = env.frontiers(name)[1].elements
    return int(upper), sorted(await env.peek(name, int(upper) - 1))


async def stays_put(env: Environment, name: str, upper: int, seconds: float) -> None:
    """The ceased source's upper does not move for ``seconds`` (nothing restarts it)."""
    await anyio.sleep(seconds)
    assert env.frontiers(name)[1].elements == (upper,)


def test_an_upstream_schema_change_ceases_the_source_with_the_typed_error(
    tmp_path: Path, postgres_url: str
) -> None:
    """ADD COLUMN upstream while the source runs: ``ceased`` (no restart gets past it, as in
    Materialize) with ``UpstreamSchemaChanged`` naming the column, in the status and its
    history; every row committed before the change is in the source once, none committed after
    it; a fresh read of it fails with ``SourceCeased`` instead of waiting for ever."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table, pub, slot = _table(conn)
        conn.execute(f"INSERT INTO {table} VALUES (1, 'a')")

        async def main() -> None:
            async with _environment(tmp_path, 150) as env:
                gid = await env.create_source("s", PostgresSource(postgres_url, table, pub, slot))
                await until_rows(env, "s", [((1, "a"), 1)])
                with conn.transaction():
                    conn.execute(f"INSERT INTO {table} VALUES (2, 'b'), (3, 'c')")
                conn.execute(f"UPDATE {table} SET name = 'A' WHERE id = 1")
                before = [((1, "A"), 1), ((2, "b"), 1), ((3, "c"), 1)]
                await until_rows(env, "s", before)
                await until_status(env, "s", "running")
                # Row 4 commits just before the change, in the same round trip (the reader
                # gets its transaction and the new shape together): in the source all the same.
                conn.execute(
                    f"BEGIN; INSERT INTO {table} VALUES (4, 'd'); COMMIT; "
                    f"ALTER TABLE {table} ADD COLUMN extra integer; "
                    f"INSERT INTO {table} VALUES (5, 'e', 5)"
                )
                conn.execute(f"INSERT INTO {table} VALUES (6, 'f', 6)")
                ceased = await until_ceased_with(env, "s", "UpstreamSchemaChanged")
                assert table in ceased.error
                assert "column 'extra' added (integer)" in ceased.error
                error = await until_history_has(env, str(gid), "UpstreamSchemaChanged")
                assert "column 'extra' added (integer)" in error
                # What the reader had before the error is written before the error is
                # reported (a failing ingestion mints no more bindings).
                upper, rows = await rows_at_the_upper(env, "s")
                want = [*before, ((4, "d"), 1)]
                assert rows == want, f"at {upper - 1}, the source's upper less one"
                # nothing restarts the reader: it would refuse the new shape each time
                await stays_put(env, "s", upper, 3.0)
                assert (await rows_at_the_upper(env, "s"))[1] == want
                [again] = env.storage_status("s")
                assert again.status == "ceased"
                assert again.error is not None and "column 'extra' added" in again.error
                with pytest.raises(SourceCeased):
                    await env.peek("s")

        try:
            anyio.run(main)
        finally:
            _drop_slot(conn, slot)


def test_a_dropped_replication_slot_ceases_the_source_with_the_typed_error(
    tmp_path: Path, postgres_url: str
) -> None:
    """The slot dropped upstream (its walsender terminated first) while the source runs:
    ``ceased`` with ``ReplicationSlotMissing``, in the status and its history; what was
    ingested stays, once, and the slot is not silently re-created (that would skip changes); a
    fresh read of the source fails with ``SourceCeased``."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table, pub, slot = _table(conn)
        conn.execute(f"INSERT INTO {table} VALUES (1, 'a')")

        async def main() -> None:
            async with _environment(tmp_path, 150) as env:
                gid = await env.create_source("s", PostgresSource(postgres_url, table, pub, slot))
                await until_rows(env, "s", [((1, "a"), 1)])
                conn.execute(f"INSERT INTO {table} VALUES (2, 'b')")
                conn.execute(f"DELETE FROM {table} WHERE id = 1")
                want = [((2, "b"), 1)]
                await until_rows(env, "s", want)
                await until_status(env, "s", "running")
                await anyio.to_thread.run_sync(_terminate_and_drop_slot, postgres_url, slot)
                conn.execute(f"INSERT INTO {table} VALUES (3, 'c')")
                ceased = await until_ceased_with(env, "s", "ReplicationSlotMissing")
                assert repr(slot) in ceased.error and "drop and re-create" in ceased.error
                await until_history_has(env, str(gid), "ReplicationSlotMissing")
                upper, rows = await rows_at_the_upper(env, "s")
                assert rows == want
                await stays_put(env, "s", upper, 3.0)
                assert (await rows_at_the_upper(env, "s"))[1] == want
                found = conn.execute(
                    "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (slot,)
                ).fetchone()
                assert found == (0,)  # not re-created behind the user's back
                with pytest.raises(SourceCeased):  # a fresh read says so instead of waiting
                    await env.peek("s")

        try:
            anyio.run(main)
        finally:
            _drop_slot(conn, slot)


def test_an_upstream_truncate_ceases_the_source_once(tmp_path: Path, postgres_url: str) -> None:
    """``TRUNCATE`` upstream (the reader keeps no state to retract what the table held): the
    source ceases with ``UpstreamTruncated``, recorded once in its status history, and stays so
    (it was retried and re-recorded about every second); reads of it say so."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        table, pub, slot = _table(conn)
        conn.execute(f"INSERT INTO {table} VALUES (1, 'a')")

        async def main() -> None:
            async with _environment(tmp_path, 150) as env:
                gid = await env.create_source("s", PostgresSource(postgres_url, table, pub, slot))
                await until_rows(env, "s", [((1, "a"), 1)])
                conn.execute(f"TRUNCATE {table}")
                await until_ceased_with(env, "s", "UpstreamTruncated")
                await until_history_has(env, str(gid), "UpstreamTruncated")
                upper, _ = await rows_at_the_upper(env, "s")
                await stays_put(env, "s", upper, 3.0)
                history = await env.execute(
                    f"SELECT status, error FROM mz_source_status_history WHERE id = '{gid}'"
                )
                failed = [s for s, _ in history.rows if s in ("stalled", "ceased")]
                assert failed == ["ceased"], history.rows
                with pytest.raises(SourceCeased, match="truncated"):
                    await env.peek("s")

        try:
            anyio.run(main)
        finally:
            _drop_slot(conn, slot)


def _terminate_and_drop_slot(url: str, slot: str) -> None:
    """Drop ``slot`` while a reader streams from it: terminate its walsender, then drop it before
    the reader's retry takes it again (retried until the drop wins)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(400):
            conn.execute(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                "WHERE slot_name = %s AND active_pid IS NOT NULL",
                (slot,),
            )
            try:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                return
            except psycopg.errors.ObjectInUse:
                threading.Event().wait(0.02)
        raise AssertionError(f"slot {slot} stayed in use")


def _same(a: Any, b: Any) -> bool:
    """Rows equal, a NaN equal to a NaN (as SQL's ordering and grouping treat it)."""
    return repr(a) == repr(b)


def _post(at: str, path: str, body: dict[str, Any]) -> Any:
    """POST ``body`` to the control endpoint at ``at``; its answer parsed as strict JSON (RFC 8259
    has no ``NaN`` or ``Infinity`` tokens: one fails the test)."""
    import http.client
    import json

    def strict(token: str) -> Any:
        raise AssertionError(f"{path} answered the non-JSON token {token}")

    host, port = at.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        headers = {"Authorization": "Bearer tok", "Content-Type": "application/json"}
        conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        response = conn.getresponse()
        raw = response.read()
        assert response.status == 200, raw
    finally:
        conn.close()
    lines = [json.loads(line, parse_constant=strict) for line in raw.splitlines() if line]
    return lines[0] if len(lines) == 1 else lines


def test_nan_and_infinities_upstream_are_ingested_and_answered_as_postgresql_does(
    tmp_path: Path, postgres_url: str
) -> None:
    """``double precision`` and ``real`` columns holding NaN, Infinity and -Infinity upstream: the
    source runs on (a NaN once stalled it for good), updates and deletes of such rows retract
    exactly, and SQL over the source (its index, aggregates, ordering and grouping) answers what
    PostgreSQL answers over the upstream table; the control endpoint's JSON answers are strict
    JSON, a non-finite value written as ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``."""
    from tidegate.commands.control import serve_control
    from tidegate.commands.service import ControlService

    queries = [
        "SELECT id, x, r FROM {t} ORDER BY id",
        "SELECT count(*) FROM {t} WHERE x = 'NaN'",
        "SELECT max(x), min(x), max(r), min(r) FROM {t}",
        "SELECT x, count(*) FROM {t} GROUP BY x ORDER BY x",
        "SELECT id FROM {t} WHERE x > 1e308 ORDER BY id",
    ]
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        n = next(_names)
        table, pub, slot = f"env_nan_{n}", f"env_nan_pub_{n}", f"env_nan_slot_{n}"
        conn.execute(f"CREATE TABLE {table} (id bigint NOT NULL, x double precision, r real)")
        conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
        conn.execute(f"CREATE PUBLICATION {pub} FOR TABLE {table}")
        conn.execute(
            f"INSERT INTO {table} VALUES (1, 'NaN', 'NaN'), (2, 'Infinity', '-Infinity'), "
            "(3, '-Infinity', 'Infinity'), (4, 1.5, NULL)"
        )

        def upstream(sql: str) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in conn.execute(sql.format(t=table)).fetchall()]

        async def agree(env: Environment) -> None:
            with anyio.fail_after(60):
                while True:
                    want = upstream(queries[0])
                    got = (await env.execute(queries[0].format(t="s"))).rows
                    if _same(got, want):
                        break
                    await anyio.sleep(0.1)
            for q in queries[1:]:
                got = (await env.execute(q.format(t="s"))).rows
                assert _same(got, upstream(q)), q

        async def main() -> None:
            async with _environment(tmp_path, 150) as env:
                await env.create_source("s", PostgresSource(postgres_url, table, pub, slot))
                await env.create_index("s", ["id"], name="s_by_id")
                await agree(env)
                conn.execute(f"UPDATE {table} SET x = 'NaN' WHERE id = 4")
                conn.execute(f"DELETE FROM {table} WHERE id = 1")  # retracts a NaN row exactly
                conn.execute(f"INSERT INTO {table} VALUES (5, 'NaN', 0), (6, '-Infinity', 'NaN')")
                await agree(env)
                [status] = env.storage_status("s")
                assert status.status == "running" and status.error is None
                service = ControlService(env, wait_s=30)
                async with anyio.create_task_group() as tg:
                    at = await tg.start(serve_control, service.handle, "tok")
                    sql = {"sql": "SELECT id, x, r FROM s ORDER BY id"}
                    answer = (await anyio.to_thread.run_sync(_post, at, "/sql", sql))["result"]
                    assert answer["rows"] == [
                        [2, "Infinity", "-Infinity"],
                        [3, "-Infinity", "Infinity"],
                        [4, "NaN", None],
                        [5, "NaN", 0.0],
                        [6, "-Infinity", "NaN"],
                    ]
                    streamed = await anyio.to_thread.run_sync(
                        _post, at, "/sql", {**sql, "stream": True}
                    )
                    rows = [m["payload"] for m in streamed if m["type"] == "Row"]
                    assert rows == answer["rows"]
                    peeked = await anyio.to_thread.run_sync(_post, at, "/peek", {"name": "s"})
                    peeked = peeked["result"]
                    assert sorted(peeked["rows"]) == sorted([[r, 1] for r in answer["rows"]])
                    tg.cancel_scope.cancel()

        try:
            anyio.run(main)
        finally:
            _drop_slot(conn, slot)
