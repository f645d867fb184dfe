"""The production driver under trio's MockClock, over the simulator's transport and network.

The same :class:`ControllerDriver` that talks gRPC here talks to a simulated
replica (:class:`SimReplicaEndpoint` serving the spec ``ComputeReplica`` over
the python executor and an in-memory shard store) with virtual time: ticks,
backoff and network latency cost no wall-clock time.
"""

from __future__ import annotations

import uuid as _uuid
from collections.abc import Mapping
from typing import Any

import anyio
import pytest
import trio
import trio.testing

from tidegate.runtime.controller import Backoff, ControllerDriver, MemoryOracle, ShardStorageIO
from tidegate.runtime.platform import InlinePlatform
from tidegate.runtime.storage.store import Listener, ShardStore
from tidegate.runtime.transport.handler import ResponseSink
from tidegate.sim.choices import SeededChoices
from tidegate.sim.kernel import Kernel
from tidegate.sim.network import SimNetwork
from tidegate.sim.transport import SimReplicaEndpoint, SimTransport
from tidegate.spec.compute_replica import ComputeReplica
from tidegate.spec.compute_replica.outputs import (
    PeekPersist,
    ReadSource,
    ReplicaOutput,
    Respond,
    StopReading,
    WriteOutput,
)
from tidegate.spec.controller import Controller
from tidegate.spec.errors import UpperMismatch
from tidegate.spec.executor.python import PythonExecutor
from tidegate.spec.frontier import Antichain, Row, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema
from tidegate.spec.plan.builder import col, table
from tidegate.spec.plan.reference import evaluate
from tidegate.spec.protocol.commands import ComputeCommand
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport
from tidegate.spec.storage import CollectionDescription, Table

pytestmark = pytest.mark.timeout(60)

SCHEMA = Schema.of(("k", "int64", False), ("v", "int64", False))
T = GlobalId.user(1)
IDX = GlobalId.user(2)
PLAN = table(T, SCHEMA).filter(col("v") > 10).plan
STEP_MS = 10


class SimStoreReplica:
    """A replica process in the simulation: the spec core, stepped on the kernel, reading a shard store.

    Implements the transport's ``ReplicaHandler``; all calls happen on the
    kernel's (trio) thread. ``crash`` loses the core, as a process crash would.
    """

    def __init__(self, kernel: Kernel, store: ShardStore) -> None:
        self.kernel = kernel
        self.store = store
        self.core = ComputeReplica(PythonExecutor(), clock=lambda: kernel.now_ms)
        self.sink: ResponseSink | None = None
        self.reads: dict[GlobalId, tuple[int, Listener | None]] = {}
        self.persist: list[PeekPersist] = []
        kernel.call_later(STEP_MS, self._tick)

    def crash(self) -> None:
        self.core = ComputeReplica(PythonExecutor(), clock=lambda: self.kernel.now_ms)
        for _, listener in self.reads.values():
            if listener is not None:
                listener.close()
        self.reads.clear()
        self.persist.clear()
        self.sink = None

    def on_connect(self, metadata: Mapping[str, str], responses: ResponseSink) -> Any:
        replica = self

        class Session:
            def on_command(self, command: ComputeCommand) -> None:
                replica.sink = responses
                replica.core.drain()
                replica.core.handle_command(command)
                replica._perform(replica.core.drain())

            def on_close(self) -> None:
                if replica.sink is responses:
                    replica.sink = None

        return Session()

    def _tick(self) -> None:
        for id, (as_of, listener) in list(self.reads.items()):
            shard = str(id)
            if listener is None:
                if self.store.upper(shard).less_equal(as_of):
                    continue
                listener = self.store.listen(shard, as_of)
                self.reads[id] = (as_of, listener)
                rows = self.store.snapshot_rows(shard, as_of)
                self.core.drain()
                self.core.feed_source(id, rows, Antichain([as_of + 1]))
                self._perform(self.core.drain())
            event = listener.poll()
            if event is not None:
                self.core.feed_source(id, event.updates, event.progress)
                self._perform(self.core.drain())
        for p in list(self.persist):
            if not self.store.upper(str(p.collection_id)).less_equal(p.timestamp):
                self.persist.remove(p)
                rows = self.store.snapshot_rows(str(p.collection_id), p.timestamp)
                self.core.complete_persist_peek(p.uuid, {r: d for r, _, d in rows})
                self._perform(self.core.drain())
        if self.core.stage.is_computation:
            self.core.step()
            self._perform(self.core.drain())
        self.kernel.call_later(STEP_MS, self._tick)

    def _perform(self, outputs: list[ReplicaOutput]) -> None:
        for out in outputs:
            if isinstance(out, Respond):
                if self.sink is not None:
                    self.sink.send(out.response)
            elif isinstance(out, ReadSource):
                old = self.reads.pop(out.collection_id, None)
                if old is not None and old[1] is not None:
                    old[1].close()
                if out.as_of.elements:
                    self.reads[out.collection_id] = (int(out.as_of.elements[0]), None)
            elif isinstance(out, StopReading):
                old = self.reads.pop(out.collection_id, None)
                if old is not None and old[1] is not None:
                    old[1].close()
            elif isinstance(out, WriteOutput):
                try:
                    upper = self.store.compare_and_append(
                        str(out.sink_id), list(out.updates), out.lower, out.upper
                    )
                except UpperMismatch as e:
                    self.core.write_failed(out.sink_id, e.actual_upper)
                    self._perform(self.core.drain())
                else:
                    self.core.drain()
                    self.core.write_completed(out.sink_id, upper)
                    self._perform(self.core.drain())
            elif isinstance(out, PeekPersist):
                self.persist.append(out)


