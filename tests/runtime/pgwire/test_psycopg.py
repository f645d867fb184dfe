"""psycopg 3 against the wire protocol: what a Python service does with Materialize.

Sync and async connections, client- and server-side parameter binding, binary results,
COPY both ways, ``cursor.stream`` over ``SUBSCRIBE``, cursors over ``SUBSCRIBE`` with
``FETCH``, transactions as Materialize has them, errors with their SQLSTATE and position,
notices, session variables, cancellation and ``statement_timeout``.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from decimal import Decimal

import anyio
import psycopg
import pytest
from psycopg import errors as pgerr

from .conftest import Server

pytestmark = pytest.mark.timeout(120)


def _connect(pg: Server, **kw: object) -> psycopg.Connection:
    return psycopg.connect(pg.url, autocommit=True, **kw)  # type: ignore[arg-type]


def test_connect_reports_what_drivers_read(pg_server: Server) -> None:
    with _connect(pg_server, application_name="tests") as c:
        info = c.info
        assert info.server_version == 90500
        assert info.parameter_status("server_version") == "9.5.0"
        assert info.parameter_status("client_encoding") == "UTF8"
        assert info.parameter_status("application_name") == "tests"
        assert info.parameter_status("mz_version").startswith("v0.")
        assert info.parameter_status("standard_conforming_strings") == "on"
        assert info.backend_pid > 0
        row = c.execute(
            "SELECT version(), current_database(), current_schema(), current_user, pg_backend_pid()"
        ).fetchone()
        assert row is not None
        assert row[0].startswith("PostgreSQL 9.5.0") and "tidegate" in row[0]
        assert row[1:4] == ("materialize", "public", "materialize")
        assert row[4] == info.backend_pid


def test_queries_parameters_and_binary_results(pg_server: Server, name: str) -> None:
    with _connect(pg_server) as c:
        c.execute(
            f"CREATE TABLE {name} (id bigint NOT NULL, name text, score double precision, "
            "day date, at timestamp, ok boolean)"
        )
        rows = [
            (1, "ann", 1.5, dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5, 600000), True),
            (2, None, None, None, None, None),
            (3, "o'brien", -2.25e10, dt.date(1999, 12, 31), dt.datetime(2000, 1, 1), False),
        ]
        with c.cursor() as cur:
            cur.executemany(f"INSERT INTO {name} VALUES (%s, %s, %s, %s, %s, %s)", rows)
        got = c.execute(f"SELECT * FROM {name} ORDER BY id").fetchall()
        assert got == rows
        binary = c.cursor(binary=True).execute(f"SELECT * FROM {name} ORDER BY id").fetchall()
        assert binary == rows
        # server-side binding, prepared, of each type
        for row in rows:
            found = c.execute(
                f"SELECT id FROM {name} WHERE id = %s AND (name = %s OR %s::text IS NULL)",
                [row[0], row[1], row[1]],
                prepare=True,
            ).fetchall()
            assert found == [(row[0],)]
        assert c.execute(f"SELECT count(*) FROM {name} WHERE score > %s", [0.0]).fetchone() == (1,)
        assert c.execute(
            f"SELECT name FROM {name} WHERE day = %s", [dt.date(1999, 12, 31)]
        ).fetchall() == [("o'brien",)]


def test_numerics_travel_exactly_in_text_and_binary(pg_server: Server, name: str) -> None:
    """A numeric column is OID 1700: psycopg reads Decimals, in text and binary results, and
    sends Decimal parameters (client- and server-side binding) that arrive exact."""
    big = Decimal("-123456789012345678901234567890123456789.000000000000000000001")
    with _connect(pg_server) as c:
        c.execute(f"CREATE TABLE {name} (id bigint, n numeric, m numeric(6,2))")
        with c.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {name} VALUES (%s, %s, %s)",
                [(1, big, Decimal("1.555")), (2, Decimal("1E-30"), None), (3, None, 2)],
            )
        want = [(1, big, Decimal("1.56")), (2, Decimal("1E-30"), None), (3, None, Decimal(2))]
        cur = c.execute(f"SELECT * FROM {name} ORDER BY id")
        assert [d.type_code for d in cur.description or ()] == [20, 1700, 1700]
        assert cur.fetchall() == want
        assert c.cursor(binary=True).execute(f"SELECT * FROM {name} ORDER BY id").fetchall() == want
        found = c.execute(f"SELECT id FROM {name} WHERE n = %s", [big], prepare=True).fetchall()
        assert found == [(1,)]
        assert c.execute("SELECT 1 / 3.0, 0.1 + 0.2").fetchone() == (
            Decimal("0.33333333333333333333"),
            Decimal("0.3"),
        )
        with pytest.raises(pgerr.NumericValueOutOfRange):
            c.execute(f"INSERT INTO {name} VALUES (4, 0, 12345.678)")
        with pytest.raises(pgerr.InvalidTextRepresentation):
            c.execute("SELECT 'abc'::numeric")


def test_smallint_integer_and_real_have_their_own_oids(pg_server: Server, name: str) -> None:
    """Columns declared smallint, integer and real are OIDs 21, 23 and 700 (count(*) and a sum
    of integers stay bigint): psycopg reads them in text and binary results, a real as the
    shortest digits of its single precision; parameters out of range are 22003."""
    with _connect(pg_server) as c:
        c.execute(f"CREATE TABLE {name} (a smallint, b integer, c real)")
        with c.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {name} VALUES (%s, %s, %s)",
                [(-32768, 2**31 - 1, 0.1), (1, 2, None)],
            )
        cur = c.execute(f"SELECT a, b, c, count(*), sum(b) FROM {name} GROUP BY a, b, c ORDER BY a")
        assert [d.type_code for d in cur.description or ()] == [21, 23, 700, 20, 20]
        assert cur.fetchall() == [(-32768, 2**31 - 1, 0.1, 1, 2**31 - 1), (1, 2, None, 1, 2)]
        binary = c.cursor(binary=True).execute(f"SELECT a, b, c FROM {name} ORDER BY a")
        assert binary.fetchall() == [(-32768, 2**31 - 1, 0.10000000149011612), (1, 2, None)]
        assert c.execute("SELECT 1, 1 + 1::int2, 7 / 2, 1::real / 3::real").fetchone() == (
            1,
            2,
            3,
            0.33333334,
        )
        with pytest.raises(pgerr.NumericValueOutOfRange):
            c.execute(f"INSERT INTO {name} VALUES (%s, 0, 0)", [40000])
        with pytest.raises(pgerr.NumericValueOutOfRange):
            c.execute(f"UPDATE {name} SET b = b + 1")


def test_errors_carry_sqlstate_position_and_hint_and_the_session_goes_on(
    pg_server: Server, name: str
) -> None:
    with _connect(pg_server) as c:
        c.execute(f"CREATE TABLE {name} (amount bigint)")
        cases = [
            (f"SELECT amonut FROM {name}", pgerr.UndefinedColumn, "42703"),
            ("SELECT * FROM no_such_table", pgerr.UndefinedTable, "42P01"),
            ("SELEC 1", pgerr.SyntaxError, "42601"),
            (f"SELECT amount / 0 FROM {name}", None, None),
            (f"SELECT ntile(2) OVER () FROM {name}", pgerr.FeatureNotSupported, "0A000"),
            ("SET TimeZone = 'Europe/Paris'", pgerr.InvalidParameterValue, "22023"),
            ("SET no_such_variable = 1", pgerr.UndefinedObject, "42704"),
        ]
        for sql, cls, state in cases:
            if cls is None:
                continue
            with pytest.raises(cls) as e:
                c.execute(sql)
            assert e.value.sqlstate == state, sql
        with pytest.raises(pgerr.UndefinedColumn) as e:
            c.execute(f"SELECT amonut FROM {name}")
        diag = e.value.diag
        assert diag.statement_position == "8"
        assert diag.message_hint == 'Perhaps you meant to reference the column "amount".'
        c.execute(f"INSERT INTO {name} VALUES (1)")
        with pytest.raises(pgerr.DivisionByZero):
            c.execute(f"SELECT amount / 0 FROM {name}")
        assert c.execute(f"SELECT amount FROM {name}").fetchall() == [(1,)]


def test_copy_both_ways(pg_server: Server, name: str) -> None:
    with _connect(pg_server) as c:
        c.execute(f"CREATE TABLE {name} (id bigint NOT NULL, note text, v double precision)")
        with c.cursor().copy(f"COPY {name} FROM STDIN") as copy:
            for i in range(1000):
                copy.write_row((i, None if i % 7 == 0 else f"n\t{i}", i / 4))
        assert c.execute(f"SELECT count(*), sum(id) FROM {name}").fetchone() == (1000, 499500)
        with c.cursor().copy(f"COPY {name} (id, note) FROM STDIN WITH (FORMAT csv)") as copy:
            copy.write(b'2000,"a, ""quoted"" note"\n2001,\n2002,""\n')
        rows = c.execute(f"SELECT id, note FROM {name} WHERE id >= 2000 ORDER BY id").fetchall()
        assert rows == [(2000, 'a, "quoted" note'), (2001, None), (2002, "")]
        out = []
        with c.cursor().copy(
            f"COPY (SELECT * FROM {name} WHERE id < 3 ORDER BY id) TO STDOUT"
        ) as copy:
            out = [tuple(r) for r in copy.rows()]
        assert out == [("0", None, "0"), ("1", "n\t1", "0.25"), ("2", "n\t2", "0.5")]
        with c.cursor().copy(f"COPY {name} TO STDOUT WITH (FORMAT csv, HEADER)") as copy:
            text = b"".join(bytes(chunk) for chunk in copy).decode()
        assert text.splitlines()[0] == "id,note,v"
        assert len(text.splitlines()) == 1 + 1003
        with (
            pytest.raises(pgerr.InvalidTextRepresentation),
            c.cursor().copy(f"COPY {name} (id) FROM STDIN") as copy,
        ):
            copy.write(b"5000\nnot-a-number\n")
        assert c.execute(f"SELECT count(*) FROM {name} WHERE id = 5000").fetchone() == (0,)


def test_stream_over_subscribe(pg_server: Server, name: str) -> None:
    with _connect(pg_server) as c, _connect(pg_server) as writer:
        c.execute(f"CREATE TABLE {name} (k bigint NOT NULL, v text)")
        c.execute(f"INSERT INTO {name} VALUES (1, 'a')")
        seen: list[tuple[object, ...]] = []
        with c.cursor() as cur:
            for row in cur.stream(f"SUBSCRIBE {name}"):
                seen.append(tuple(row))
                if len(seen) == 1:
                    writer.execute(f"INSERT INTO {name} VALUES (2, 'b')")
                if len(seen) == 2:
                    break
        assert [r[1:] for r in seen] == [(1, 1, "a"), (1, 2, "b")]
        assert isinstance(seen[0][0], Decimal) and seen[1][0] > seen[0][0]
        # the connection is usable again (the stream was cancelled)
        assert c.execute(f"SELECT count(*) FROM {name}").fetchone() == (2,)


def test_declare_and_fetch_a_subscription(pg_server: Server, name: str) -> None:
    with _connect(pg_server) as c, _connect(pg_server) as writer:
        c.execute(f"CREATE TABLE {name} (k bigint NOT NULL)")
        c.execute(f"INSERT INTO {name} VALUES (1), (2)")
        c.execute("BEGIN")
        c.execute(f"DECLARE c CURSOR FOR SUBSCRIBE {name}")
        first = c.execute("FETCH ALL c").fetchall()
        assert sorted(r[1:] for r in first) == [(1, 1), (1, 2)]
        assert c.execute("FETCH ALL c WITH (timeout = '0s')").fetchall() == []
        writer.execute(f"INSERT INTO {name} VALUES (3)")
        later = c.execute("FETCH ALL c WITH (timeout = '30s')").fetchall()
        assert [r[1:] for r in later] == [(1, 3)]
        c.execute("COMMIT")
        c.execute("BEGIN")
        c.execute(f"DECLARE p CURSOR FOR SUBSCRIBE {name} WITH (PROGRESS)")
        rows = c.execute("FETCH 10 p").fetchall()
        assert any(r[1] is True and r[2] is None for r in rows)  # mz_progressed
        c.execute("ROLLBACK")
        with pytest.raises(pgerr.NoActiveSqlTransaction):
            c.execute(f"DECLARE c CURSOR FOR SUBSCRIBE {name}")


def test_copy_subscribe_to_stdout_streams_until_cancelled(pg_server: Server, name: str) -> None:
    with _connect(pg_server) as c:
        c.execute(f"CREATE TABLE {name} (k bigint NOT NULL)")
        c.execute(f"INSERT INTO {name} VALUES (7)")
        lines: list[str] = []
        with (
            pytest.raises(pgerr.QueryCanceled),
            c.cursor().copy(f"COPY (SUBSCRIBE {name}) TO STDOUT") as copy,
        ):
            for chunk in copy:
                lines += bytes(chunk).decode().splitlines()
                c.cancel_safe()
        assert lines and lines[0].split("\t")[1:] == ["1", "7"]
        assert c.execute(f"SELECT k FROM {name}").fetchall() == [(7,)]


def test_bounded_subscribes_complete_like_queries(pg_server: Server, name: str) -> None:
    """``UP TO`` ends a ``SUBSCRIBE`` by itself: a plain query, ``COPY (SUBSCRIBE ...)`` and a
    cursor all complete (no cancel) once the frontier passes it; ``ENVELOPE UPSERT``'s rows and
    the typed refusals come as Materialize sends them."""
    with _connect(pg_server) as c:
        c.execute(f"CREATE TABLE {name} (k bigint NOT NULL, v text)")
        c.execute(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b')")
        up_to = int(time.time() * 1000) + 1500  # timestamps are milliseconds of the clock
        with c.cursor() as cur:
            cur.execute(f"SUBSCRIBE {name} ENVELOPE UPSERT (KEY (v)) UP TO {up_to}")
            assert [d.name for d in cur.description or ()] == ["mz_timestamp", "mz_state", "v", "k"]
            rows = cur.fetchall()
        assert [r[1:] for r in rows] == [("upsert", "a", 1), ("upsert", "b", 2)]
        assert all(int(r[0]) < up_to for r in rows)
        lines: list[str] = []
        up_to = int(time.time() * 1000) + 1500
        with c.cursor().copy(
            f"COPY (SUBSCRIBE {name} WITH (SNAPSHOT = false) UP TO {up_to}) TO STDOUT"
        ) as copy:
            for chunk in copy:  # ends by itself: nothing changed after the as_of
                lines += bytes(chunk).decode().splitlines()
        assert lines == []
        with pytest.raises(pgerr.DataException, match="up to"):
            c.execute(f"SUBSCRIBE {name} UP TO 1")
        with pytest.raises(pgerr.SyntaxError):
            c.execute(f"SUBSCRIBE {name} WITH (SNAPSHOT, SNAPSHOT)")
        with pytest.raises(pgerr.UndefinedColumn):
            c.execute(f"SUBSCRIBE {name} ENVELOPE UPSERT (KEY (nope))")
        assert c.execute(f"SELECT count(*) FROM {name}").fetchone() == (2,)


def test_transactions_as_materialize_has_them(pg_server: Server, name: str) -> None:
    with psycopg.connect(pg_server.url) as c, _connect(pg_server) as other:
        c.execute(f"CREATE TABLE {name} (k bigint NOT NULL)")  # a DDL-only block
        c.commit()
        c.execute(f"INSERT INTO {name} VALUES (1)")
        c.execute(f"INSERT INTO {name} VALUES (2)")
        assert other.execute(f"SELECT count(*) FROM {name}").fetchone() == (0,)
        c.commit()  # both land at one timestamp
        assert other.execute(f"SELECT count(*) FROM {name}").fetchone() == (2,)
        c.execute(f"INSERT INTO {name} VALUES (3)")
        with pytest.raises(pgerr.InvalidTransactionState, match="write-only"):
            c.execute(f"SELECT * FROM {name}")
        with pytest.raises(pgerr.InFailedSqlTransaction):
            c.execute(f"SELECT 1 FROM {name}")
        c.rollback()
        assert other.execute(f"SELECT count(*) FROM {name}").fetchone() == (2,)
        # a read transaction reads at one timestamp
        first = c.execute(f"SELECT count(*) FROM {name}").fetchone()
        other.execute(f"INSERT INTO {name} VALUES (4)")
        assert c.execute(f"SELECT count(*) FROM {name}").fetchone() == first
        with pytest.raises(pgerr.ReadOnlySqlTransaction):
            c.execute(f"INSERT INTO {name} VALUES (5)")
        c.rollback()
        assert c.execute(f"SELECT count(*) FROM {name}").fetchone() == (3,)
        c.commit()


def test_session_variables(pg_server: Server) -> None:
    with _connect(pg_server) as c:
        for sql in (
            "SET search_path TO public",
            "SET application_name = 'my app'",
            "SET extra_float_digits = 3",
            "SET DateStyle = ISO",
            "SET TimeZone = 'UTC'",
            "SET cluster = default",
            "SET transaction_isolation = 'serializable'",
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        ):
            c.execute(sql)
        assert c.info.parameter_status("application_name") == "my app"
        assert c.execute("SHOW application_name").fetchone() == ("my app",)
        assert c.execute("SHOW transaction_isolation").fetchone() == ("serializable",)
        c.execute("RESET application_name")
        assert c.info.parameter_status("application_name") == ""
        with pytest.raises(pgerr.CantChangeRuntimeParam):
            c.execute("SET server_version = '16'")
        all_rows = c.execute("SHOW ALL").fetchall()
        assert ("cluster", "default") in [r[:2] for r in all_rows]
        settings = c.execute(
            "SELECT setting FROM pg_settings WHERE name = 'application_name'"
        ).fetchall()
        assert settings == [("",)]


def test_notices_reach_the_client(pg_server: Server, name: str) -> None:
    with _connect(pg_server) as c:
        notices: list[str] = []
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        c.execute(f"CREATE TABLE {name} (a bigint)")
        c.execute(f"CREATE TABLE IF NOT EXISTS {name} (a bigint)")
        c.execute("COMMIT")
        assert any("already exists" in n for n in notices)
        assert any("no transaction in progress" in n for n in notices)


def test_statement_timeout_and_cancel(pg_server: Server, name: str) -> None:
    with _connect(pg_server) as c:
        c.execute(f"CREATE TABLE {name} (a bigint)")
        c.execute("SET statement_timeout = '300ms'")
        c.execute("BEGIN")
        c.execute(f"DECLARE c CURSOR FOR SUBSCRIBE {name}")
        started = time.monotonic()
        with pytest.raises(pgerr.QueryCanceled, match="statement timeout"):
            c.execute("FETCH ALL c")  # waits for a row (the table is empty: none comes)
        assert time.monotonic() - started < 30
        c.execute("ROLLBACK")
        c.execute("SET statement_timeout = 0")
        c.execute("BEGIN")
        c.execute(f"DECLARE c CURSOR FOR SUBSCRIBE {name}")
        timer = threading.Timer(0.3, c.cancel_safe)
        timer.start()
        with pytest.raises(pgerr.QueryCanceled, match="user request"):
            c.execute("FETCH ALL c")
        c.execute("ROLLBACK")
        assert c.execute(f"SELECT count(*) FROM {name}").fetchone() == (0,)


def test_async_connection(pg_server: Server, name: str) -> None:
    async def body() -> None:
        async with await psycopg.AsyncConnection.connect(pg_server.url, autocommit=True) as c:
            await c.execute(f"CREATE TABLE {name} (a bigint NOT NULL, b text)")
            async with c.cursor() as cur:
                await cur.executemany(f"INSERT INTO {name} VALUES (%s, %s)", [(1, "x"), (2, "y")])
                await cur.execute(f"SELECT b FROM {name} WHERE a = %s", [2], prepare=True)
                assert await cur.fetchall() == [("y",)]
            cur2 = c.cursor(binary=True)
            await cur2.execute(f"SELECT a, b FROM {name} ORDER BY a")
            assert await cur2.fetchall() == [(1, "x"), (2, "y")]
            seen = []
            async with c.cursor() as cur3:
                async for row in cur3.stream(f"SUBSCRIBE {name}"):
                    seen.append(row[1:])
                    if len(seen) == 2:
                        break
            assert sorted(seen) == [(1, 1, "x"), (1, 2, "y")]

    anyio.run(body)


def test_catalog_queries_psycopg_makes(pg_server: Server, name: str) -> None:
    from psycopg.types import TypeInfo

    with _connect(pg_server) as c:
        info = TypeInfo.fetch(c, "int8")
        assert info is not None and info.oid == 20 and info.array_oid == 1016
        c.execute(f"CREATE TABLE {name} (a bigint NOT NULL)")
        rows = c.execute("SELECT name, type FROM mz_objects WHERE name = %s", [name]).fetchall()
        assert rows == [(name, "table")]
        cols = c.execute(
            "SELECT c.name, c.type, c.nullable FROM mz_columns c JOIN mz_tables t "
            "ON c.id = t.id WHERE t.name = %s",
            [name],
        ).fetchall()
        assert cols == [("a", "bigint", False)]


def test_secrets_over_the_wire_never_show_their_value(pg_server: Server, name: str) -> None:
    """``CREATE``/``ALTER``/``DROP SECRET`` and ``SHOW SECRETS`` run in a wire session as through
    ``POST /sql`` (simple and extended protocol); an error about one shows its text with the
    value starred out; in a block that has written, a secret statement is refused as any DDL."""
    secret, value = f"{name}_pw", "s3cr3t-value"
    with _connect(pg_server) as c:
        c.execute(f"CREATE SECRET {secret} AS '{value}'")  # extended protocol
        assert (secret,) in c.execute("SHOW SECRETS").fetchall()
        with c.cursor() as cur:
            cur.execute("SHOW SECRETS", prepare=False)
            assert cur.description is not None and cur.description[0].name == "name"
        simple = psycopg.ClientCursor(c)
        assert (secret,) in simple.execute("SHOW SECRETS").fetchall()
        with pytest.raises(psycopg.Error) as e:
            c.execute(f"CREATE SECRET {secret} AS '{value}'")
        assert "already exists" in str(e.value) and value not in str(e.value)
        assert value not in (e.value.diag.internal_query or "")
        with pytest.raises(psycopg.Error) as e:
            simple.execute(f"ALTER SECRET {name}_nosuch AS '{value}'")
        assert "does not exist" in str(e.value) and value not in str(e.value)
        c.execute(f"ALTER SECRET {secret} AS 'other'")
        c.execute(f"CREATE TABLE {name} (k bigint)")
    with psycopg.connect(pg_server.url) as c:  # a block
        c.execute(f"INSERT INTO {name} VALUES (1)")
        with pytest.raises(pgerr.ActiveSqlTransaction):
            c.execute(f"DROP SECRET {secret}")
        c.rollback()
    with _connect(pg_server) as c:
        c.execute(f"DROP SECRET {secret}")
        assert (secret,) not in c.execute("SHOW SECRETS").fetchall()


def test_a_request_id_names_one_write(pg_server: Server, name: str) -> None:
    """``Environment.execute(..., request_id=...)``: a retry of the write answers its first
    time and adds nothing; the id names exactly one INSERT, UPDATE or DELETE."""
    from functools import partial

    from tidegate.spec.errors import InvalidParameterValue

    env = pg_server.env
    pg_server.run(env.execute, f"CREATE TABLE {name} (k bigint)")
    first = pg_server.run(partial(env.execute, f"INSERT INTO {name} VALUES (1)", request_id=name))
    again = pg_server.run(partial(env.execute, f"INSERT INTO {name} VALUES (1)", request_id=name))
    assert again.time == first.time
    rows = pg_server.run(env.execute, f"SELECT count(*) FROM {name}").rows
    assert rows == [(1,)]
    for sql in (
        f"INSERT INTO {name} VALUES (2); INSERT INTO {name} VALUES (3)",
        f"SELECT * FROM {name}",
        f"CREATE TABLE {name}_b (k bigint)",
    ):
        with pytest.raises(InvalidParameterValue):
            pg_server.run(partial(env.execute, sql, request_id=f"{name}-x"))
    assert pg_server.run(env.execute, f"SELECT count(*) FROM {name}").rows == [(1,)]
    assert (f"{name}_b",) not in pg_server.run(env.execute, "SHOW TABLES").rows


def test_a_ddl_script_is_one_catalog_change_or_none(pg_server: Server, name: str) -> None:
    """A simple query of DDL statements only is one implicit transaction: a failure midway
    leaves every object as it was; a script that succeeds is there whole."""
    with _connect(pg_server) as c:
        simple = psycopg.ClientCursor(c)
        simple.execute(f"CREATE TABLE {name} (k bigint)")
        seqno = pg_server.env.catalog.seqno
        with pytest.raises(psycopg.Error, match="depend"):  # the view is in the way
            simple.execute(
                f"CREATE TABLE {name}_a (k bigint); CREATE VIEW {name}_v AS SELECT k FROM {name};"
                f"DROP TABLE {name}; CREATE TABLE {name}_c (k bigint)"
            )
        assert pg_server.env.catalog.seqno == seqno
        shown = [r[0] for r in c.execute("SHOW TABLES").fetchall()]
        assert name in shown and f"{name}_a" not in shown
        simple.execute(f"CREATE TABLE {name}_a (k bigint); CREATE TABLE {name}_b (k bigint)")
        assert pg_server.env.catalog.seqno == seqno + 1
        c.execute(f"INSERT INTO {name}_b VALUES (1)")
        assert c.execute(f"SELECT k FROM {name}_b").fetchall() == [(1,)]


def test_a_simple_query_of_writes_lands_whole_or_not_at_all(pg_server: Server, name: str) -> None:
    """A simple query of several statements is one implicit transaction, as in PostgreSQL: a
    statement that fails takes the writes before it back; the connection goes on idle."""
    with _connect(pg_server) as c:
        simple = psycopg.ClientCursor(c)
        simple.execute(f"CREATE TABLE {name} (k bigint NOT NULL)")
        with pytest.raises(psycopg.errors.SyntaxError):
            simple.execute(f"INSERT INTO {name} VALUES (1); INSERT INTO {name} VALUES (2, 3)")
        assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert c.execute(f"SELECT count(*) FROM {name}").fetchall() == [(0,)]
        simple.execute(f"INSERT INTO {name} VALUES (1); INSERT INTO {name} VALUES (2)")
        assert c.execute(f"SELECT k FROM {name} ORDER BY k").fetchall() == [(1,), (2,)]
