"""The storage service in a real replica process (``tidegate replica --services storage``), over real gRPC.

A test client speaks the storage protocol through ``GrpcTransport(protocol=STORAGE)``
and checks every command it sends and response it receives with the spec's
``StorageControllerSession``; the shards are created first, as the storage
controller's driver does. What comes out is checked against the shards
themselves: the data shard holds exactly what one uninterrupted run minting the
same bindings writes -- also after the process is killed with SIGKILL mid-ingestion
and restarted from the data shard's upper.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import psutil
import pytest
from replica_harness import replica_process
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
    upper_int,
)

from tidegate.runtime.transport import (
    COMPUTE,
    ConnectionRefused,
    Unauthenticated,
    VersionMismatch,
)
from tidegate.runtime.transport.grpc_client import GrpcTransport
from tidegate.spec.frontier import Antichain
from tidegate.spec.storage import (
    DroppedId,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageFrontierUpper,
)

pytestmark = [pytest.mark.processes, pytest.mark.timeout(180)]

STORAGE_ONLY = ("--services", "storage", "--storage-tick-ms", "30")


@pytest.fixture
def shards(tmp_path: Path) -> Iterator[Shards]:
    s = Shards(tmp_path)
    s.create_ingestion(COUNTER_SCHEMA)
    yield s
    s.close()


RUN = ingestion(COUNTER, COUNTER_SCHEMA)


def test_a_load_generator_is_ingested_reclocked_by_the_remap_bindings(
    tmp_path: Path, shards: Shards
) -> None:
    with replica_process(tmp_path, *STORAGE_ONLY) as proc:

        async def main() -> None:
            c = await StorageClient.connect(proc.address)
            await c.start(RUN(at(0)))
            first = await c.until(lambda r: isinstance(r, StatusUpdate))
            assert first == StatusUpdate(DATA, SourceStatus.STARTING)
            await c.until(lambda r: r == StatusUpdate(DATA, SourceStatus.RUNNING))
            seen = 0
            for _ in range(5):  # the data upper advances, report after report
                seen = await c.upper_beyond(DATA, seen)
            stats = [r for r in c.received if isinstance(r, StatisticsUpdate) and r.id == DATA]
            assert stats and sum(s.statistics.updates_committed for s in stats) > 0  # type: ignore[union-attr]
            reported_remap = [
                upper_int(r.upper)
                for r in c.received
                if isinstance(r, StorageFrontierUpper) and r.id == REMAP
            ]
            assert reported_remap == sorted(reported_remap) and reported_remap
            await c.close()

        anyio.run(main)
        assert upper_int(shards.upper(DATA)) > 0
        assert check_load_generator_run(shards, COUNTER) >= 3
        ingested = proc.metric("tidegate_storage_ingested_updates_total", source=str(DATA))
        assert ingested is not None and ingested > 0
        assert (proc.metric("tidegate_storage_shard_writes_total", outcome="ok") or 0) >= 10


def test_nothing_is_written_before_allow_writes(tmp_path: Path, shards: Shards) -> None:
    with replica_process(tmp_path, *STORAGE_ONLY) as proc:

        async def main() -> None:
            c = await StorageClient.connect(proc.address)
            await c.start(RUN(at(0)), allow_writes=False)
            await c.until(lambda r: r == StatusUpdate(DATA, SourceStatus.RUNNING))
            quiet = await c.drain(1.0)  # upstream is read meanwhile, nothing written
            assert not any(isinstance(r, StorageFrontierUpper) for r in quiet)
            assert shards.upper(DATA) == at(0) and shards.upper(REMAP) == at(0)
            await c.send(StorageAllowWrites())
            await c.upper_beyond(DATA, 0)
            await c.close()

        anyio.run(main)
        check_load_generator_run(shards, COUNTER)


def test_allow_compaction_to_the_empty_frontier_drops_the_ingestion(
    tmp_path: Path, shards: Shards
) -> None:
    with replica_process(tmp_path, *STORAGE_ONLY) as proc:

        async def main() -> None:
            c = await StorageClient.connect(proc.address)
            await c.start(RUN(at(0)))
            await c.upper_beyond(DATA, 0)
            await c.send(StorageAllowCompaction(DATA, Antichain()))
            await c.until(lambda r: r == DroppedId(DATA))
            assert StatusUpdate(DATA, SourceStatus.DROPPED) in c.received
            stopped_at = shards.upper(DATA)
            await c.drain(0.5)
            assert shards.upper(DATA) == stopped_at  # torn down: nothing more is written
            await c.close()

        anyio.run(main)
        check_load_generator_run(shards, COUNTER)


def test_sigkill_mid_ingestion_then_resuming_equals_an_uninterrupted_run(
    tmp_path: Path, shards: Shards
) -> None:
    async def ingest(address: str, resume: Antichain, advances: int) -> None:
        c = await StorageClient.connect(address)
        await c.start(RUN(resume))
        seen = upper_int(resume)
        for _ in range(advances):
            seen = await c.upper_beyond(DATA, seen)
        # no close: the process dies under the stream

    with replica_process(tmp_path, *STORAGE_ONLY) as first:
        anyio.run(ingest, first.address, at(0), 4)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(10)
    killed_at = upper_int(shards.upper(DATA))
    assert killed_at > 0
    with replica_process(tmp_path, *STORAGE_ONLY) as second:
        resume = shards.upper(DATA)  # the controller's resumption frontier: the data shard's upper
        anyio.run(ingest, second.address, resume, 4)
    assert upper_int(shards.upper(DATA)) > killed_at
    assert check_load_generator_run(shards, COUNTER) >= 6


def test_bad_token_wrong_version_and_an_unserved_protocol_are_refused(tmp_path: Path) -> None:
    with replica_process(tmp_path, *STORAGE_ONLY, "--token", "s3cret") as proc:

        async def main() -> None:
            with pytest.raises(Unauthenticated, match="wrong"):
                await StorageClient.connect(proc.address, token="guess")
            with pytest.raises(Unauthenticated, match="missing"):
                await StorageClient.connect(proc.address)
            with pytest.raises(VersionMismatch, match="storage protocol version") as info:
                await StorageClient.connect(proc.address, token="s3cret", version="999")
            assert info.value.ours == "999"
            with pytest.raises(ConnectionRefused, match="UNIMPLEMENTED"):
                await GrpcTransport(protocol=COMPUTE, token="s3cret").connect(proc.address)
            c = await StorageClient.connect(proc.address, token="s3cret")
            await c.start()
            await c.close()

        anyio.run(main)


def test_a_storage_only_replica_starts_no_jvm(tmp_path: Path) -> None:
    with replica_process(tmp_path, *STORAGE_ONLY, executor="spark") as proc:
        children = psutil.Process(proc.proc.pid).children(recursive=True)
        assert not [p for p in children if "java" in p.name()], "a storage replica started Spark"
        assert proc.log_events("starting")[0]["services"] == ["storage"]


def test_compute_and_storage_share_one_port(tmp_path: Path, shards: Shards) -> None:
    with replica_process(tmp_path, "--services", "compute,storage", "--storage-tick-ms", "30") as p:
        from replica_harness import Client

        async def main() -> None:
            compute = await Client.connect(p.address)
            await compute.initialized()
            storage = await StorageClient.connect(p.address)
            await storage.start(RUN(at(0)))
            await storage.upper_beyond(DATA, 0)
            await compute.drain(0.3)  # the storage stream did not preempt the compute one
            await compute.close()
            await storage.close()

        anyio.run(main)
        assert p.metric("tidegate_storage_connections_accepted_total") == 1
        assert p.metric("tidegate_replica_connections_accepted_total") == 1
        check_load_generator_run(shards, COUNTER)
