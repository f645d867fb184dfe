"""asyncpg against the wire protocol: the extended protocol everywhere, binary codecs,
prepared statements, type introspection, cancellation (a timeout sends CancelRequest)."""

from __future__ import annotations

import asyncio
import datetime as dt

import asyncpg
import pytest

from .conftest import Server

pytestmark = pytest.mark.timeout(120)


def _run(pg: Server, body: object) -> None:
    async def go() -> None:
        conn = await asyncpg.connect(pg.url)
        try:
            await body(conn)  # type: ignore[operator]
        finally:
            await conn.close()

    asyncio.run(go())


def test_prepared_statements_and_binary_codecs(pg_server: Server, name: str) -> None:
    async def body(c: asyncpg.Connection) -> None:
        await c.execute(
            f"CREATE TABLE {name} (id bigint NOT NULL, name text, v double precision, "
            "d date, ts timestamp, ok boolean)"
        )
        rows = [
            (1, "a", 0.5, dt.date(2024, 5, 6), dt.datetime(2024, 5, 6, 7, 8, 9, 123456), True),
            (2, None, None, None, None, None),
        ]
        await c.executemany(f"INSERT INTO {name} VALUES ($1, $2, $3, $4, $5, $6)", rows)
        got = await c.fetch(f"SELECT * FROM {name} ORDER BY id")
        assert [tuple(r) for r in got] == rows
        stmt = await c.prepare(f"SELECT name FROM {name} WHERE id = $1")
        assert [a.name for a in stmt.get_parameters()] == ["int8"]
        assert [a.name for a in stmt.get_attributes()] == ["name"]
        assert await stmt.fetchval(1) == "a"
        assert await stmt.fetchval(2) is None
        assert (
            await c.fetchval(f"SELECT count(*) FROM {name} WHERE d = $1", dt.date(2024, 5, 6)) == 1
        )
        assert await c.fetchval(f"SELECT v FROM {name} WHERE ok = $1", True) == 0.5
        # a cursor fetched in pieces: Execute with a row limit, PortalSuspended
        async with c.transaction():
            cur = await c.cursor(f"SELECT id FROM {name} ORDER BY id")
            assert [r[0] for r in await cur.fetch(1)] == [1]
            assert [r[0] for r in await cur.fetch(5)] == [2]

    _run(pg_server, body)


def test_errors_and_cancellation(pg_server: Server, name: str) -> None:
    async def body(c: asyncpg.Connection) -> None:
        await c.execute(f"CREATE TABLE {name} (a bigint)")
        with pytest.raises(asyncpg.UndefinedColumnError) as e:
            await c.fetch(f"SELECT b FROM {name}")
        assert e.value.position == "8"
        with pytest.raises(asyncpg.UndefinedTableError):
            await c.fetch("SELECT * FROM nowhere")
        # a FETCH that waits forever, cancelled by the client's timeout (a CancelRequest)
        await c.execute("BEGIN")
        await c.execute(f"DECLARE c CURSOR FOR SUBSCRIBE {name}")
        with pytest.raises(asyncio.TimeoutError):
            await c.fetch("FETCH ALL c", timeout=0.5)
        await c.execute("ROLLBACK")
        assert await c.fetchval(f"SELECT count(*) FROM {name}") == 0

    _run(pg_server, body)


def test_catalog_introspection_asyncpg_runs(pg_server: Server) -> None:
    async def body(c: asyncpg.Connection) -> None:
        assert await c.fetchval("SELECT oid FROM pg_type WHERE typname = $1", "int8") == 20
        types = await c.fetch("SELECT typname FROM pg_type WHERE oid = ANY($1::oid[])", [20, 25])
        assert sorted(r[0] for r in types) == ["int8", "text"]

    _run(pg_server, body)
