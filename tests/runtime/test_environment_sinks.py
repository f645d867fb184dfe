"""Iceberg sinks in the Environment: a table's (or materialized view's) changes committed to a real
Iceberg table (pyiceberg, SQL catalog on SQLite, warehouse on local files) by a managed storage
replica process, exactly once -- also when that process is SIGKILLed while it commits.

The changelog is read back with :func:`tidegate.runtime.sinks.iceberg.read_changelog` and
compared with what was appended: every update after the sink's as-of appears once, at its
own time; everything before it appears consolidated at the as-of.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from tidegate.dsl import col
from tidegate.replica.testing import in_process_replica
from tidegate.runtime import Environment
from tidegate.runtime.errors import DuplicateCatalogName, InvalidCatalogOp, UnknownCatalogObject
from tidegate.runtime.sinks.iceberg import read_changelog
from tidegate.spec.errors import SinkDescriptionInvalid, WrongObjectType
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import IcebergSink

pytestmark = [pytest.mark.processes, pytest.mark.timeout(180)]

OPTIONS: dict[str, Any] = {"tick_ms": 100, "storage_tick_ms": 50}
T = Schema.of(("id", "int64", False), ("v", "string"))


def iceberg(root: Path, table: str = "tidegate.out") -> IcebergSink:
    return IcebergSink(f"sqlite:///{root}/catalog.db", f"file://{root}/warehouse", table)


async def until_covered(env: Environment, sink: str, time: int, timeout_s: float = 60) -> int:
    """Wait until ``sink``'s target covers ``time``; its covered upper."""
    with anyio.fail_after(timeout_s):
        while True:
            upper = env.frontiers(sink)[1]
            if upper.elements and int(upper.elements[0]) > time:
                return int(upper.elements[0])
            await anyio.sleep(0.05)


def consolidated(updates: list[tuple[Any, int, int]]) -> dict[tuple[Any, int], int]:
    out: Counter[tuple[Any, int]] = Counter()
    for row, t, d in updates:
        out[(row, t)] += d
    return {k: v for k, v in out.items() if v}


def check_exactly_once(
    changelog: list[tuple[Any, int, int]],
    before: list[tuple[Any, int]],
    appended: dict[tuple[Any, int], int],
) -> None:
    """Every appended ``(row, time)`` once with its diff; the rest is ``before`` at one time."""
    log = consolidated(changelog)
    later = {k: v for k, v in log.items() if k[1] in {t for _, t in appended}}
    assert later == appended
    earlier = {k: v for k, v in log.items() if k not in later}
    assert len({t for _, t in earlier}) <= 1  # the as-of
    assert sorted((row, n) for (row, _t), n in earlier.items()) == sorted(before)


