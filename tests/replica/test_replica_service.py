"""``ReplicaService`` in-process, over a real gRPC server: an executor that throws never takes
the service down; the guard's arrangement sizes; one metrics registry per service."""

from __future__ import annotations

import gc
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from replica_harness import ROWS, Client, Tables, at, fresh_id, index_dataflow

from tidegate.replica import GuardedExecutor, ReplicaMetrics, make_executor
from tidegate.replica.service import ReplicaService
from tidegate.replica.spark import IndexStatus
from tidegate.runtime.storage import MemoryBlob, MemoryConsensus, ShardStore
from tidegate.runtime.transport.grpc_server import ReplicaServer
from tidegate.spec.errors import ExecutorError
from tidegate.spec.executor.contract import ExportBatch
from tidegate.spec.executor.python import PythonExecutor
from tidegate.spec.frontier import Antichain, Row
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
    AllowWrites,
    CreateDataflow,
    Frontiers,
    InitializationComplete,
    Peek,
    PeekDescription,
    PeekError,
    PeekResponse,
    PeekRows,
    RowSetFinishing,
    Schedule,
)
from tidegate.spec.protocol.responses import PeekResult
from tidegate.spec.protocol.types import MaterializedViewConnection, SinkExport

pytestmark = pytest.mark.timeout(60)


class FlakyExecutor(PythonExecutor):
    """The reference executor, failing where told to with exceptions no contract names."""

    def __init__(self) -> None:
        super().__init__()
        self.failing_steps = 0
        self.failing_peeks: set[GlobalId] = set()

    def install(self, dataflow):  # type: ignore[no-untyped-def]
        if dataflow.debug_name == "boom":
            raise RuntimeError("kaboom")
        return super().install(dataflow)

    def step(self) -> list[ExportBatch]:
        if self.failing_steps:
            self.failing_steps -= 1
            raise RuntimeError("the step blew up")
        return super().step()

    def peek(
        self,
        index_id: GlobalId,
        time: int,
        finishing: RowSetFinishing | None = None,
        key_lookup: tuple[Row, ...] | None = None,
    ) -> PeekResult:
        if index_id in self.failing_peeks:
            raise KeyError(index_id)
        return super().peek(index_id, time, finishing, key_lookup)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ReplicaService, str, FlakyExecutor, Tables]]:
    tables = Tables(tmp_path)
    executor = FlakyExecutor()
    service = ReplicaService(executor, tables.store, tick_s=0.02).start()
    server = ReplicaServer(service).start()
    try:
        yield service, server.address, executor, tables
    finally:
        server.stop(0)
        service.stop()


def _peek(idx: GlobalId, t: int) -> Peek:
    return Peek(PeekDescription(uuid.uuid4(), idx, t))


def _sample(service: ReplicaService, name: str, **labels: str) -> float:
    return service.metrics.registry.get_sample_value(name, labels) or 0.0


def test_a_stream_must_start_with_hello_and_the_controller_is_blamed(
    served: tuple[ReplicaService, str, FlakyExecutor, Tables],
) -> None:
    """As on the storage side: the stream ends naming the rule, blamed on the controller
    (the remote, seen from the replica), and the service keeps serving."""
    _, address, _, _ = served

    async def main() -> None:
        c = await Client.connect(address, start=False)
        await c.send(InitializationComplete(), check=False)
        lost = await c.ended()
        assert "RemoteStageViolation" in str(lost) and "starts with Hello" in str(lost)
        c = await Client.connect(address)  # a new stream starts over
        await c.initialized()
        await c.close()

    anyio.run(main)


def test_executor_exceptions_become_typed_errors_and_the_service_keeps_serving(
    served: tuple[ReplicaService, str, FlakyExecutor, Tables],
) -> None:
    service, address, executor, tables = served
    t = tables.create()
    tables.append(t, ROWS, 3)
    idx = fresh_id()
    df = index_dataflow(t, index=idx)

    async def main() -> None:
        # install: the core's typed rejection, naming the executor's failure; the stream ends.
        c = await Client.connect(address)
        await c.initialized()
        boom = index_dataflow(t, index=fresh_id(), name="boom")
        await c.send(CreateDataflow(boom), check=False)
        lost = str(await c.ended())
        assert "FAILED_PRECONDITION" in lost and "dataflow-runnable" in lost
        assert "executor failed in install" in lost and "RuntimeError: kaboom" in lost

        c = await Client.connect(address)
        await c.initialized(CreateDataflow(df), Schedule(idx))
        await c.until(lambda r: isinstance(r, Frontiers) and r.id == idx and r.output == at(3))
        # peek: a PeekError answer.
        executor.failing_peeks.add(idx)
        p = _peek(idx, 1)
        await c.send(p)
        r = await c.until(lambda r: isinstance(r, PeekResponse) and r.uuid == p.peek.uuid)
        assert isinstance(r, PeekResponse) and isinstance(r.result, PeekError)
        assert "executor failed in peek" in r.result.message
        executor.failing_peeks.clear()
        # step: logged and counted; the next steps run.
        executor.failing_steps = 2
        tables.append(t, [((4, "d"), 3, 1)], 5)
        p = _peek(idx, 4)
        await c.send(p)
        r = await c.until(lambda r: isinstance(r, PeekResponse) and r.uuid == p.peek.uuid)
        assert isinstance(r, PeekResponse) and isinstance(r.result, PeekRows)
        assert len(r.result.rows) == 4
        await c.close()

    anyio.run(main)
    assert _sample(service, "tidegate_replica_step_errors_total") == 2
    assert _sample(service, "tidegate_replica_command_errors_total", error="DataflowRejected") == 1
    assert service.executor.failures == 4  # install, peek, two steps


