"""The storage service in this process (``in_process_storage_replica``), over real gRPC: how it treats
streams, protocol violations, and sources and sinks it cannot serve (typed statuses, never a crash)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import anyio
import grpc
import pytest
from storage_harness import (
    COUNTER,
    COUNTER_SCHEMA,
    DATA,
    REMAP,
    Shards,
    StorageClient,
    at,
    check_load_generator_run,
    ingestion,
)

from tidegate.replica.testing import in_process_storage_replica
from tidegate.runtime.transport import STORAGE, STORAGE_PROTOCOL_VERSION, VERSION_HEADER
from tidegate.runtime.wire.storage_codec import storage_command_to_bytes
from tidegate.spec.errors import UpstreamUnreachable
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import (
    CollectionDescription,
    ExportDescription,
    Ingestion,
    LoadGenerator,
    RunIngestion,
    RunSink,
    SimulatedSink,
    SimulatedSource,
    SourceStatus,
    StatusUpdate,
    StorageAllowWrites,
    StorageHello,
    StorageInitializationComplete,
)

pytestmark = pytest.mark.timeout(120)


def stalled(
    id: GlobalId, error_class: str, status: SourceStatus = SourceStatus.STALLED
) -> Callable[[object], bool]:
    def check(r: object) -> bool:
        return (
            isinstance(r, StatusUpdate)
            and r.id == id
            and r.status is status
            and (r.error or "").startswith(error_class)
        )

    return check


def ceased(id: GlobalId, error_class: str) -> Callable[[object], bool]:
    """A status update of ``id``: ``ceased`` (failed for good) with an ``error_class`` error."""
    return stalled(id, error_class, SourceStatus.CEASED)


def test_a_stream_must_start_with_hello(tmp_path: Path) -> None:
    with in_process_storage_replica(tmp_path) as address:

        async def main() -> None:
            c = await StorageClient.connect(address)
            await c.send(StorageInitializationComplete(), check=False)
            lost = await c.ended()
            assert "StorageStageViolation" in str(lost) and "starts with StorageHello" in str(lost)
            c = await StorageClient.connect(address)  # the service keeps serving
            await c.start()
            await c.close()

        anyio.run(main)


def test_a_command_breaking_the_protocol_ends_only_that_stream(tmp_path: Path) -> None:
    shards = Shards(tmp_path)
    shards.create_ingestion(COUNTER_SCHEMA)
    run = ingestion(COUNTER, COUNTER_SCHEMA)
    with in_process_storage_replica(tmp_path, tick_s=0.02) as address:

        async def main() -> None:
            c = await StorageClient.connect(address)
            await c.start(run(at(0)))
            seen = await c.upper_beyond(DATA, 0)
            await c.send(StorageAllowWrites(), check=False)  # a second AllowWrites
            lost = await c.ended()
            assert "DuplicateStorageAllowWrites" in str(lost)
            # A new iteration runs the same ingestion again: reconciled, it keeps running.
            c = await StorageClient.connect(address)
            await c.start(run(shards.upper(DATA)))
            await c.upper_beyond(DATA, seen)
            await c.close()

        anyio.run(main)
    check_load_generator_run(shards, COUNTER)
    shards.close()


def test_malformed_bytes_end_the_stream_and_the_service_keeps_serving(tmp_path: Path) -> None:
    with in_process_storage_replica(tmp_path) as address:
        hello = storage_command_to_bytes(StorageHello(uuid.UUID(int=1)))
        md = ((VERSION_HEADER, STORAGE_PROTOCOL_VERSION),)
        with grpc.insecure_channel(address) as channel:
            call = channel.stream_stream(STORAGE.method)(
                iter([hello, b"\xff\xff\xff"]), metadata=md, timeout=10
            )
            with pytest.raises(grpc.RpcError) as info:
                list(call)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "malformed command" in (info.value.details() or "")

        async def main() -> None:
            c = await StorageClient.connect(address)
            await c.start()
            await c.close()

        anyio.run(main)


def test_what_the_replica_cannot_run_is_a_typed_status(tmp_path: Path) -> None:
    shards = Shards(tmp_path)
    simulated, wrong_schema, no_remap = GlobalId.user(20), GlobalId.user(21), GlobalId.user(22)
    sink = GlobalId.user(23)
    for gid in (simulated, wrong_schema, no_remap):
        shards.create_ingestion(COUNTER_SCHEMA, data=gid, remap=GlobalId.user(gid.value + 100))
    text = Schema.of(("s", "string", False))
    commands = [
        ingestion(SimulatedSource("log"), COUNTER_SCHEMA, simulated, GlobalId.user(120))(at(0)),
        ingestion(LoadGenerator(), text, wrong_schema, GlobalId.user(121))(at(0)),
        RunIngestion(
            no_remap, CollectionDescription(Ingestion("i", None, COUNTER, COUNTER_SCHEMA)), at(0)
        ),
        RunSink(
            sink,
            ExportDescription(simulated, "i", at(0), SimulatedSink("target"), COUNTER_SCHEMA),
            at(0),
            False,
        ),
    ]
    with in_process_storage_replica(tmp_path, service={"backoff_ms": 50}) as address:

        async def main() -> None:
            c = await StorageClient.connect(address)
            await c.start(*commands)
            # A source no new reader can get past (its configuration, its schema) ceases; the
            # sink is retried with back-off and still refused (it stays stalled).
            expected = [
                ceased(simulated, "SourceConfigurationInvalid"),
                ceased(wrong_schema, "InvalidUsage"),
                stalled(sink, "SinkDescriptionInvalid"),
            ]
            await c.until(lambda _: all(any(e(r) for r in c.received) for e in expected))
            gone = [
                r
                for r in c.received
                if isinstance(r, StatusUpdate)
                and r.id == no_remap
                and r.status is SourceStatus.CEASED
            ]
            assert gone and "remap collection" in (gone[0].error or "")
            # The replica keeps serving, and nothing restarts a ceased source.
            await c.drain(0.3)
            for gid in (simulated, wrong_schema, no_remap):
                after = [
                    r.status for r in c.received if isinstance(r, StatusUpdate) and r.id == gid
                ]
                after = after[after.index(SourceStatus.CEASED) :]
                assert set(after) == {SourceStatus.CEASED}, (gid, after)
            await c.close()

        anyio.run(main)
    shards.close()


def test_a_source_factory_serves_what_it_knows_and_its_failures_are_statuses(
    tmp_path: Path,
) -> None:
    shards = Shards(tmp_path)
    shards.create_ingestion(COUNTER_SCHEMA)
    other = GlobalId.user(30)
    shards.create_ingestion(COUNTER_SCHEMA, data=other, remap=GlobalId.user(31))
    asked: list[object] = []

    def factory(id: GlobalId, connection: object, schema: Schema) -> None:
        asked.append(connection)
        if isinstance(connection, SimulatedSource):
            raise RuntimeError(f"upstream {connection.name} is not there")
        return None  # not mine: the service's own reader (a load generator here)

    options = {"source_factory": factory, "backoff_ms": 50}
    with in_process_storage_replica(tmp_path, tick_s=0.02, service=options) as address:

        async def main() -> None:
            c = await StorageClient.connect(address)
            await c.start(
                ingestion(COUNTER, COUNTER_SCHEMA)(at(0)),
                ingestion(SimulatedSource("log"), COUNTER_SCHEMA, other, GlobalId.user(31))(at(0)),
            )
            await c.until(stalled(other, "RuntimeError"))
            await c.upper_beyond(DATA, 0)
            await c.close()

        anyio.run(main)
    assert COUNTER in asked and SimulatedSource("log") in asked
    assert shards.upper(REMAP) != at(0)
    check_load_generator_run(shards, COUNTER)
    shards.close()


class _BreaksAfterConnecting:
    """A reader whose upstream accepts it and then breaks the stream at once, every time."""

    starts = 0

    def start(self, resume_offset: int) -> None:
        type(self).starts += 1

    def poll(self, timeout_s: float) -> None:
        raise UpstreamUnreachable("upstream flaky:5432/db", "connection reset by peer")

    def ack(self, offset: int) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_source_that_keeps_failing_the_same_way_warns_once_and_backs_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An upstream that accepts the reader and breaks the stream at once: the replica retried it
    about every base interval (connecting reset the backoff) and logged a warning each time.
    Now the retries back off while the source makes no progress, and the failure is a warning
    once, on the change (the repeats are DEBUG records)."""
    import logging

    shards = Shards(tmp_path)
    flaky = GlobalId.user(30)
    shards.create_ingestion(COUNTER_SCHEMA, data=flaky, remap=GlobalId.user(31))
    _BreaksAfterConnecting.starts = 0

    def factory(id: GlobalId, connection: object, schema: Schema) -> object:
        return _BreaksAfterConnecting()

    options = {"source_factory": factory, "backoff_ms": 20, "backoff_max_ms": 60_000}
    with (
        caplog.at_level(logging.DEBUG, logger="tidegate.replica"),
        in_process_storage_replica(tmp_path, tick_s=0.01, service=options) as address,
    ):

        async def main() -> None:
            c = await StorageClient.connect(address)
            source = SimulatedSource("flaky")
            await c.start(ingestion(source, COUNTER_SCHEMA, flaky, GlobalId.user(31))(at(0)))
            await c.until(stalled(flaky, "UpstreamUnreachable"))
            with anyio.fail_after(20):  # the fourth failure waits 20 * 2**3 ms after the third
                while _BreaksAfterConnecting.starts < 5:
                    await anyio.sleep(0.01)
            await anyio.sleep(1.0)  # a negative assertion below: no base-interval retries
            await c.close()

        anyio.run(main)
    failed = [r for r in caplog.records if r.getMessage() == "source_failed"]
    assert len(failed) >= 5
    warnings = [r for r in failed if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.levelname for r in failed]
    # doubling from 20 ms: 5 starts take at least 20+40+80+160 ms, and one more second of
    # retries at most 3 more (320, 640 ms); retried every 20 ms it would be about 60
    assert _BreaksAfterConnecting.starts <= 9, _BreaksAfterConnecting.starts
    shards.close()


