"""``ALTER SINK ... SET FROM``: a sink cut over to another relation, exactly once.

Materialize's ``alter_export`` (src/storage-controller/src/lib.rs): the export
takes a hold on the new input at its since, refuses with ``ReadBeforeSince``
unless that since is before every time of the sink's write frontier, and sends
``RunSink`` with the new description, which replaces the running sink. The
Iceberg target (a real one: pyiceberg, SQLite catalog, local files) therefore
holds the old relation's changes for the times before the cutover and the new
one's after it, every time once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.replica.testing import in_process_replica, in_process_storage_replica
from tidegate.runtime import Environment
from tidegate.runtime.errors import InvalidCatalogOp
from tidegate.runtime.sinks.iceberg import read_changelog
from tidegate.spec.errors import ReadBeforeSince
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import IcebergSink

pytestmark = pytest.mark.timeout(180)

T = Schema.of(("id", "int64", False), ("v", "string"))


async def until_covered(env: Environment, sink: str, time: int) -> int:
    with anyio.fail_after(60):
        while True:
            upper = env.frontiers(sink)[1]
            if upper.elements and int(upper.elements[0]) > time:
                return int(upper.elements[0])
            await anyio.sleep(0.05)


def test_a_sink_cut_over_to_another_table_writes_each_time_once(tmp_path: Path) -> None:
    # The test waits for the sink to cover times without new data: progress commits every
    # 200 ms rather than the default minute (Materialize's sinks likewise pace their commits).
    target = IcebergSink(
        f"sqlite:///{tmp_path}/catalog.db",
        f"file://{tmp_path}/warehouse",
        "tidegate.out",
        commit_interval_ms=100,
        progress_interval_ms=200,
    )

    async def main() -> None:
        with (
            in_process_replica(tmp_path) as compute,
            in_process_storage_replica(tmp_path) as storage,
            anyio.fail_after(150),
        ):
            async with Environment.open(
                tmp_path,
                replicas={"r1": compute},
                storage_replica=storage,
                tick_ms=100,
                storage_tick_ms=50,
            ) as env:
                await env.create_table("old", T)
                await env.create_table("new", T)
                await env.create_table("other", Schema.of(("id", "int64", False)))
                t1 = await env.append("old", [(1, "a")])
                await env.create_sink("out", "old", target)
                with pytest.raises(ReadBeforeSince):  # it has committed nothing yet
                    await env.execute("ALTER SINK out SET FROM new")
                t7 = await env.append("new", [(7, "x")])
                # The cutover is the sink's frontier when it is altered: past t7, so the new
                # relation's row at t7 is before it and never written.
                covered = await until_covered(env, "out", t7)
                with pytest.raises(InvalidCatalogOp, match="schema"):
                    await env.alter_sink("out", "other")
                before = env.state
                await env.execute("ALTER SINK out SET FROM new")
                assert env.state != before and env.state.sink("out").from_id == env.resolve("new")
                t2 = await env.append("new", [(8, "y")])
                t3 = await env.append("old", [(2, "b")])  # after the cutover: never written
                await until_covered(env, "out", max(t2, t3))
                log = Counter()
                for row, t, d in read_changelog(target):
                    log[(row, t)] += d
                rows = {k: v for k, v in log.items() if v}
                mine: dict[Any, int] = {}
                for (row, t), n in rows.items():
                    mine[row] = mine.get(row, 0) + n
                    if row == (8, "y"):
                        assert t == t2  # the new relation's change at its time, once
                    else:
                        assert t < covered  # the old relation's, before the cutover
                assert t1 < covered
                assert mine == {(1, "a"): 1, (8, "y"): 1}
                assert env.storage_status("out")[0].reads == env.resolve("new")

    anyio.run(main)