def test_a_write_to_a_finalized_view_does_not_block_the_writes_after_it(
    served: tuple[ReplicaService, str, FlakyExecutor, Tables],
) -> None:
    """The view was dropped (its shard finalized) while its write was queued: the writer gives
    that write up as failed at the empty frontier, rather than retrying it forever in front of
    every other view's writes."""
    service, address, _executor, tables = served
    t, gone, kept = tables.create(), tables.create(), tables.create()
    tables.append(t, ROWS, 3)
    tables.store.finalize_shard(str(gone), force=True)

    def view(sink: GlobalId) -> CreateDataflow:
        obj = fresh_id()
        sinks = [SinkExport(sink, obj, MaterializedViewConnection())]
        return CreateDataflow(index_dataflow(t, obj=obj, sinks=sinks))

    async def main() -> None:
        c = await Client.connect(address)
        await c.initialized(view(gone), Schedule(gone), AllowWrites(gone))
        await c.drain(0.3)  # its write is tried (and, before the fix, retried forever)
        await c.send(view(kept), Schedule(kept), AllowWrites(kept))
        await c.until(lambda r: isinstance(r, Frontiers) and r.id == kept and r.write == at(3))
        await c.close()

    anyio.run(main)
    assert tables.contents(kept, 2) == {(1, "a"): 1, (2, "b"): 1, (3, "c"): 1}
    assert _sample(service, "tidegate_replica_writes_total", outcome="finalized") == 1


class StatusExecutor(PythonExecutor):
    """The reference executor reporting a storage status for its indexes, as SparkExecutor does."""

    def __init__(self) -> None:
        super().__init__()
        self.status: dict[GlobalId, IndexStatus] = {}

    def index_status(self) -> dict[GlobalId, IndexStatus]:
        return dict(self.status)


def test_index_storage_status_is_gauged_and_a_new_failure_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tables = Tables(tmp_path)
    executor = StatusExecutor()
    service = ReplicaService(executor, tables.store, tick_s=0.02).start()
    server = ReplicaServer(service).start()
    t = tables.create()
    tables.append(t, ROWS, 3)
    idx = fresh_id()
    executor.status[idx] = IndexStatus("moving")

    async def until_sample(name: str, want: float) -> None:
        with anyio.fail_after(20):
            while _sample(service, name, collection=str(idx)) != want:
                await anyio.sleep(0.02)

    async def main() -> None:
        c = await Client.connect(server.address)
        await c.initialized(CreateDataflow(index_dataflow(t, index=idx)), Schedule(idx))
        await c.until(lambda r: isinstance(r, Frontiers) and r.id == idx and r.output == at(3))
        await until_sample("tidegate_replica_index_in_spark", 0.5)
        executor.status[idx] = IndexStatus("driver", 1, "RuntimeError('Spark is away')")
        tables.append(t, [((4, "d"), 3, 1)], 5)  # a step, and the gauges after it
        await until_sample("tidegate_replica_index_storage_failures", 1)
        assert _sample(service, "tidegate_replica_index_in_spark", collection=str(idx)) == 0
        executor.status[idx] = IndexStatus("spark", 1, "RuntimeError('Spark is away')")
        tables.append(t, [((5, "e"), 5, 1)], 7)
        await until_sample("tidegate_replica_index_in_spark", 1)
        await c.close()

    with caplog.at_level("WARNING", logger="tidegate.replica"):
        try:
            anyio.run(main)
        finally:
            server.stop(0)
            service.stop()
    warned = [r for r in caplog.records if r.getMessage() == "index_storage_failed"]
    assert len(warned) == 1  # once per new failure, not once per step
    assert warned[0].fields["collection"] == str(idx)  # type: ignore[attr-defined]
    assert "Spark is away" in warned[0].fields["error"]  # type: ignore[attr-defined]


def test_the_guard_counts_records_per_export_and_forgets_dropped_ones() -> None:
    guard = GuardedExecutor(PythonExecutor())
    t, idx = fresh_id(), fresh_id()
    h = guard.install(index_dataflow(t, index=idx))
    guard.feed(h, t, [((1, "a"), 0, 1), ((2, "b"), 0, 2), ((1, "a"), 1, -1)], at(2))
    guard.step()
    assert guard.records[idx] == 2
    guard.allow_compaction(idx, Antichain())
    assert idx not in guard.records


