"""SQL through a real Environment (an in-process python-executor replica over gRPC), its answers
checked against DuckDB on the same data; and ``tidegate sql -c`` against a served environment."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import anyio
import duckdb
import pytest

from tidegate.cli import main
from tidegate.commands import sql as sql_command
from tidegate.commands.control import ControllerInfo, serve_control
from tidegate.commands.service import ControlService
from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.runtime import sql as sql_runtime
from tidegate.spec.errors import SqlError, UndefinedColumn, UnsupportedSql
from tidegate.spec.sql import lower_query, parse_one

pytestmark = pytest.mark.timeout(180)

SETUP = """
CREATE TABLE customer (c_id BIGINT NOT NULL, c_name TEXT NOT NULL, c_balance DOUBLE PRECISION);
CREATE TABLE orders (o_id BIGINT NOT NULL, o_cust BIGINT NOT NULL, o_total DOUBLE PRECISION NOT NULL);
INSERT INTO customer VALUES (1, 'ann', 10.5), (2, 'bob', NULL), (3, 'cy', 99.0);
INSERT INTO orders VALUES (10, 1, 5.0), (11, 1, 7.5), (12, 3, 100.0), (13, 4, 1.0);
"""

QUERIES = [
    "SELECT * FROM customer",
    "SELECT c_name, count(o_id), sum(o_total) FROM customer LEFT JOIN orders ON c_id = o_cust "
    "GROUP BY c_name",
    "SELECT o_cust FROM orders EXCEPT SELECT c_id FROM customer",
    "SELECT c_name FROM customer ORDER BY c_balance DESC NULLS LAST, c_id LIMIT 2",
    "SELECT count(*) FROM orders WHERE o_total > 1000",
]


def test_results_convert_to_arrow_with_their_types() -> None:
    import datetime as dt

    from tidegate.runtime.sql import SqlResult
    from tidegate.spec.plan import ColumnType, ScalarType

    types = (
        ColumnType(ScalarType.INT64, False),
        ColumnType(ScalarType.DATE),
        ColumnType(ScalarType.TIMESTAMP),
        ColumnType(ScalarType.BOOL),
    )
    rows = [(1, dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5), True), (2, None, None, None)]
    table = SqlResult("SELECT 2", ("a", "d", "ts", "b"), types, rows).to_arrow()
    assert [str(f.type) for f in table.schema] == ["int64", "date32[day]", "timestamp[us]", "bool"]
    assert table.to_pylist()[0] == {
        "a": 1,
        "d": dt.date(2024, 1, 2),
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5),
        "b": True,
    }
    assert not table.schema.field("a").nullable and table.column("d").null_count == 1
    empty = SqlResult("SELECT 0", ("a",), types[:1], []).to_arrow()
    assert empty.num_rows == 0 and empty.column_names == ["a"]


def _bag(rows: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows), key=repr)


def _run(body: Any, tmp_path: Path) -> None:
    """``body(env)`` on an environment with two replicas (active replication: either answers)."""

    async def go() -> None:
        with replica(tmp_path) as r1, replica(tmp_path) as r2, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": r1, "r2": r2}) as env:
                await env.wait_connected(timeout_s=60)
                await body(env)

    anyio.run(go)


def test_sql_statements_run_on_an_environment_as_on_duckdb(tmp_path: Path) -> None:
    duck = duckdb.connect()
    duck.execute(SETUP)

    async def body(env: Any) -> None:
        await env.execute(SETUP)
        for q in QUERIES:
            got = await env.execute(q)
            want = duck.execute(q).fetchall()
            assert _bag(got.rows) == _bag(want), q
            if "LIMIT" in q:
                assert got.rows == [tuple(r) for r in want]
        # views, indexes, materialized views; writes as retractions and insertions
        await env.execute(
            "CREATE VIEW rich AS SELECT c_id, c_name FROM customer WHERE c_balance > 50"
        )
        await env.execute("CREATE INDEX rich_idx ON rich (c_id)")
        assert (await env.execute("SELECT * FROM rich")).rows == [(3, "cy")]
        # which path a SELECT takes: the index of the view, a key lookup, or a dataflow
        await env.execute("CREATE INDEX orders_o_id_idx ON orders (o_id)")
        cat = sql_runtime.EnvCatalog(env)

        def path(q: str) -> Any:
            stmt = parse_one(q)
            low = lower_query(stmt.query, cat)  # type: ignore[union-attr]
            fast = sql_runtime._fast_path(env, low.plan, low.finishing())
            return None if fast is None else (env.state.get(fast[0]).name, fast[1])

        assert path("SELECT c_name FROM rich ORDER BY c_id") == ("rich_idx", None)
        assert path("SELECT o_total FROM orders WHERE o_id = 12") == ("orders_o_id_idx", (12,))
        assert path("SELECT * FROM customer") == ("customer", None)
        assert path("SELECT o_total + 1 FROM orders") is None
        assert (await env.execute("SELECT o_total FROM orders WHERE o_id = 12")).rows == [(100.0,)]
        await env.execute(
            "CREATE MATERIALIZED VIEW spend AS SELECT o_cust, sum(o_total) AS s FROM orders GROUP BY o_cust"
        )
        upd = await env.execute("UPDATE customer SET c_balance = 60 WHERE c_name = 'ann'")
        assert upd.status == "UPDATE 1"
        assert _bag((await env.execute("SELECT c_name FROM rich")).rows) == [("ann",), ("cy",)]
        # read below as of just before the delete, after other reads: keep the history for it
        await env.execute("ALTER TABLE orders SET (RETAIN HISTORY FOR '10m')")
        dele = await env.execute("DELETE FROM orders WHERE o_cust = 1")
        assert dele.status == "DELETE 2" and dele.time is not None
        res = await env.execute("SELECT * FROM spend ORDER BY o_cust")
        assert res.rows == [(3, 100.0), (4, 1.0)] and res.columns == ("o_cust", "s")
        old = await env.execute(f"SELECT count(*) FROM orders AS OF {dele.time - 1}")
        assert old.rows == [(4,)]
        assert res.to_arrow().num_rows == 2
        objects = (await env.execute("SHOW OBJECTS")).rows
        assert ("rich_idx", "index") in objects and ("rich", "view") in objects
        sub = await env.subscribe_sql("SUBSCRIBE TO spend")
        first = await sub.__anext__()
        await sub.aclose()
        assert sorted(r for _t, r, _d in first.updates) == [(3, 100.0), (4, 1.0)]
        snap = await env.execute("SUBSCRIBE TO spend")
        assert snap.columns[:2] == ("mz_timestamp", "mz_diff") and len(snap.rows) == 2
        with pytest.raises(UndefinedColumn) as info:
            await env.execute("SELECT c_nam FROM customer")
        assert info.value.position == 8 and "c_name" in (info.value.hint or "")
        copied = await env.execute(f"COPY spend TO 'file://{tmp_path / 'export'}'")
        assert copied.status == "COPY 2" and list((tmp_path / "export").glob("*.parquet"))
        with pytest.raises(UnsupportedSql):
            await env.execute(f"COPY (SELECT s + 1 FROM spend) TO 'file://{tmp_path}'")
        await env.execute("ALTER MATERIALIZED VIEW spend SET (RETAIN HISTORY FOR '10s')")
        with pytest.raises(SqlError, match="other objects depend"):
            await env.execute("DROP TABLE customer")
        await env.execute("DROP TABLE customer CASCADE")
        assert ("rich", "view") not in (await env.execute("SHOW OBJECTS")).rows

    _run(body, tmp_path)


def test_tidegate_sql_command_against_a_served_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = ["--data-dir", str(tmp_path)]

    async def body(env: Any) -> None:
        service = ControlService(env, wait_s=30)
        async with anyio.create_task_group() as tg:
            address = await tg.start(serve_control, service.handle, "t0ken")
            ControllerInfo(address, "t0ken", os.getpid(), str(tmp_path)).write()
            cli = anyio.to_thread.run_sync
            script = tmp_path / "setup.sql"
            script.write_text(
                "CREATE TABLE t (id BIGINT NOT NULL, name TEXT);\n"
                "INSERT INTO t VALUES (1, 'a'), (2, NULL);\n"
            )
            assert await cli(main, ["sql", "-f", str(script), *d]) == 0
            assert "INSERT 0 2" in capsys.readouterr().out
            assert await cli(main, ["sql", "-c", "SELECT * FROM t ORDER BY id", *d]) == 0
            out = capsys.readouterr().out
            assert " id | name" in out and " 1  | a" in out and "(2 rows)" in out
            assert await cli(main, ["sql", "--json", "-c", "SELECT count(*) FROM t", *d]) == 0
            assert json.loads(capsys.readouterr().out)["rows"] == [[2]]
            assert await cli(main, ["sql", "--csv", "-c", "SELECT id FROM t ORDER BY id", *d]) == 0
            assert capsys.readouterr().out == "id\n1\n2\n"
            assert await cli(main, ["sql", "-c", "SELECT nmae FROM t", *d]) == 1
            err = capsys.readouterr().err
            assert 'column "nmae" does not exist' in err and "^" in err and "HINT" in err

            # the shell: a statement over two lines, \d, \d NAME, \timing, \q
            lines = iter(
                ["SELECT count(*)", "FROM t;", "\\d", "\\d t", "\\timing", "SELECT 1;", "\\q"]
            )

            def shell() -> int:
                args = argparse.Namespace(
                    data_dir=str(tmp_path), timeout=30.0, timing=False, json=False, csv=False
                )
                with pytest.MonkeyPatch.context() as mp:
                    mp.setattr("builtins.input", lambda prompt="": next(lines))
                    mp.setattr(Path, "home", lambda: tmp_path)
                    return sql_command._Shell(args).interactive()

            assert await cli(shell) == 0
            out = capsys.readouterr().out
            assert "(1 row)" in out and " t    | table" in out and " name | nullable" in out
            assert "Timing is on." in out and "Time: " in out
            tg.cancel_scope.cancel()

    _run(body, tmp_path)


def test_views_and_statement_texts_survive_a_reopen(tmp_path: Path) -> None:
    data = tmp_path

    async def go() -> None:
        with replica(data) as address, anyio.fail_after(150):
            async with Environment.open(data, replicas={"r1": address}) as env:
                await env.execute(
                    "CREATE TABLE t (a BIGINT NOT NULL, b TEXT);"
                    "INSERT INTO t VALUES (1, 'x'), (2, 'y');"
                    "CREATE VIEW v AS SELECT a FROM t WHERE a > 1;"
                    "CREATE INDEX v_idx ON v (a)"
                )
            async with Environment.open(data, replicas={"r1": address}) as env:
                await env.wait_connected(timeout_s=60)
                assert (await env.execute("SELECT * FROM v")).rows == [(2,)]
                create = (await env.execute("SHOW CREATE VIEW v")).rows
                assert create == [("v", "CREATE VIEW v AS SELECT a FROM t WHERE a > 1")]
                assert (await env.execute("SHOW INDEXES")).rows == [("v_idx", "v", "a")]
                plan = (await env.execute("EXPLAIN SELECT * FROM v")).rows[0][0]
                assert "Filter" in plan and "Get u1" in plan
                await env.drop("t", cascade=True)  # from Python: the view goes too
                assert (await env.execute("SHOW OBJECTS")).rows == []

    anyio.run(go)
