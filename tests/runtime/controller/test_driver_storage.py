"""The driver and storage replicas: links over the storage protocol, replays, and the writes of
storage-managed collections folded into group commits.

A scripted storage replica (the test pushes its responses) stands behind a fake
transport; the shard store is in memory. Every decision is the spec storage
controller's: the driver connects, reconnects on a new generation when a stream
breaks (the spec replays its history), drops responses of a replaced stream, and
writes each ``ManagedWrite`` at the next commit's timestamp -- a ``truncate`` first
retracting what the collection held.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import anyio
import pytest

from tidegate.runtime.controller import Backoff, ControllerDriver, ShardStorageIO
from tidegate.runtime.transport import ConnectionLost
from tidegate.spec.compute import ReplicaStatusEvent
from tidegate.spec.controller import Controller
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.storage import (
    COUNTER_SCHEMA,
    REMAP_SCHEMA,
    CollectionDescription,
    Ingestion,
    Introspection,
    LoadGenerator,
    Progress,
    RunIngestion,
    SourceStatistics,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageController,
    StorageFrontierUpper,
    StorageHello,
    Table,
)
from tidegate.spec.storage.introspection import (
    SOURCE_STATISTICS,
    SOURCE_STATISTICS_SCHEMA,
    SOURCE_STATUS_HISTORY,
    STATUS_HISTORY_SCHEMA,
)

pytestmark = pytest.mark.timeout(60)

REMAP, DATA, TABLE = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3)
HISTORY, STATS = GlobalId.system(1), GlobalId.system(2)
_BREAK = object()


class _Stream:
    """One connection of a scripted storage replica."""

    def __init__(self) -> None:
        self.push, self.inbox = anyio.create_memory_object_stream[Any](64)
        self.commands: list[Any] = []
        self.got = anyio.Event()

    async def receive(self) -> Any:
        item = await self.inbox.receive()
        if item is _BREAK:
            raise ConnectionLost("the replica went away")
        return item

    async def send_many(self, commands: Any) -> None:
        self.commands.extend(commands)
        self.got.set()
        self.got = anyio.Event()

    async def aclose(self) -> None:
        pass


class _Transport:
    def __init__(self) -> None:
        self.streams: list[_Stream] = []
        self.connected = anyio.Event()

    async def connect(self, address: str) -> _Stream:
        s = _Stream()
        self.streams.append(s)
        self.connected.set()
        self.connected = anyio.Event()
        return s


def _driver(cluster: Any, transport: _Transport) -> ControllerDriver:
    io = ShardStorageIO(cluster.store)
    for id, schema in (
        (REMAP, REMAP_SCHEMA),
        (DATA, COUNTER_SCHEMA),
        (TABLE, COUNTER_SCHEMA),
        (HISTORY, STATUS_HISTORY_SCHEMA),
        (STATS, SOURCE_STATISTICS_SCHEMA),
    ):
        io.set_schema(id, schema)
    return ControllerDriver(
        Controller(StorageController(check_protocol=True), check_protocol=True),
        _Transport(),  # type: ignore[arg-type]  # no compute replicas here
        io,
        address_of=lambda r: r,
        storage_transport=transport,  # type: ignore[arg-type]
        storage_address_of=lambda r: r,
        backoff=Backoff(0.01, 0.05),
        tick_ms=None,
        maintain_ms=None,
        poll_ms=None,
    )


def _create(driver: ControllerDriver) -> None:
    ctl = driver.ctl
    ctl.storage.create_instance("s")
    gen = LoadGenerator("counter", tick_ms=10)
    ctl.storage.create_collections(
        [
            (HISTORY, CollectionDescription(Introspection(SOURCE_STATUS_HISTORY))),
            (STATS, CollectionDescription(Introspection(SOURCE_STATISTICS))),
            (TABLE, CollectionDescription(Table())),
            (REMAP, CollectionDescription(Progress())),
            (DATA, CollectionDescription(Ingestion("s", REMAP, gen, COUNTER_SCHEMA))),
        ]
    )
    ctl.initialization_complete()
    driver.apply()


async def _commands(stream: _Stream, n: int) -> list[Any]:
    with anyio.fail_after(10):
        while len(stream.commands) < n:
            await stream.got.wait()
    return stream.commands


async def _until(check: Any) -> None:
    with anyio.fail_after(10):
        while not check():
            await anyio.sleep(0.005)


async def _contents(driver: ControllerDriver, id: GlobalId) -> list[tuple[Any, int]]:
    upper = driver.storage_frontiers(id)[1]
    counts: dict[Any, int] = {}
    for row, _t, d in await driver.snapshot(id, int(upper.elements[0]) - 1):
        counts[row] = counts.get(row, 0) + d
    return sorted((r, n) for r, n in counts.items() if n)


def test_a_storage_replica_is_replayed_on_each_connection_and_old_streams_are_ignored(
    cluster: Any,
) -> None:
    async def main() -> None:
        transport = _Transport()
        async with _driver(cluster, transport) as driver:
            _create(driver)
            events = driver.events()
            driver.connect_storage_replica("s", "r")
            old = await _first(transport)
            first = await _commands(old, 4)
            assert [type(c).__name__ for c in first] == [
                "StorageHello",
                "RunIngestion",
                "StorageInitializationComplete",
                "StorageAllowWrites",
            ]
            await old.push.send(StorageFrontierUpper(REMAP, Antichain([7])))
            await old.push.send(StorageFrontierUpper(DATA, Antichain([7])))
            await _until(lambda: driver.storage_frontiers(DATA)[1] == Antichain([7]))

            await old.push.send(_BREAK)  # the stream breaks: a new generation, replayed
            await _until(lambda: len(transport.streams) == 2)
            new = transport.streams[1]
            replay = await _commands(new, 4)
            assert isinstance(replay[0], StorageHello) and replay[0] != first[0]
            run = next(c for c in replay if isinstance(c, RunIngestion))
            assert run.resume_upper == Antichain([7])  # where the ingestion's data ends
            await new.push.send(StorageFrontierUpper(REMAP, Antichain([8])))
            await _until(lambda: driver.storage_frontiers(REMAP)[1] == Antichain([8]))
            [info] = driver.storage_replicas()
            assert (info.instance, info.replica, info.epoch, info.connected) == ("s", "r", 2, True)

            # a response the protocol forbids ends the stream; the next one replays again
            await new.push.send(StorageFrontierUpper(GlobalId.user(99), Antichain([1])))
            await _until(lambda: len(transport.streams) == 3)
            await _commands(transport.streams[2], 4)
            seen: list[tuple[str, str, int]] = []
            with anyio.fail_after(10):
                async for e in events:
                    assert isinstance(e, ReplicaStatusEvent) and e.instance == "s"
                    seen.append((e.replica, e.status, e.epoch))
                    if (e.status, e.epoch) == ("connected", 3):
                        break
            assert seen[:3] == [("r", "connecting", 1), ("r", "connected", 1), ("r", "failed", 1)]
            assert ("r", "rehydrating", 2) in seen and ("r", "failed", 2) in seen

            # another replica replaces it (one per instance): the old link is closed, and a
            # response it had on its way is not the instance's any more
            replaced = driver.storage_links.links[("s", "r")]
            driver.connect_storage_replica("s", "r2")
            await _until(lambda: len(transport.streams) == 4)
            assert isinstance((await _commands(transport.streams[3], 4))[0], StorageHello)
            assert replaced.closed
            assert [i.replica for i in driver.storage_replicas()] == ["r2"]
            late = StorageFrontierUpper(DATA, Antichain([50]))
            assert driver.storage_links._on_response(replaced, late) is None
            assert driver.storage_frontiers(DATA)[1] == Antichain([7])
            with anyio.fail_after(10):
                async for e in events:
                    if e.replica == "r" and e.status == "dropped":
                        break

    anyio.run(main)


async def _first(transport: _Transport) -> _Stream:
    await _until(lambda: bool(transport.streams))
    return transport.streams[0]


def test_managed_writes_join_the_next_commit_and_truncate_what_was_there(cluster: Any) -> None:
    async def main() -> None:
        transport = _Transport()
        async with _driver(cluster, transport) as driver:
            _create(driver)
            driver.connect_storage_replica("s", "r")
            stream = await _first(transport)
            await _commands(stream, 1)
            await stream.push.send(StatusUpdate(DATA, SourceStatus.RUNNING))
            stats = SourceStatistics(messages_received=3, updates_committed=2)
            await stream.push.send(StatisticsUpdate(DATA, stats))
            await _until(lambda: driver.ctl.storage.statistics(DATA) == stats)
            ts = await driver.tick()  # the commit the managed writes joined
            assert ts is not None
            before = ts - 60_000
            history = await driver.snapshot(HISTORY, ts)
            assert [(row[1:], t, d) for row, t, d in history] == [
                ((str(DATA), "running", None, None), ts, 1)
            ]
            # occurred_at: the time of the commit that wrote it (at or before ts), UTC
            occurred_ms = (history[0][0][0] - dt.datetime(1970, 1, 1)) // dt.timedelta(
                milliseconds=1
            )
            assert before < occurred_ms <= ts
            assert await _contents(driver, STATS) == [
                ((str(DATA), 3, 0, 0, 2, None, None, None, None, None), 1)
            ]
            # every managed collection advanced with the table
            for id in (HISTORY, STATS, TABLE):
                assert driver.storage_frontiers(id)[1] == Antichain([ts + 1])

        # a new controller over the same shards: statistics start over (truncated), the
        # status history is kept
        async with _driver(cluster, _Transport()) as driver:
            ctl = driver.ctl
            shards = {id: await driver.storage.ensure_shard(id, s) for id, s in _schemas()}
            ctl.storage.create_instance("s")
            gen = LoadGenerator("counter", tick_ms=10)
            ctl.storage.create_collections(
                [
                    (HISTORY, CollectionDescription(Introspection(SOURCE_STATUS_HISTORY))),
                    (STATS, CollectionDescription(Introspection(SOURCE_STATISTICS))),
                    (TABLE, CollectionDescription(Table())),
                    (REMAP, CollectionDescription(Progress())),
                    (DATA, CollectionDescription(Ingestion("s", REMAP, gen, COUNTER_SCHEMA))),
                ],
                shards,
            )
            driver.apply()
            await driver.tick()
            assert await _contents(driver, STATS) == []
            assert [r[1:] for r, _ in await _contents(driver, HISTORY)] == [
                (str(DATA), "running", None, None)
            ]

    anyio.run(main)


def _schemas() -> list[tuple[GlobalId, Any]]:
    return [
        (HISTORY, STATUS_HISTORY_SCHEMA),
        (STATS, SOURCE_STATISTICS_SCHEMA),
        (TABLE, COUNTER_SCHEMA),
        (REMAP, REMAP_SCHEMA),
        (DATA, COUNTER_SCHEMA),
    ]