def test_the_guard_feeds_and_steps_with_the_cyclic_collector_paused() -> None:
    seen: list[tuple[str, bool]] = []

    class Recording(PythonExecutor):
        def feed(self, *args: Any) -> None:
            seen.append(("feed", gc.isenabled()))
            super().feed(*args)

        def step(self) -> list[ExportBatch]:
            seen.append(("step", gc.isenabled()))
            return super().step()

    guard = GuardedExecutor(Recording())
    t = fresh_id()
    h = guard.install(index_dataflow(t, index=fresh_id()))
    guard.feed(h, t, [((1, "a"), 0, 1)], at(1))
    guard.step()
    assert seen == [("feed", False), ("step", False)]
    assert gc.isenabled()


def test_the_guard_wraps_unexpected_exceptions_only() -> None:
    guard = GuardedExecutor(FlakyExecutor())
    with pytest.raises(ExecutorError, match="executor failed in install of 'boom'"):
        guard.install(index_dataflow(fresh_id(), index=fresh_id(), name="boom"))
    with pytest.raises(ExecutorError) as info:  # a contract error passes through unchanged
        guard.upper(fresh_id())
    assert "executor failed" not in str(info.value)


def test_each_service_has_its_own_metrics_registry() -> None:
    a, b = ReplicaMetrics(), ReplicaMetrics()
    a.connections.inc()
    assert a.registry.get_sample_value("tidegate_replica_connections_accepted_total") == 1
    assert b.registry.get_sample_value("tidegate_replica_connections_accepted_total") == 0


def test_make_executor() -> None:
    assert isinstance(make_executor("python"), PythonExecutor)
    with pytest.raises(ValueError, match="unknown executor"):
        make_executor("gpu")  # type: ignore[arg-type]


def test_a_peek_steps_the_replica_at_once(tmp_path: Path) -> None:
    """Issue 21: inputs wait ``step_delay_s`` to share a step, but a parked peek does not.

    With the periodic step and the input delay both far beyond the test's patience, only
    peeks step this service: each one its command cannot answer (the index has not been
    stepped past its time) runs a step at once, which answers every peek whose time the
    index then reaches (the first may come before the data is delivered)."""
    tables = Tables(tmp_path)
    t = tables.create()
    tables.append(t, ROWS, 3)
    idx = fresh_id()
    service = ReplicaService(PythonExecutor(), tables.store, tick_s=600, step_delay_s=600).start()
    server = ReplicaServer(service).start()

    async def main() -> None:
        c = await Client.connect(server.address)
        await c.initialized(CreateDataflow(index_dataflow(t, index=idx)), Schedule(idx))
        first = _peek(idx, 2)
        await c.send(first)
        with anyio.fail_after(20):
            while not any(getattr(r, "uuid", None) == first.peek.uuid for r in c.received):
                await c.drain(0.2)
                await c.send(_peek(idx, 2))  # the data may have arrived after the first step
        r = await c.answer(first.peek.uuid)
        assert isinstance(r, PeekResponse) and isinstance(r.result, PeekRows)
        assert sorted(r.result.rows) == sorted(tables.contents(t, 2).items())
        await c.close()

    try:
        anyio.run(main)
    finally:
        server.stop(0)
        service.stop()


def test_a_store_that_notifies_wakes_the_reads_that_wait_for_it() -> None:
    """Over a Consensus that says when a key changed (PostgreSQL's notifications; here the
    in-memory one, shared with the writer), a follower and a persist peek wait for that, not
    for a poll: with every polling interval far beyond the test's patience, an append still
    reaches the index's frontier and answers a persist peek waiting beyond the old upper."""
    blob, consensus = MemoryBlob(), MemoryConsensus()  # one disk, two processes' stores
    tables = Tables(store=ShardStore(blob, consensus))
    t = tables.create()
    tables.append(t, ROWS, 3)
    idx = fresh_id()
    service = ReplicaService(
        PythonExecutor(),
        ShardStore(blob, consensus),
        tick_s=0.02,
        poll_s=600,
        poll_max_s=600,
        watch_poll_s=600,
    ).start()
    server = ReplicaServer(service).start()

    async def main() -> None:
        c = await Client.connect(server.address)
        await c.initialized(CreateDataflow(index_dataflow(t, index=idx)), Schedule(idx))
        await c.until(lambda r: isinstance(r, Frontiers) and r.id == idx and r.output == at(3))
        waiting = Peek(PeekDescription(uuid.uuid4(), t, 4, target="persist"))
        await c.send(waiting)
        await c.drain(0.2)  # parked: the shard's upper is 3
        assert not any(getattr(r, "uuid", None) == waiting.peek.uuid for r in c.received)
        tables.append(t, [((4, "d"), 3, 1), ((5, "e"), 4, 1)], 5)
        await c.until(lambda r: isinstance(r, Frontiers) and r.id == idx and r.output == at(5))
        r = await c.answer(waiting.peek.uuid)
        assert isinstance(r, PeekResponse) and isinstance(r.result, PeekRows)
        assert sorted(r.result.rows) == sorted(tables.contents(t, 4).items())
        await c.close()

    try:
        anyio.run(main)
    finally:
        server.stop(0)
        service.stop()
