"""What ``Environment.execute`` answers when a statement fails: a typed ``SqlError`` with
PostgreSQL's SQLSTATE, naming objects and plain times (never ids or ``Antichain``), and the
state left as it was (an environment with an in-process ``PythonExecutor`` replica)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment
from tidegate.spec.errors import (
    DependentObjects,
    InvalidAsOf,
    InvalidName,
    NotNullViolation,
    SqlDivisionByZero,
    SqlError,
    StringDataRightTruncation,
)

pytestmark = pytest.mark.timeout(180)


def _run(tmp_path: Path, body: Callable[[Environment], Awaitable[None]]) -> None:
    async def go() -> None:
        with in_process_replica(tmp_path) as r, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": r}, tick_ms=None) as env:
                await env.wait_connected(timeout_s=60)
                await body(env)

    anyio.run(go)


async def _error(env: Environment, sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        await env.execute(sql)
    return info.value


def test_as_of_errors_name_the_inputs_and_plain_times(tmp_path: Path) -> None:
    async def body(env: Environment) -> None:
        await env.execute("CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1)")
        e = await _error(env, "SELECT * FROM t AS OF 0")
        assert isinstance(e, InvalidAsOf) and e.sqlstate == "22023"
        assert "t (from " in e.message and "Antichain" not in e.message and "u1" not in e.message
        # AT LEAST: any time from 0 on, so the freshest one
        assert (await env.execute("SELECT * FROM t AS OF AT LEAST 0")).rows == [(1,)]
        sub = await _error(env, "SUBSCRIBE TO t AS OF 0")
        assert isinstance(sub, InvalidAsOf)

    _run(tmp_path, body)


def test_a_read_at_a_time_not_yet_reached_is_refused_by_every_path(tmp_path: Path) -> None:
    """``SELECT ... AS OF t`` with ``t`` at or beyond the inputs' upper is refused (``InvalidAsOf``,
    not yet complete) whether it is answered by a peek (the fast path) or by a transient
    dataflow of its own (an aggregate, a join): the latter waited for a snapshot that a far-future
    time never gets. A time the inputs have passed is answered by both."""

    async def body(env: Environment) -> None:
        await env.execute("CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1), (2)")
        await env.execute("ALTER TABLE t SET (RETAIN HISTORY FOR '10m')")
        far = 10**15
        for sql in (
            f"SELECT * FROM t AS OF {far}",
            f"SELECT count(*) FROM t AS OF {far}",
            f"SELECT DISTINCT a + 1 FROM t AS OF {far}",
        ):
            with anyio.fail_after(30):
                e = await _error(env, sql)
            assert isinstance(e, InvalidAsOf) and "not yet complete" in e.message, sql
            assert "t" in e.message and "Antichain" not in e.message, sql
        at = await env.freshest("t")
        assert (await env.execute(f"SELECT count(*) FROM t AS OF {at}")).rows == [(2,)]
        assert (await env.execute(f"SELECT a FROM t ORDER BY a AS OF {at}")).rows == [(1,), (2,)]

    _run(tmp_path, body)


def test_failed_writes_change_nothing(tmp_path: Path) -> None:
    async def body(env: Environment) -> None:
        await env.execute(
            "CREATE TABLE w (a BIGINT NOT NULL, s VARCHAR(2)); INSERT INTO w VALUES (1, 'x')"
        )
        for sql, cls in [
            ("UPDATE w SET a = a / 0", SqlDivisionByZero),
            ("UPDATE w SET a = NULL", NotNullViolation),
            ("INSERT INTO w SELECT NULL::bigint, 'y'", NotNullViolation),
            ("UPDATE w SET s = 'long'", StringDataRightTruncation),
        ]:
            e = await _error(env, sql)
            assert isinstance(e, cls) and e.sqlstate == cls.sqlstate, (sql, e)
        assert (await env.execute("SELECT * FROM w")).rows == [(1, "x")]
        # spaces beyond varchar(n) are cut, as PostgreSQL's assignment cuts them
        await env.execute("INSERT INTO w VALUES (2, 'ab   ')")
        assert (await env.execute("SELECT s FROM w WHERE a = 2")).rows == [("ab",)]

    _run(tmp_path, body)


def test_a_materialized_view_keeps_the_views_it_reads(tmp_path: Path) -> None:
    async def body(env: Environment) -> None:
        await env.execute("CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1), (2)")
        await env.execute("CREATE VIEW v AS SELECT a * 10 AS b FROM t")
        await env.execute("CREATE MATERIALIZED VIEW m AS SELECT b FROM v")
        e = await _error(env, "DROP VIEW v")
        assert isinstance(e, DependentObjects) and "m" in (e.hint or "")
        await env.execute("CREATE OR REPLACE MATERIALIZED VIEW m AS SELECT b + 1 AS c FROM v")
        got = await env.execute("SELECT * FROM m ORDER BY c")
        assert got.columns == ("c",) and got.rows == [(11,), (21,)]
        await env.execute("DROP VIEW v CASCADE")
        names = [r[0] for r in (await env.execute("SHOW OBJECTS")).rows]
        assert "m" not in names and "v" not in names and "t" in names

    _run(tmp_path, body)


def test_what_the_catalog_refuses_is_a_sql_error(tmp_path: Path) -> None:
    async def body(env: Environment) -> None:
        e = await _error(env, 'CREATE TABLE " padded" (a BIGINT)')
        assert isinstance(e, InvalidName) and e.sqlstate == "42602"
        assert (await env.execute("SHOW TABLES")).rows == []

    _run(tmp_path, body)


def test_every_error_is_typed(tmp_path: Path) -> None:
    """A sample of failing statements: each is an SqlError with a five-character SQLSTATE."""
    statements = [
        "SELECT 1/0",
        "SELECT * FROM nosuch",
        "SELECT 'a' + 1",
        "CREATE TABLE x (a BIGINT, a TEXT)",
        "SELECT 1::uuid",
        "SELECT sqrt(-1)",
        "SELECT NULLIF(1)",
        "SELEC 1",
    ]

    async def body(env: Environment) -> None:
        for sql in statements:
            e: Any = await _error(env, sql)
            assert len(e.sqlstate) == 5 and e.sqlstate != "XX000", (sql, e)

    _run(tmp_path, body)


def test_deep_statements_answer_or_are_refused_typed_and_the_environment_goes_on(
    tmp_path: Path,
) -> None:
    """Nesting within the parser's limit plans and answers; past it, a typed 54001 and nothing
    else changes (it used to be an untyped ``RecursionError`` from 50 parentheses on)."""
    from tidegate.spec.errors import StatementTooComplex
    from tidegate.spec.sql.parse import MAX_SQL_NESTING

    async def body(env: Environment) -> None:
        await env.execute("CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1)")
        parens = "SELECT " + "(" * MAX_SQL_NESTING + "a" + ")" * MAX_SQL_NESTING + " FROM t"
        assert (await env.execute(parens)).rows == [(1,)]
        sums = "SELECT " + "1 + (" * 100 + "a" + ")" * 100 + " FROM t"
        assert (await env.execute(sums)).rows == [(101,)]
        too_deep = "SELECT " + "(" * 5_000 + "a" + ")" * 5_000 + " FROM t"
        e = await _error(env, too_deep)
        assert isinstance(e, StatementTooComplex) and e.sqlstate == "54001"
        arrays = await _error(env, "SELECT " + "ARRAY[" * 30 + "a" + "]" * 30 + " FROM t")
        assert arrays.sqlstate == "54000" and "array dimensions (7)" in arrays.message
        assert (await env.execute("SELECT a FROM t")).rows == [(1,)]

    _run(tmp_path, body)


def test_statements_over_the_size_limits_are_refused_typed_and_the_environment_goes_on(
    tmp_path: Path,
) -> None:
    """A 10 MB ``SELECT 1+1+...`` made the controller deaf for minutes: refused at once
    (54000, naming its size and the limit); a flat 200,000 terms within the byte limit is
    refused by its token count (54001) before it is parsed; the environment answers after."""
    from tidegate.spec.errors import ProgramLimitExceeded, StatementTooComplex
    from tidegate.spec.sql.parse import MAX_SQL_BYTES, MAX_STATEMENT_TOKENS

    async def body(env: Environment) -> None:
        await env.execute("CREATE TABLE t (a BIGINT); INSERT INTO t VALUES (1)")
        huge = "SELECT " + "+".join(["a"] * 5_000_000) + " FROM t"
        e = await _error(env, huge)
        assert isinstance(e, ProgramLimitExceeded) and e.sqlstate == "54000"
        assert f"{len(huge)} bytes" in e.message and f"{MAX_SQL_BYTES} bytes" in e.message
        flat = "SELECT " + "+".join(["a"] * 200_000) + " FROM t"
        e = await _error(env, flat)
        assert isinstance(e, StatementTooComplex) and e.sqlstate == "54001"
        assert f"limit of {MAX_STATEMENT_TOKENS} tokens" in e.message
        # in a script, as the statement it is
        e = await _error(env, "SELECT 1; " + flat)
        assert isinstance(e, StatementTooComplex)
        assert (await env.execute("SELECT a FROM t")).rows == [(1,)]

    _run(tmp_path, body)


def test_a_long_statement_is_parsed_off_the_event_loop(tmp_path: Path) -> None:
    """While one long statement is tokenized and parsed, the event loop goes on serving others
    (it used to run the parser on the loop: nothing else ran until it was done). The statement
    is a syntax error at its very end, so nothing but the parser stands between its start and
    its answer; a ticker counts the loop's turns meanwhile."""
    from tidegate.spec.errors import SqlSyntaxError

    long = "SELECT 1 WHERE 1 IN (" + ",".join(["1"] * 9_990) + ") )"  # 19,987 tokens

    async def body(env: Environment) -> None:
        turns = 0
        parsing = True

        async def tick() -> None:
            nonlocal turns
            while parsing:
                turns += 1
                await anyio.sleep(0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            await anyio.sleep(0)  # the ticker is running
            before = turns
            e = await _error(env, long)
            during = turns - before
            parsing = False
        assert isinstance(e, SqlSyntaxError)
        assert during > 1, f"the event loop turned {during} times while a statement was parsed"

    _run(tmp_path, body)
