"""Clusters in SQL, as Materialize spells and refuses them.

``CREATE CLUSTER``, ``CREATE CLUSTER REPLICA``, ``ALTER CLUSTER``, ``DROP
CLUSTER [CASCADE]``, ``DROP CLUSTER REPLICA``, ``CREATE INDEX / MATERIALIZED VIEW
... IN CLUSTER``, ``SET cluster``, ``SHOW CLUSTERS``, ``SHOW CLUSTER REPLICAS``
and ``mz_catalog.mz_clusters`` / ``mz_cluster_replicas``, over in-process
replicas (clusters whose replicas need processes are tested with processes, in
``test_environment_clusters_processes.py``).

Pinned Materialize behaviours: an index is used only by queries of its own
cluster (another cluster's query computes from storage instead); a managed
cluster's replicas are not created or dropped by hand (``cannot modify managed
cluster``); a cluster with objects is dropped only with ``CASCADE``
(SQLSTATE 2BP01); an unknown cluster is 42704.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.replica.testing import in_process_replica as replica
from tidegate.runtime import Environment
from tidegate.runtime.sql_session import SqlSession
from tidegate.spec.compute import SendCommand
from tidegate.spec.errors import SqlError
from tidegate.spec.protocol.commands import Peek

pytestmark = pytest.mark.timeout(180)


async def run(session: SqlSession, sql: str) -> Any:
    return (await session.run_script(sql))[-1]


def test_cluster_statements_placement_and_reads(tmp_path: Path) -> None:
    async def main() -> None:
        with replica(tmp_path) as a, replica(tmp_path) as b, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": a}, tick_ms=100) as env:
                peeks: list[str] = []
                env.driver.observers.append(
                    lambda e: (
                        peeks.append(e.instance)
                        if isinstance(e, SendCommand) and isinstance(e.command, Peek)
                        else None
                    )
                )
                await env.create_cluster("analytics", replicas={"r1": b})
                s = SqlSession(env)
                await run(s, "CREATE TABLE t (id int8 NOT NULL, v int8)")
                await run(s, "INSERT INTO t VALUES (1, 10), (2, 20)")
                await run(s, "CREATE VIEW big AS SELECT * FROM t WHERE v > 15")
                await run(s, "CREATE INDEX big_idx IN CLUSTER analytics ON big (id)")
                await run(s, "SET cluster = analytics")
                await run(s, "CREATE MATERIALIZED VIEW total AS SELECT sum(v) AS s FROM t")
                assert env.state.placement(env.resolve("big_idx")) == "analytics"
                assert env.state.placement(env.resolve("total")) == "analytics"  # SET cluster
                peeks.clear()
                assert (await run(s, "SELECT * FROM big")).rows == [(2, 20)]
                assert peeks and set(peeks) == {"analytics"}  # the index, in its cluster
                await run(s, "SET cluster = default")
                peeks.clear()
                # Not readable from default: the query is computed there from storage.
                assert (await run(s, "SELECT * FROM big")).rows == [(2, 20)]
                assert "analytics" not in peeks
                rows = (await run(s, "SELECT * FROM total")).rows  # through storage, from any
                assert rows in ([(30,)], [])  # [] until the view's first write
                await run(s, "CREATE CLUSTER paused (SIZE = 'small', REPLICATION FACTOR = 0)")
                shown = (await run(s, "SHOW CLUSTERS")).rows
                assert [r[0] for r in shown] == ["analytics", "default", "paused"]
                replicas = (await run(s, "SHOW CLUSTER REPLICAS")).rows
                assert [(r[0], r[1]) for r in replicas] == [("analytics", "r1"), ("default", "r1")]
                managed = (
                    await run(
                        s,
                        "SELECT name, managed, size, replication_factor FROM mz_catalog.mz_clusters"
                        " ORDER BY name",
                    )
                ).rows
                assert managed == [
                    ("analytics", False, None, None),
                    ("default", False, None, None),
                    ("paused", True, "small", 0),
                ]
                sizes = (
                    await run(
                        s,
                        "SELECT c.name, r.name FROM mz_catalog.mz_cluster_replicas r "
                        "JOIN mz_catalog.mz_clusters c ON c.id = r.cluster_id ORDER BY 1, 2",
                    )
                ).rows
                assert sizes == [("analytics", "r1"), ("default", "r1")]
                on = (
                    await run(
                        s,
                        "SELECT i.name, c.name FROM mz_catalog.mz_indexes i "
                        "JOIN mz_catalog.mz_clusters c ON c.id = i.cluster_id",
                    )
                ).rows
                assert on == [("big_idx", "analytics")]
                with pytest.raises(SqlError, match="cannot modify managed cluster paused"):
                    await run(s, "CREATE CLUSTER REPLICA paused.r1 (SIZE = 'small')")
                await run(s, "ALTER CLUSTER paused SET (SIZE = 'medium')")
                assert env.state.cluster("paused").size == "medium"
                with pytest.raises(SqlError) as e:
                    await run(s, "DROP CLUSTER analytics")
                assert e.value.sqlstate == "2BP01" and "big_idx" in (e.value.hint or "")
                with pytest.raises(SqlError) as e:
                    await run(s, "SET cluster = nowhere; SELECT * FROM t")
                assert e.value.sqlstate == "42704"
                with pytest.raises(SqlError) as e:
                    await run(s, "CREATE INDEX i2 IN CLUSTER nowhere ON t (id)")
                assert e.value.sqlstate == "42704"
                await run(s, "DROP CLUSTER analytics CASCADE")
                assert env.state.sink("big_idx") is None
                assert [c.name for c in env.state.clusters] == ["default", "paused"]
                note = await run(s, "DROP CLUSTER IF EXISTS analytics, paused")
                assert note.notice == 'cluster "analytics" does not exist, skipping'
                await run(s, "RESET cluster")
                assert (await run(s, "SELECT * FROM big")).rows == [(2, 20)]

    anyio.run(main)