def scrape(env: Environment) -> dict[tuple[str, str], float]:
    """The controller's metrics of sink ``out``: ``{(sample name, status label): value}``."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from tidegate.runtime.metrics import ControllerMetrics

    text = generate_latest(ControllerMetrics(env).registry).decode()
    return {
        (s.name, s.labels.get("status", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("name") == "out"
    }


async def sink_metrics_match_the_table(env: Environment, target: IcebergSink) -> None:
    """The sink's Prometheus metrics: running, a lag, and as many updates committed as the
    Iceberg table holds (its statistics arrive in the replica's next report)."""
    rows = len(read_changelog(target))
    with anyio.fail_after(60):
        while True:
            got = scrape(env)
            if got.get(("tidegate_controller_sink_updates_committed_total", "")) == rows:
                break
            await anyio.sleep(0.1)
    assert got[("tidegate_controller_storage_status", "running")] == 1
    assert got[("tidegate_controller_storage_status", "stalled")] == 0
    assert got[("tidegate_controller_sink_bytes_committed_total", "")] > 0
    assert got[("tidegate_controller_sink_updates_staged_total", "")] >= rows
    assert 0 <= got[("tidegate_controller_sink_lag_seconds", "")] < 60
    stats = env.storage_status("out")[0].statistics
    assert stats is not None and stats["updates_committed"] == rows  # mz_sink_statistics too
    query = f"SELECT updates_committed FROM mz_sink_statistics WHERE id = '{env.resolve('out')}'"
    with anyio.fail_after(60):  # the table is written a commit behind the report, at most
        while not (found := (await env.execute(query)).rows):
            await anyio.sleep(0.1)
    [(committed,)] = found
    assert committed <= rows


def test_a_table_sink_holds_every_update_once_also_across_a_storage_replica_kill(
    tmp_path: Path,
) -> None:
    target = iceberg(tmp_path)

    async def main() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                await env.create_table("t", T)
                await env.append("t", [(1, "a"), (2, "b")])
                gid = await env.create_sink("out", "t", target)
                appended: dict[tuple[Any, int], int] = {}

                async def write(rows: list[Any]) -> int:
                    ts = await env.append("t", rows)
                    for row, d in ((r, 1) if not isinstance(r[0], tuple) else r for r in rows):
                        appended[(row, ts)] = appended.get((row, ts), 0) + d
                    return ts

                await write([(3, "c")])
                await write([((1, "a"), -1), (1, "z")])
                ts = await write([((2, "b"), -1)])
                await until_covered(env, "out", ts)
                [status] = env.storage_status("out")
                assert (status.kind, status.type, status.reads) == (
                    "sink",
                    "iceberg",
                    env.resolve("t"),
                )
                assert status.status == "running"
                check_exactly_once(read_changelog(target), [((1, "a"), 1), ((2, "b"), 1)], appended)
                await sink_metrics_match_the_table(env, target)

                # SIGKILL the storage replica while appends go on: still exactly once
                assert env.orchestrator is not None
                async with anyio.create_task_group() as tg:

                    async def keep_writing() -> None:
                        for i in range(10, 30):
                            await write([(i, f"x{i}")])
                            await anyio.sleep(0.03)

                    tg.start_soon(keep_writing)
                    await anyio.sleep(0.2)
                    await env.orchestrator.kill("storage")
                ts = await write([(99, "last")])
                await env.wait_storage_connected(timeout_s=60)
                upper = await until_covered(env, "out", ts)
                check_exactly_once(read_changelog(target), [((1, "a"), 1), ((2, "b"), 1)], appended)
                # the changelog's contents are the table's at the covered time
                final: Counter[Any] = Counter()
                for row, _t, d in read_changelog(target):
                    final[row] += d
                contents = await env.peek("t", upper - 1)
                assert sorted((r, n) for r, n in final.items() if n) == sorted(contents)
                assert env.storage_status("out")[0].statistics is not None
                assert gid == env.resolve("out")

    anyio.run(main)


def test_a_materialized_view_sink_resumes_after_a_controller_restart(tmp_path: Path) -> None:
    target = iceberg(tmp_path, "tidegate.big")

    async def main() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(150):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                await env.create_table("t", T)
                await env.create_materialized_view("big", env.table("t").filter(col("id") > 1))
                await env.execute(
                    f"CREATE SINK big_out FROM big INTO ICEBERG CATALOG '{target.catalog_url}' "
                    f"(WAREHOUSE '{target.warehouse}', TABLE '{target.table}')"
                )
                assert (await env.execute("SHOW SINKS")).rows == [("big_out", "iceberg", "big")]
                ts = await env.append("t", [(1, "a"), (2, "b"), (3, "c")])
                await until_covered(env, "big_out", ts)
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                ts = await env.append("t", [((2, "b"), -1), (4, "d")])
                upper = await until_covered(env, "big_out", ts)
                log = read_changelog(target)
                assert consolidated(log)[((4, "d"), ts)] == 1
                assert consolidated(log)[((2, "b"), ts)] == -1
                final: Counter[Any] = Counter()
                for row, _t, d in log:
                    final[row] += d
                assert sorted((r, n) for r, n in final.items() if n) == sorted(
                    await env.peek("big", upper - 1)
                )
                # every update once: no (row, time) was committed by both controllers' replicas
                assert all(abs(d) == 1 for d in consolidated(log).values())
                await env.execute("DROP SINK big_out")
                assert env.storage_status() == []
                assert read_changelog(target) == log  # what it committed stays

    anyio.run(main)


def test_a_sink_of_a_bad_object_or_description_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        with in_process_replica(tmp_path) as compute, anyio.fail_after(120):
            async with Environment.open(tmp_path, replicas={"r1": compute}, **OPTIONS) as env:
                await env.create_table("t", T)
                await env.create_index("t", ["id"], name="t_idx")
                await env.create_view("v", env.table("t"))
                before = env.state
                with pytest.raises(UnknownCatalogObject):
                    await env.create_sink("out", "nope", iceberg(tmp_path))
                with pytest.raises(InvalidCatalogOp):
                    await env.create_sink("out", "t_idx", iceberg(tmp_path))
                with pytest.raises(InvalidCatalogOp):
                    await env.create_sink("out", "v", iceberg(tmp_path))
                with pytest.raises(SinkDescriptionInvalid):
                    await env.create_sink("out", "t", iceberg(tmp_path, "no_namespace"))
                with pytest.raises(SinkDescriptionInvalid):
                    bad = IcebergSink("sqlite:///x.db", "ftp://nowhere", "ns.t")
                    await env.create_sink("out", "t", bad)
                with pytest.raises(DuplicateCatalogName):
                    await env.create_sink("t", "t", iceberg(tmp_path))
                with pytest.raises(WrongObjectType):
                    await env.execute(
                        "CREATE SINK out FROM t_idx INTO ICEBERG CATALOG 'sqlite:///x' "
                        "(WAREHOUSE 'file:///w', TABLE 'ns.t')"
                    )
                assert env.state == before
                assert env.orchestrator is None
                await env.create_sink("out", "t", iceberg(tmp_path))
                with pytest.raises(WrongObjectType):
                    await env.execute("SELECT * FROM out")
                with pytest.raises(UnknownCatalogObject):
                    await env.peek("out")
                from tidegate.runtime.errors import HasDependents

                with pytest.raises(HasDependents):
                    await env.drop("t")
                assert [s.name for s in env.storage_status()] == ["out"]

    anyio.run(main)