def test_an_ingestion_resumes_where_its_shards_are_after_the_service_restarts(
    tmp_path: Path,
) -> None:
    """A graceful restart of the service (not the process): the second run resumes from the shards."""
    shards = Shards(tmp_path)
    shards.create_ingestion(COUNTER_SCHEMA)
    run = ingestion(COUNTER, COUNTER_SCHEMA)

    async def ingest(address: str, resume: Antichain) -> None:
        c = await StorageClient.connect(address)
        await c.start(run(resume))
        seen = 0
        for _ in range(3):
            seen = await c.upper_beyond(DATA, max(seen, int(resume.elements[0])))
        await c.close()

    for _ in range(2):
        with in_process_storage_replica(tmp_path, tick_s=0.02) as address:
            anyio.run(ingest, address, shards.upper(DATA))
    assert check_load_generator_run(shards, COUNTER) >= 4
    shards.close()


def test_the_same_service_runs_on_the_simulators_virtual_time(tmp_path: Path) -> None:
    """Hosted by the simulator's kernel host and reached through its transport, the service
    ingests a load generator on virtual time: its loop and IO are the host's, not threads."""
    import trio.testing

    from tidegate.replica.storage.service import StorageService
    from tidegate.runtime.storage import ShardStore, default_urls
    from tidegate.sim.choices import SeededChoices
    from tidegate.sim.kernel import Kernel
    from tidegate.sim.kernel_host import KernelHost
    from tidegate.sim.network import SimNetwork
    from tidegate.sim.transport import SimReplicaEndpoint, SimTransport
    from tidegate.spec.storage import StorageControllerSession, StorageFrontierUpper

    shards = Shards(tmp_path)
    shards.create_ingestion(COUNTER_SCHEMA)
    kernel = Kernel()
    kernel.now_ms = 1_000_000
    store = ShardStore.open(*default_urls(tmp_path))
    host = KernelHost(kernel, lambda: 2, lambda: None)
    service = StorageService(store, host=host, tick_s=0.05, source_idle_s=0.01).start()
    network = SimNetwork(kernel, SeededChoices(1), latency_ms=(1, 3))
    endpoints = {"r1": SimReplicaEndpoint(network, "r1", storage=service)}
    session = StorageControllerSession()
    uppers: list[int] = []

    async def main() -> None:
        async def drive() -> None:
            while True:
                await kernel.run(kernel.now_ms + 5)

        async with anyio.create_task_group() as tg:
            tg.start_soon(drive)
            stream = await SimTransport(endpoints, protocol=STORAGE).connect("r1")
            commands = [
                StorageHello(uuid.UUID(int=1)),
                ingestion(COUNTER, COUNTER_SCHEMA)(at(0)),
                StorageInitializationComplete(),
                StorageAllowWrites(),
            ]
            for cmd in commands:
                session.on_command(cmd)
            await stream.send_many(commands)
            while len(uppers) < 10:
                r = await stream.receive()
                session.on_response(r)
                if isinstance(r, StorageFrontierUpper) and r.id == DATA:
                    uppers.append(int(r.upper.elements[0]))
            tg.cancel_scope.cancel()

    anyio.run(main, backend="trio", backend_options={"clock": trio.testing.MockClock(0)})
    host.kill()
    store.close()
    assert uppers == sorted(uppers) and all(1_000_000 < u < 2_000_000 for u in uppers)  # virtual
    check_load_generator_run(shards, COUNTER)
    shards.close()
