"""A script of DDL statements is one catalog change or none, and ``DROP a, b`` drops all or none.

Through a real Environment (an in-process python-executor replica over gRPC). A script
that fails midway -- a name taken, a dependent in the way, a statement that does not parse --
leaves the durable catalog (its version), the running controller's collections and the
secret store as they were, and the environment goes on taking DDL and data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.runtime.controller.errors import RuntimeControllerError
from tidegate.spec.errors import SqlError
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema

pytestmark = pytest.mark.timeout(180)


def _controller(env: Environment) -> set[GlobalId]:
    """The collections the running controller has (storage and compute)."""
    ctl = env._core.driver.ctl
    storage = {c.id for c in ctl.storage.collections()}
    return storage | set(ctl.compute.instance("default").collection_ids())


def _snapshot(env: Environment) -> tuple[Any, ...]:
    return (env.catalog.seqno, env.state, _controller(env))


def _run(data: Path, body: Any) -> None:
    async def go() -> None:
        with replica(data) as address, anyio.fail_after(150):
            async with Environment.open(data, replicas={"r1": address}) as env:
                await env.wait_connected(timeout_s=60)
                await body(env)

    anyio.run(go)


async def _rows(env: Environment, sql: str) -> list[Any]:
    return list((await env.execute(sql)).rows)


def test_a_ddl_script_is_one_catalog_version_and_is_installed(tmp_path: Path) -> None:
    async def body(env: Environment) -> None:
        before = env.catalog.seqno
        await env.execute(
            "CREATE TABLE a (k BIGINT NOT NULL, v TEXT);"
            "CREATE TABLE b (k BIGINT NOT NULL);"
            "CREATE VIEW big AS SELECT k FROM a WHERE k > 1;"
            "CREATE INDEX big_idx ON big (k);"
            "CREATE MATERIALIZED VIEW n AS SELECT count(*) AS c FROM b;"
            "ALTER TABLE a SET (RETAIN HISTORY FOR '1h')"
        )
        assert env.catalog.seqno == (0 if before is None else before + 1)  # one version
        ids = {env.state.by_name(x).id for x in ("a", "b", "big_idx", "n")}
        assert ids <= _controller(env)  # installed, dependencies first
        await env.execute("INSERT INTO a VALUES (1, 'x'), (2, 'y'), (3, 'z')")
        await env.execute("INSERT INTO b VALUES (1), (2)")
        assert sorted(await _rows(env, "SELECT k FROM big")) == [(2,), (3,)]
        assert await _rows(env, "SELECT c FROM n") == [(2,)]
        # a script of drops is one change too, whatever the order of dependents
        seqno = env.catalog.seqno
        await env.execute("DROP TABLE b CASCADE; DROP VIEW big CASCADE")
        assert env.catalog.seqno == seqno + 1
        assert await _rows(env, "SHOW OBJECTS") == [("a", "table")]

    _run(tmp_path, body)


@pytest.mark.parametrize(
    "failing",
    [
        "CREATE TABLE x (k BIGINT)",  # the name is taken
        "DROP TABLE x",  # a view depends on it
        "CREATE INDEX ON nosuch (k)",  # unknown object
        "CREATE TABLE (",  # does not parse: nothing runs at all
    ],
)
def test_a_ddl_script_that_fails_midway_changes_nothing(tmp_path: Path, failing: str) -> None:
    async def body(env: Environment) -> None:
        await env.execute("CREATE TABLE x (k BIGINT NOT NULL)")
        await env.execute("CREATE VIEW xv AS SELECT k FROM x")
        await env.execute("CREATE TABLE y (k BIGINT)")
        await env.execute("INSERT INTO x VALUES (1)")
        before = _snapshot(env)
        secrets = sorted((tmp_path / "secrets").glob("*"))
        script = (
            "CREATE TABLE c1 (k BIGINT NOT NULL);"
            "CREATE MATERIALIZED VIEW c1_mv AS SELECT k FROM c1;"
            "CREATE INDEX c1_idx ON c1 (k);"
            "CREATE SECRET c1_pw AS 'hunter2';"
            "DROP TABLE y;"
            "ALTER TABLE x SET (RETAIN HISTORY FOR '2h');"
            f"{failing};"
            "CREATE TABLE c2 (k BIGINT)"
        )
        with pytest.raises(SqlError) as e:
            await env.execute(script)
        assert "hunter2" not in str(e.value)
        assert _snapshot(env) == before  # catalog version and state, controller
        assert sorted((tmp_path / "secrets").glob("*")) == secrets  # no value left behind
        # the environment goes on: DDL and data, and the same names are free
        await env.execute("CREATE TABLE c1 (k BIGINT NOT NULL)")
        await env.execute("INSERT INTO c1 VALUES (7)")
        assert await _rows(env, "SELECT k FROM c1") == [(7,)]
        assert await _rows(env, "SELECT k FROM xv") == [(1,)]
        assert await _rows(env, "SELECT k FROM y") == []

    _run(tmp_path, body)


def test_drop_of_several_objects_is_all_or_nothing(tmp_path: Path) -> None:
    async def body(env: Environment) -> None:
        await env.execute("CREATE TABLE b1 (k BIGINT)")
        await env.execute("CREATE TABLE c1 (k BIGINT)")
        await env.execute("CREATE VIEW c1v AS SELECT k FROM c1")
        before = _snapshot(env)
        with pytest.raises(SqlError, match="depend"):
            await env.execute("DROP TABLE b1, c1")  # c1 has a dependent: b1 stays too
        assert _snapshot(env) == before
        # objects named together may depend on each other, in any order
        await env.execute("DROP VIEW c1v")
        await env.execute("CREATE VIEW c1v AS SELECT k FROM c1")
        await env.drop_many(["c1", "c1v"])
        assert await _rows(env, "SHOW OBJECTS") == [("b1", "table")]

    _run(tmp_path, body)


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE CLUSTER c1 REPLICAS ()",
        "CREATE CLUSTER c1 (SIZE = 'small', REPLICATION FACTOR = 0)",
        "ALTER CLUSTER default SET (REPLICATION FACTOR = 2)",
        "DROP CLUSTER quiet",
        "CREATE CLUSTER REPLICA quiet.r9 (SIZE = 'small')",
        "DROP CLUSTER REPLICA quiet.r9",
    ],
)
def test_cluster_statements_run_by_themselves_only(tmp_path: Path, statement: str) -> None:
    """As Materialize refuses them in a transaction block: a cluster statement starts or
    stops replicas at once, so it cannot be part of a script's one catalog change (refused
    before anything of the script runs) nor of a block (25001)."""

    async def body(env: Environment) -> None:
        await env.execute("CREATE CLUSTER quiet REPLICAS ()")  # by itself: runs
        before = _snapshot(env)
        with pytest.raises(SqlError) as e:
            await env.execute(f"CREATE TABLE t1 (k BIGINT); {statement}")
        assert e.value.sqlstate == "25001"
        assert "cannot be run inside a transaction block" in str(e.value)
        assert _snapshot(env) == before  # not even the table
        with pytest.raises(SqlError) as e:
            await env.execute(f"BEGIN; {statement}; COMMIT")
        assert e.value.sqlstate == "25001"
        assert _snapshot(env) == before
        # the environment API refuses them in its DDL transactions, typed, nothing staged
        with pytest.raises(RuntimeControllerError, match="inside a DDL transaction"):
            async with env.ddl_transaction():
                await env.create_table("t1", Schema.of(("k", "int64", False)))
                await env.create_cluster("c1", replicas=[])
        with pytest.raises(RuntimeControllerError, match="inside a DDL transaction"):
            async with env.ddl_transaction():
                await env.drop_cluster("quiet")
        assert _snapshot(env) == before
        # objects placed on a cluster are staged like any other, installed on it at the commit
        async with env.ddl_transaction():
            await env.create_table("t2", Schema.of(("k", "int64", False)))
            gid = await env.create_index("t2", ["k"], name="t2_idx", cluster="quiet")
        assert gid in env._core.driver.ctl.compute.instance("quiet").collection_ids()
        await env.execute("DROP CLUSTER quiet CASCADE")  # by itself: runs
        assert [c.name for c in env.clusters()] == ["default"]
        assert gid not in {e.id for e in env.state.entries()}  # the index went with it

    _run(tmp_path, body)


def test_the_ddl_transaction_api_stages_then_commits_or_discards(tmp_path: Path) -> None:
    async def body(env: Environment) -> None:
        from tidegate.spec.plan import Schema

        schema = Schema.of(("k", "int64", False))
        before = _snapshot(env)
        with pytest.raises(RuntimeError, match="stop"):
            async with env.ddl_transaction():
                await env.create_table("t1", schema)
                assert env.state.by_name("t1") is not None  # seen by its own task
                raise RuntimeError("stop")
        assert _snapshot(env) == before
        async with env.ddl_transaction():
            gid = await env.create_table("t1", schema)
            await env.create_index("t1", ["k"], name="t1_idx")
            assert gid not in _controller(env)  # installed at the commit only
        assert gid in _controller(env)
        ts = await env.append("t1", [(5,)])
        assert await env.peek("t1_idx", at=ts) == [((5,), 1)]

    _run(tmp_path, body)


@pytest.mark.processes
def test_a_script_with_a_source_installs_it_and_the_storage_replica(tmp_path: Path) -> None:
    async def go() -> None:
        with replica(tmp_path) as address, anyio.fail_after(150):
            async with Environment.open(
                tmp_path, replicas={"r1": address}, tick_ms=100, storage_tick_ms=50
            ) as env:
                await env.wait_connected(timeout_s=60)
                failing = (
                    "CREATE SOURCE gone FROM LOAD GENERATOR COUNTER (TICK INTERVAL '20ms');"
                    "CREATE TABLE t1 (k BIGINT); CREATE TABLE t1 (k BIGINT)"  # taken by then
                )
                with pytest.raises(SqlError):
                    await env.execute(failing)
                assert env.storage_replica() is None and env.state.sources == ()
                await env.execute(
                    "CREATE SOURCE c FROM LOAD GENERATOR COUNTER (TICK INTERVAL '20ms');"
                    "CREATE MATERIALIZED VIEW cm AS SELECT count(*) AS n FROM c"
                )
                assert env.storage_replica() is not None
                while not (rows := await _rows(env, "SELECT n FROM cm")) or rows[0][0] < 1:
                    await anyio.sleep(0.05)

    anyio.run(go)
