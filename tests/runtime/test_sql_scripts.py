"""A script of several statements is one implicit transaction: its writes land together or not
at all (PostgreSQL's and Materialize's simple-query semantics).

Through a real Environment (an in-process python-executor replica over gRPC), by every road a
script takes: ``Environment.execute`` (``SqlSession.run_script``), ``SqlSession.stream_script``
(``POST /sql``, ``tidegate sql``), and the wire protocol's simple query (psycopg).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.runtime.sql_session import SqlSession
from tidegate.spec.errors import SqlError

pytestmark = pytest.mark.timeout(180)


def _run(data: Path, body: Callable[[Environment], Awaitable[None]]) -> None:
    async def go() -> None:
        with replica(data) as address, anyio.fail_after(150):
            async with Environment.open(data, replicas={"r1": address}) as env:
                await env.wait_connected(timeout_s=60)
                await env.execute("CREATE TABLE t (k BIGINT NOT NULL, v TEXT)")
                await env.execute("CREATE TABLE u (k BIGINT NOT NULL)")
                await body(env)

    anyio.run(go)


async def _rows(env: Environment, sql: str) -> list[Any]:
    return sorted((await env.execute(sql)).rows)


async def _refused(run: Awaitable[Any], sqlstate: str) -> SqlError:
    with pytest.raises(SqlError) as e:
        await run
    assert e.value.sqlstate == sqlstate, e.value
    return e.value


@pytest.mark.parametrize(
    ("bad", "sqlstate"),
    [
        ("INSERT INTO t VALUES (2, 'b', 3)", "42601"),  # too many values
        ("INSERT INTO t VALUES ('x', 'b')", "22P02"),  # not the column's type
        ("INSERT INTO t (v) VALUES ('b')", "23502"),  # NOT NULL
        ("SELECT 1 / 0", "22012"),  # a read that fails after the write
        ("SELECT nx FROM t", "42703"),
    ],
)
def test_a_statement_that_fails_takes_the_scripts_writes_with_it(
    tmp_path: Path, bad: str, sqlstate: str
) -> None:
    async def body(env: Environment) -> None:
        await _refused(
            env.execute(f"INSERT INTO t VALUES (1, 'a'); INSERT INTO u VALUES (1); {bad}"), sqlstate
        )
        assert await _rows(env, "SELECT * FROM t") == []
        assert await _rows(env, "SELECT * FROM u") == []
        await env.execute("INSERT INTO t VALUES (9, 'z')")  # the session and table go on
        assert await _rows(env, "SELECT k FROM t") == [(9,)]

    _run(tmp_path, body)


def test_a_scripts_writes_land_together(tmp_path: Path) -> None:
    async def body(env: Environment) -> None:
        results = await SqlSession(env).run_script(
            "INSERT INTO t VALUES (1, 'a'); INSERT INTO u VALUES (1), (2); "
            "INSERT INTO t VALUES (2, 'b'); SELECT 41 + 1"
        )
        assert [r.status for r in results] == ["INSERT 0 1", "INSERT 0 2", "INSERT 0 1", "SELECT 1"]
        assert results[-1].rows == [(42,)]  # a read of no collection runs after a write
        assert await _rows(env, "SELECT k, v FROM t") == [(1, "a"), (2, "b")]
        assert await _rows(env, "SELECT k FROM u") == [(1,), (2,)]

    _run(tmp_path, body)


def test_what_a_script_cannot_mix_is_refused_before_anything_lands(tmp_path: Path) -> None:
    async def body(env: Environment) -> None:
        await env.execute("INSERT INTO t VALUES (1, 'a')")
        e = await _refused(env.execute("INSERT INTO t VALUES (2, 'b'); SELECT * FROM t"), "25000")
        assert "write-only" in str(e)
        await _refused(env.execute("INSERT INTO u VALUES (5); UPDATE t SET v = 'c'"), "25001")
        await _refused(env.execute("DELETE FROM t; INSERT INTO t VALUES (3, 'c')"), "25001")
        assert await _rows(env, "SELECT k, v FROM t") == [(1, "a")]
        assert await _rows(env, "SELECT k FROM u") == []
        # a read before the first write reads at its own time; DDL takes effect at once
        results = await SqlSession(env).run_script(
            "SELECT count(*) FROM t; CREATE TABLE w (k BIGINT); INSERT INTO w VALUES (7)"
        )
        assert results[0].rows == [(1,)]
        assert await _rows(env, "SELECT k FROM w") == [(7,)]
        # UPDATE and DELETE by themselves, and in a script of reads only, still run
        await env.execute("UPDATE t SET v = 'z'")
        assert await _rows(env, "SELECT k, v FROM t") == [(1, "z")]

    _run(tmp_path, body)


def test_a_streamed_script_is_one_transaction_too(tmp_path: Path) -> None:
    """``stream_script`` (``POST /sql``, ``tidegate sql``): the outcomes come one by one, the
    writes land after the last, and a failure takes them back."""

    async def body(env: Environment) -> None:
        session = SqlSession(env)
        seen: list[str] = []
        with pytest.raises(SqlError):
            async for outcome in session.stream_script(
                "INSERT INTO t VALUES (1, 'a'); INSERT INTO t VALUES (2)"
            ):
                seen.append(getattr(outcome, "status", "?"))
        assert seen == ["INSERT 0 1"]
        assert await _rows(env, "SELECT * FROM t") == []
        async for _ in session.stream_script(
            "INSERT INTO t VALUES (1, 'a'); INSERT INTO u VALUES (1)"
        ):
            pass
        assert await _rows(env, "SELECT k FROM t") == [(1,)]
        assert await _rows(env, "SELECT k FROM u") == [(1,)]
        assert session.transaction_status == "I"

    _run(tmp_path, body)


def test_begin_in_a_script_keeps_the_blocks_own_rules(tmp_path: Path) -> None:
    """A script with its own ``BEGIN``/``COMMIT`` is run by them (not one implicit
    transaction): the block's rules, and a failed block rolled back."""

    async def body(env: Environment) -> None:
        session = SqlSession(env)
        await session.run_script("BEGIN; INSERT INTO t VALUES (1, 'a'); COMMIT")
        with pytest.raises(SqlError):
            await session.run_script(
                "BEGIN; INSERT INTO t VALUES (2, 'b'); INSERT INTO t VALUES (3); COMMIT"
            )
        assert session.transaction_status == "E"
        await session.run_script("ROLLBACK")
        assert await _rows(env, "SELECT k FROM t") == [(1,)]

    _run(tmp_path, body)