def test_driver_runs_under_virtual_time_over_the_simulated_transport() -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def main() -> None:
        kernel = Kernel()
        network = SimNetwork(kernel, SeededChoices(3), latency_ms=(1, 5))
        name = _uuid.uuid4().hex
        store = ShardStore.open(f"mem://{name}", f"mem://{name}")
        replica = SimStoreReplica(kernel, store)
        endpoints = {"r1": SimReplicaEndpoint(network, "r1", replica)}
        oracle = MemoryOracle(lambda: int(trio.current_time() * 1000))
        io = ShardStorageIO(store, platform=InlinePlatform())
        start = trio.current_time()
        with anyio.fail_after(120):  # virtual seconds
            async with anyio.create_task_group() as world:

                async def run_kernel() -> None:
                    while True:
                        await kernel.run(kernel.now_ms + 10)

                world.start_soon(run_kernel)
                async with ControllerDriver(
                    Controller(check_protocol=True),
                    SimTransport(endpoints),
                    io,
                    address_of=lambda r: r,
                    oracle=oracle,
                    tick_ms=100,
                    poll_ms=None,
                    backoff=Backoff(0.05, 1.0),
                ) as driver:
                    ctl = driver.ctl
                    fr = await io.ensure_shard(T, SCHEMA)
                    ctl.storage.create_collections([(T, CollectionDescription(Table()))], {T: fr})
                    driver.apply()
                    ctl.compute.create_instance(driver.instance)
                    driver.apply()
                    ctl.compute.add_replica(driver.instance, "r1")
                    driver.apply()
                    ctl.initialization_complete()
                    driver.apply()
                    log: list[Update] = []

                    async def append(rows: list[tuple[Row, int]]) -> int:
                        ts = await driver.append(T, rows)
                        log.extend((r, ts, d) for r, d in rows)
                        return ts

                    t0 = await append([((1, 5), 1), ((2, 50), 1)])
                    driver.create_dataflow(
                        DataflowDescription(
                            "idx",
                            source_imports=(SourceImport(T),),
                            objects_to_build=(BuildDesc(IDX, PLAN),),
                            index_exports=(IndexExport(IDX, IDX, (0,)),),
                            as_of=Antichain([t0]),
                        )
                    )
                    t1 = await append([((3, 30), 1), ((2, 50), -1)])
                    for at in (t0, t1):
                        got = sorted(await driver.peek(IDX, at))
                        assert got == sorted(evaluate(PLAN, {T: log}, at).rows.items())
                    # Crash the replica for five virtual seconds: backoff, then rehydration.
                    endpoints["r1"].crash()
                    replica.crash()
                    await anyio.sleep(5)
                    assert driver.replicas()[0].attempts > 0
                    endpoints["r1"].restart()
                    t2 = await append([((4, 40), 1)])
                    got = sorted(await driver.peek(IDX, t2))
                    assert got == sorted(evaluate(PLAN, {T: log}, t2).rows.items())
                    info = driver.replicas()[0]
                    assert info.status == "connected" and info.epoch == 2
                world.cancel_scope.cancel()
        assert trio.current_time() - start >= 5  # virtual time passed, at no wall-clock cost

    anyio.run(main, backend="trio", backend_options={"clock": clock})
