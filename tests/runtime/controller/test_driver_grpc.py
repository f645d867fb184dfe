"""The controller driver over gRPC to in-process replica servers (python executor), on asyncio and trio.

Each test drives the spec controller through :class:`ControllerDriver`
against :class:`ReplicaService` replicas sharing one in-memory shard store,
and checks what clients see against the reference evaluator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from tidegate.runtime.controller import (
    Backoff,
    ControllerDriver,
    ShardStorageIO,
    SubscribeLagged,
)
from tidegate.runtime.transport.grpc_client import GrpcTransport
from tidegate.spec.controller import Controller
from tidegate.spec.errors import IdentifierMissing, SinceViolation
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema
from tidegate.spec.plan.builder import col, table
from tidegate.spec.plan.reference import evaluate
from tidegate.spec.plan.relation import Plan
from tidegate.spec.protocol.types import (
    BuildDesc,
    DataflowDescription,
    IndexExport,
    MaterializedViewConnection,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)
from tidegate.spec.storage import CollectionDescription, MaterializedView, Table

pytestmark = pytest.mark.timeout(120)

BACKENDS = ["asyncio", "trio"]
SCHEMA = Schema.of(("k", "int64", False), ("v", "int64", False))
T = GlobalId.user(1)
IDX = GlobalId.user(2)
MV = GlobalId.user(3)
SUB = GlobalId.transient(1)
FILTERED = table(T, SCHEMA).filter(col("v") > 10).plan


def dataflow(
    plan: Plan, export: GlobalId, kind: str, as_of: int, inputs: Sequence[GlobalId] = (T,)
) -> DataflowDescription:
    sinks: tuple[SinkExport, ...] = ()
    indexes: tuple[IndexExport, ...] = ()
    if kind == "index":
        indexes = (IndexExport(export, export, (0,)),)
    elif kind == "mv":
        sinks = (SinkExport(export, export, MaterializedViewConnection()),)
    else:
        sinks = (SinkExport(export, export, SubscribeConnection()),)
    return DataflowDescription(
        f"{kind} {export}",
        source_imports=tuple(SourceImport(g) for g in inputs),
        objects_to_build=(BuildDesc(export, plan),),
        index_exports=indexes,
        sink_exports=sinks,
        as_of=Antichain([as_of]),
    )


def expected(plan: Plan, updates: list[Update], at: int) -> list[tuple[Row, int]]:
    return sorted(evaluate(plan, {T: updates}, at).rows.items())


def run(backend: str, main: Callable[[], Any]) -> None:
    anyio.run(main, backend=backend)


@asynccontextmanager
async def driving(
    cluster: Any, replicas: Sequence[str] = ("r1",), **kwargs: Any
) -> AsyncIterator[ControllerDriver]:
    """A running driver with table ``T`` created, instance and replicas added."""
    for r in replicas:
        cluster.start(r)
    kwargs.setdefault("tick_ms", 50)
    kwargs.setdefault("poll_ms", 20)
    io = ShardStorageIO(cluster.store)
    async with (
        GrpcTransport() as transport,
        ControllerDriver(
            Controller(check_protocol=True),
            transport,
            io,
            address_of=cluster.address_of,
            backoff=Backoff(0.02, 0.2),
            **kwargs,
        ) as driver,
    ):
        ctl = driver.ctl
        fr = await io.ensure_shard(T, SCHEMA)
        ctl.storage.create_collections([(T, CollectionDescription(Table()))], {T: fr})
        driver.apply()
        ctl.compute.create_instance(driver.instance)
        driver.apply()
        for r in replicas:
            ctl.compute.add_replica(driver.instance, r)
            driver.apply()
        ctl.initialization_complete()
        driver.apply()
        yield driver


async def append(driver: ControllerDriver, log: list[Update], rows: list[tuple[Row, int]]) -> int:
    ts = await driver.append(T, rows)
    log.extend((r, ts, d) for r, d in rows)
    return ts


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_and_table_peeks_match_the_reference(cluster: Any, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with driving(cluster) as driver:
                log: list[Update] = []
                t0 = await append(driver, log, [((1, 5), 1), ((2, 20), 1), ((3, 30), 1)])
                driver.create_dataflow(dataflow(FILTERED, IDX, "index", t0))
                times = [t0]
                times.append(await append(driver, log, [((2, 20), -1), ((4, 40), 1)]))
                times.append(await append(driver, log, [((5, 50), 2), ((1, 5), -1)]))
                for at in times:
                    got = await driver.peek(IDX, at)
                    assert sorted(got) == expected(FILTERED, log, at)
                    table_rows = await driver.peek(T, at, target="persist")
                    assert sorted(table_rows) == expected(table(T, SCHEMA).plan, log, at)
                # The default time is the freshest complete one: every acknowledged append shows.
                fresh = await driver.peek(IDX)
                assert sorted(fresh) == expected(FILTERED, log, times[-1])
                assert driver.commands_sent > 0 and driver.responses > 0

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_restarted_replica_is_rehydrated_with_the_history(cluster: Any, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with driving(cluster) as driver:
                events = driver.events()
                log: list[Update] = []
                t0 = await append(driver, log, [((1, 15), 1), ((2, 25), 1)])
                driver.create_dataflow(dataflow(FILTERED, IDX, "index", t0))
                assert sorted(await driver.peek(IDX, t0)) == expected(FILTERED, log, t0)
                before = driver.links["r1"].address
                # The replica process dies and comes back on another port, with no state.
                await anyio.to_thread.run_sync(cluster.restart, "r1")
                t1 = await append(driver, log, [((3, 35), 1), ((1, 15), -1)])
                assert sorted(await driver.peek(IDX, t1)) == expected(FILTERED, log, t1)
                (info,) = driver.replicas()
                assert info.epoch == 2 and info.status == "connected" and info.connected
                assert info.address != before
                seen = []
                async for e in events:
                    seen.append((e.status, e.epoch))
                    if e.status == "connected" and e.epoch == 2:
                        break
                assert ("failed", 1) in seen and ("rehydrating", 2) in seen
                await events.aclose()

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancelling_a_peek_cancels_it_in_the_controller(cluster: Any, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with driving(cluster, tick_ms=None) as driver:
                log: list[Update] = []
                t0 = await append(driver, log, [((1, 50), 1)])
                driver.create_dataflow(dataflow(FILTERED, IDX, "index", t0))
                view = driver.ctl.compute.instance(driver.instance)
                with anyio.move_on_after(0.3):
                    await driver.peek(IDX, t0 + 1_000)  # never complete: no tick, no append
                    pytest.fail("a peek of an incomplete time was answered")
                assert view.pending_peeks() == []
                assert sorted(await driver.peek(IDX, t0)) == expected(FILTERED, log, t0)

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_typed_errors_leave_the_controller_unchanged(cluster: Any, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with driving(cluster) as driver:
                log: list[Update] = []
                t0 = await append(driver, log, [((1, 50), 1)])
                driver.create_dataflow(dataflow(FILTERED, IDX, "index", t0))
                view = driver.ctl.compute.instance(driver.instance)
                history = view.history_len()
                with pytest.raises(SinceViolation):
                    await driver.peek(IDX, t0 - 1)
                with pytest.raises(IdentifierMissing):
                    await driver.append(GlobalId.user(99), [((1, 1), 1)])
                assert view.pending_peeks() == []
                assert view.history_len() == history
                assert driver.ctl.storage.pending_appends() == []

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_subscribe_streams_batches_and_a_lagging_one_is_dropped(cluster: Any, backend: str) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with driving(cluster, tick_ms=None) as driver:
                log: list[Update] = []
                t0 = await append(driver, log, [((1, 50), 1), ((2, 5), 1)])
                sub = driver.subscribe(dataflow(FILTERED, SUB, "subscribe", t0), buffer=3)
                first = await sub.__anext__()
                assert first.lower == Antichain([t0])
                assert sorted((r, d) for _, r, d in first.updates) == expected(FILTERED, log, t0)
                t1 = await append(driver, log, [((3, 60), 1)])
                got: list[tuple[int, Row, int]] = []
                async for batch in sub:
                    got.extend(batch.updates)
                    if not batch.upper.less_equal(t1):
                        break
                assert got == [(t1, (3, 60), 1)]
                # Stop reading: the buffer fills and the subscribe is dropped.
                for _ in range(6):
                    await driver.tick()
                    await anyio.sleep(0.05)
                with pytest.raises(SubscribeLagged):
                    async for _ in sub:
                        await anyio.sleep(0)
                view = driver.ctl.compute.instance(driver.instance)
                assert view.active_subscribes() == []

    run(backend, main)


@pytest.mark.parametrize("backend", BACKENDS)
def test_materialized_view_reaches_its_shard_and_compaction_follows_the_policy(
    cluster: Any, backend: str
) -> None:
    async def main() -> None:
        with anyio.fail_after(60):
            async with driving(cluster) as driver:
                ctl, store = driver.ctl, cluster.store
                log: list[Update] = []
                t0 = await append(driver, log, [((1, 15), 1), ((2, 5), 1)])
                fr = await driver.storage.ensure_shard(MV, SCHEMA)
                desc = CollectionDescription(MaterializedView((T,)), since=Antichain([t0]))
                ctl.drain()
                ctl.storage.create_collections([(MV, desc)], {MV: fr})
                driver.apply()
                driver.create_dataflow(dataflow(FILTERED, MV, "mv", t0))
                ctl.compute.allow_writes(driver.instance, MV)
                driver.apply()
                t1 = await append(driver, log, [((3, 35), 1), ((1, 15), -1)])
                # The replica writes the shard; the polled upper flows back as a write frontier.
                await driver.wait_frontiers(
                    lambda: not driver.storage_frontiers(MV)[1].less_equal(t1)
                )
                for at in (t0, t1):
                    rows = await anyio.to_thread.run_sync(store.snapshot_rows, str(MV), at)
                    assert sorted((r, d) for r, _, d in rows) == expected(FILTERED, log, at)
                    assert sorted(await driver.peek(MV, at, target="persist")) == expected(
                        FILTERED, log, at
                    )
                # No policy: the table's shard is never compacted; lag-0 policies let it go
                # (the view's own since holds the table back too).
                assert store.since(str(T)) == Antichain([0])
                driver.set_storage_read_policy([(T, LagWriteFrontier(0, 1))])
                await anyio.sleep(0.3)
                assert store.since(str(T)).less_equal(t0)
                driver.set_storage_read_policy([(MV, LagWriteFrontier(0, 1))])
                while store.since(str(T)).less_equal(t1):
                    await anyio.sleep(0.05)
                assert driver.storage.errors == []

    run(backend, main)