def test_a_read_transaction_holds_its_time_until_it_ends(tmp_path: Path) -> None:
    """A read-only transaction reads every ``SELECT`` at the time its first read chose, and
    holds back compaction of what it reads until it ends, as Materialize's do: with a read
    policy of lag 0 the since passes that time at the next commit, yet the second read of the
    block is answered there. After ``COMMIT`` (or a closed session) compaction goes on."""
    from tidegate.spec.frontier.read_policy import LagWriteFrontier

    async def body(env: Environment) -> None:
        await env.execute("INSERT INTO t VALUES (1, 'a')")
        await env.set_read_policy("t", LagWriteFrontier(0, 1))
        for end in ("COMMIT", None):
            session = SqlSession(env)
            await session.run_script("BEGIN")
            (first,) = await session.run_script("SELECT count(*) FROM t")
            for _ in range(3):  # each commit pulls an unheld since up to the upper
                await env.append("t", [(9, "z")])
            (since,) = env.frontiers("t")[0].elements
            assert since <= first.time  # held
            (second,) = await session.run_script("SELECT count(*) FROM t")
            assert (second.rows, second.time) == (first.rows, first.time)
            if end is not None:
                await session.run_script(end)
            else:
                await session.aclose()
            t = await env.append("t", [(9, "z")])
            with anyio.fail_after(30):
                while int(env.frontiers("t")[0].elements[0]) <= first.time:
                    await anyio.sleep(0.01)  # compaction goes on past it
            assert t > first.time

    _run(tmp_path, body)


def test_a_read_transaction_reads_other_objects_at_its_time_or_refuses_them(
    tmp_path: Path,
) -> None:
    """A later read of a read-only transaction that names an object its first read did not
    reads it at the transaction's time too, held from then on: a row appended to ``u`` after
    the first read is not seen, though it was acknowledged before the second. If that object
    can no longer be read there (its since passed the time: a read policy of lag 0), the read
    is refused as Materialize refuses a read outside the transaction's time domain (25000),
    and the block is aborted."""
    from tidegate.spec.frontier.read_policy import LagWriteFrontier

    async def body(env: Environment) -> None:
        await env.execute("INSERT INTO t VALUES (1, 'a')")
        await env.execute("INSERT INTO u VALUES (1)")
        session = SqlSession(env)
        await session.run_script("BEGIN")
        (first,) = await session.run_script("SELECT count(*) FROM t")
        await env.append("u", [(2,)])
        (second,) = await session.run_script("SELECT count(*) FROM u")
        assert (second.rows, second.time) == ([(1,)], first.time)
        for _ in range(3):  # an unheld since would pass the time now
            await env.append("u", [(3,)])
        (again,) = await session.run_script("SELECT count(*) FROM u")
        assert (again.rows, again.time) == ([(1,)], first.time)  # held since its first read
        await session.run_script("COMMIT")

        await env.set_read_policy("u", LagWriteFrontier(0, 1))
        await session.run_script("BEGIN")
        (first,) = await session.run_script("SELECT count(*) FROM t")
        for _ in range(3):  # each commit pulls u's since up to its upper
            await env.append("u", [(4,)])
        error = await _refused(session.run_script("SELECT count(*) FROM u"), "25000")
        assert "same timedomain" in str(error) and "u" in (error.hint or "")
        await _refused(session.run_script("SELECT count(*) FROM t"), "25P02")
        await session.run_script("ROLLBACK")
        assert await _rows(env, "SELECT count(*) FROM u") == [(8,)]

    _run(tmp_path, body)
