"""ShardStorageIO: storage effects carried out against a shard store, outcomes reported back."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio
import pytest

from tidegate.runtime.controller import ShardStorageIO
from tidegate.runtime.controller.schemas import arrow_schema
from tidegate.runtime.controller.storage_io import BRIEF_WRITE_ROWS, CONTROLLER_READER, shard_name
from tidegate.runtime.platform import InlinePlatform
from tidegate.runtime.storage import PostgresConsensus, S3Blob, default_urls
from tidegate.runtime.storage.store import ShardStore
from tidegate.spec.controller import Controller
from tidegate.spec.errors import OpaqueMismatch, ShardFinalized
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema
from tidegate.spec.shard import MemoryBlob, MemoryConsensus, VersionedData
from tidegate.spec.storage import (
    AppendCommand,
    AppendCompleted,
    CollectionDescription,
    DowngradeShardSince,
    DropShard,
    ReadSnapshot,
    RegisterShard,
    Table,
    WriteToShard,
)

pytestmark = pytest.mark.timeout(60)

T = TypeVar("T")

SCHEMA = Schema.of(("k", "int64", False), ("s", "string"), ("d", "date"), ("f", "float64"))
G = GlobalId.user(7)


class Recorder:
    """Stands in for the controller: records the completions the IO reports (to its storage
    layer, which is itself here)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.storage = self

    def complete_write(self, ticket: int, id: GlobalId, ok: bool, upper: Antichain) -> list[Any]:
        self.calls.append(("write", ticket, id, ok, upper))
        return []

    def complete_snapshot(self, request: int) -> list[Any]:
        self.calls.append(("snapshot", request))
        return []


def store() -> ShardStore:
    name = uuid.uuid4().hex
    return ShardStore.open(f"mem://{name}", f"mem://{name}")


async def drained(io: ShardStorageIO, until: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not until():
            await anyio.sleep(0.01)


def run_io(
    main: Callable[[ShardStorageIO, Recorder, ShardStore], Any], on: ShardStore | None = None
) -> None:
    async def outer() -> None:
        s = on or store()
        io = ShardStorageIO(s)
        rec = Recorder()
        async with anyio.create_task_group() as tg:

            def report(fn: Callable[[Any], Sequence[Any]]) -> None:
                fn(rec)

            io.start(tg, report)
            await main(io, rec, s)

    anyio.run(outer)


def test_arrow_schema_is_positional_and_typed() -> None:
    schema = arrow_schema(SCHEMA)
    assert schema.names == ["c0", "c1", "c2", "c3"]
    assert [str(f.type) for f in schema] == ["int64", "string", "date32[day]", "double"]
    assert [f.nullable for f in schema] == [False, True, True, True]


def test_effects_on_one_shard_run_in_order_and_report_outcomes() -> None:
    async def main(io: ShardStorageIO, rec: Recorder, s: ShardStore) -> None:
        io.set_schema(G, SCHEMA)
        row = (1, "a", None, 0.5)
        io.handle(RegisterShard(G))
        io.handle(WriteToShard(1, G, ((row, 3, 1),), Antichain([0]), Antichain([5])))
        io.handle(WriteToShard(2, G, (), Antichain([0]), Antichain([9])))  # stale expectation
        io.handle(WriteToShard(3, G, ((row, 6, 1),), Antichain([5]), Antichain([9])))
        waiter = io.expect_snapshot(11)
        io.handle(ReadSnapshot(11, G, 7))
        await drained(io, lambda: len(rec.calls) == 4)
        assert rec.calls == [
            ("write", 1, G, True, Antichain([5])),
            ("write", 2, G, False, Antichain([5])),
            ("write", 3, G, True, Antichain([9])),
            ("snapshot", 11),
        ]
        assert waiter.done.is_set() and waiter.rows == [(row, 7, 2)]

    run_io(main)


class CountingPlatform(InlinePlatform):
    """Runs blocking calls inline, counting which way each came: brief or not."""

    def __init__(self) -> None:
        super().__init__()
        self.ways: list[str] = []

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        self.ways.append("blocking")
        return fn(*args)

    async def run_brief(self, fn: Callable[..., T], *args: Any) -> T:
        self.ways.append("brief")
        return fn(*args)


@pytest.mark.parametrize("local", [True, False])
def test_small_writes_to_a_local_store_are_brief_calls_and_the_rest_are_not(local: bool) -> None:
    """A group commit's small write to a store on this machine runs where the platform runs
    brief calls (production: on the event loop, cheaper than a worker thread under the GIL);
    a large write, or any write to a remote backend, which may hang, runs as blocking work."""

    class Remote(MemoryConsensus):
        local = False

    async def main() -> None:
        s = ShardStore(MemoryBlob(), MemoryConsensus() if local else Remote())
        assert s.local is local
        platform = CountingPlatform()
        io = ShardStorageIO(s, platform=platform)
        reported: list[object] = []
        async with anyio.create_task_group() as tg:
            io.start(tg, lambda fn: reported.append(fn(Recorder())))
            io.set_schema(G, SCHEMA)
            io.handle(RegisterShard(G))
            small = tuple(((k, "a", None, 0.5), 0, 1) for k in range(BRIEF_WRITE_ROWS))
            large = tuple(((k, "b", None, 0.5), 1, 1) for k in range(BRIEF_WRITE_ROWS + 1))
            io.handle(WriteToShard(1, G, small, Antichain([0]), Antichain([1])))
            io.handle(WriteToShard(2, G, large, Antichain([1]), Antichain([2])))
            await drained(io, lambda: len(reported) == 2)
        assert platform.ways == ["blocking", "brief" if local else "blocking", "blocking"]
        assert s.upper(shard_name(G)) == Antichain([2])

    anyio.run(main)


def test_a_store_is_local_only_when_both_backends_say_so(tmp_path: Path) -> None:
    s = ShardStore.open(*default_urls(tmp_path))  # a file blob and SQLite
    try:
        assert s.local
    finally:
        s.close()
    assert not PostgresConsensus.local and not S3Blob.local
    unsaid = cast(MemoryConsensus, object())  # a backend that does not say is taken as remote
    assert not ShardStore(MemoryBlob(), unsaid).local


def test_since_downgrades_reach_the_critical_reader_and_drop_finalizes() -> None:
    async def main(io: ShardStorageIO, rec: Recorder, s: ShardStore) -> None:
        fr = await io.ensure_shard(G, SCHEMA)
        assert (fr.since, fr.upper) == (Antichain([0]), Antichain([0]))
        s.compare_and_append(str(G), [], 0, 10)
        for t in (2, 4, 6):
            io.handle(DowngradeShardSince(G, Antichain([t])))
        await drained(io, lambda: s.since(str(G)) == Antichain([6]))
        assert s.state(str(G)).critical_readers[CONTROLLER_READER].since == Antichain([6])
        io.handle(DowngradeShardSince(G, Antichain([3])))  # behind: already there, ignored
        io.handle(DropShard(G))
        await drained(io, lambda: s.state(str(G)).finalized)
        assert io.errors == []
        with pytest.raises(ShardFinalized):
            s.compare_and_append(str(G), [], 10, 11)
        io.handle(DropShard(G))  # dropping again (a restarted controller's reconcile) is quiet
        await drained(io, lambda: io.idle)
        assert io.errors == []
        # Best-effort work on a missing shard is recorded, never raised into the driver.
        io.handle(DowngradeShardSince(GlobalId.user(99), Antichain([1])))
        await drained(io, lambda: len(io.errors) == 1)

    run_io(main)


def test_since_downgrades_are_rate_limited_per_shard_and_flushed_once_due() -> None:
    """At most one downgrade per shard per interval reaches the critical reader (persist's
    ``maybe_compare_and_downgrade_since``); the newest one held back is issued by
    ``flush_downgrades`` once the interval has passed; a drop's ``[]`` is never held back."""
    now = [0]

    async def outer() -> None:
        s = store()
        io = ShardStorageIO(s, platform=InlinePlatform(lambda: now[0]), since_interval_ms=1000)
        rec = Recorder()
        async with anyio.create_task_group() as tg:
            io.start(tg, lambda fn: fn(rec))
            await io.ensure_shard(G, SCHEMA)
            s.compare_and_append(str(G), [], 0, 10)
            io.handle(DowngradeShardSince(G, Antichain([2])))
            await drained(io, lambda: s.since(str(G)) == Antichain([2]))
            now[0] = 400
            io.handle(DowngradeShardSince(G, Antichain([5])))
            await drained(io, lambda: io.idle)
            assert s.since(str(G)) == Antichain([2])  # held back
            io.flush_downgrades()  # not due yet
            await drained(io, lambda: io.idle)
            assert s.since(str(G)) == Antichain([2])
            now[0] = 1000
            io.flush_downgrades()
            await drained(io, lambda: s.since(str(G)) == Antichain([5]))
            now[0] = 1100
            io.handle(DowngradeShardSince(G, Antichain([7])))  # within the interval again
            io.handle(DropShard(G))  # ...but the drop goes at once
            await drained(io, lambda: s.state(str(G)).finalized)
            assert io.errors == []

    anyio.run(outer)


def test_a_restored_controller_takes_its_own_readers_since_not_a_lagging_replicas() -> None:
    """Regression (simulator, ``tidegate sim run --seed 114 --scenario standard``): a replica's
    leased reader, which moves its since lazily, held the shard's since behind the controller's
    own. A restarted controller took that lower since, chose an index's as-of below its own
    since, and the replica's read failed once the lease let go. The controller can only keep
    readable what its critical reader holds."""

    async def main(io: ShardStorageIO, rec: Recorder, s: ShardStore) -> None:
        await io.ensure_shard(G, SCHEMA)
        s.compare_and_append(str(G), [], 0, 10)
        s.register_leased_reader(str(G), "replica-r1")  # holds the since at 0
        s.downgrade_since(str(G), CONTROLLER_READER, Antichain([6]))
        assert s.since(str(G)) == Antichain([0])
        restored = ShardStorageIO(s)  # the next incarnation, same reader id
        fr = await restored.ensure_shard(G, SCHEMA)
        assert (fr.since, fr.upper) == (Antichain([6]), Antichain([10]))

    run_io(main)


def test_a_controller_opening_read_write_claims_the_reader_so_a_deposed_one_moves_no_hold() -> None:
    """Found with the simulator's zombie controller: a controller that was taken for dead and
    runs on shares the critical reader with its successor, so its since downgrades (from a
    stale view) could pass what the successor holds. Opening claims the reader with the
    writer epoch as its opaque; the predecessor's downgrades are then refused, typed, and the
    predecessor cannot claim it back."""

    async def main(io: ShardStorageIO, rec: Recorder, s: ShardStore) -> None:
        io.writer_epoch = 1
        await io.ensure_shard(G, SCHEMA)
        s.compare_and_append(str(G), [], 0, 10)
        assert s.state(str(G)).critical_readers[CONTROLLER_READER].opaque == 1
        successor = ShardStorageIO(s)
        successor.writer_epoch = 2
        fr = await successor.ensure_shard(G, SCHEMA)
        assert fr.since == Antichain([0])
        assert s.state(str(G)).critical_readers[CONTROLLER_READER].opaque == 2
        io.handle(DowngradeShardSince(G, Antichain([6])))  # the deposed one's
        await drained(io, lambda: len(io.errors) == 1)
        assert isinstance(io.errors[0][1], OpaqueMismatch)
        assert s.since(str(G)) == Antichain([0])  # the successor's hold stands
        with pytest.raises(OpaqueMismatch):  # nor can it claim the reader back
            await io.ensure_shard(G, SCHEMA)

    run_io(main)


def test_a_full_disk_is_waited_out_by_work_the_catalog_committed_to() -> None:
    """Found with the simulator's ``full_disk`` fault: a DDL whose new shard met a full disk was
    answered as refused although the catalog had recorded it, and a dropped collection's shard
    was never finalized (until a restart). Creating and finalizing a shard now wait for room;
    other work still gets the store's refusal at once."""
    from tidegate.sim.choices import SeededChoices
    from tidegate.sim.process import SimProcess
    from tidegate.sim.storage import BlobClient, ConsensusClient, SimDisk, StorageFaults
    from tidegate.spec.errors import StorageUnavailable

    disk, faults, process = SimDisk(), StorageFaults(SeededChoices(1)), SimProcess("test")
    process.start()
    full = ShardStore(BlobClient(disk, process, faults), ConsensusClient(disk, process, faults))

    async def main(io: ShardStorageIO, rec: Recorder, s: ShardStore) -> None:
        faults.disk_full = 1
        async with anyio.create_task_group() as tg:
            created: list[Any] = []

            async def create() -> None:
                created.append(await io.ensure_shard(G, SCHEMA))

            tg.start_soon(create)
            await anyio.sleep(0.05)
            assert not created  # waiting for room, not refused
            with pytest.raises(StorageUnavailable):  # anything else is refused at once
                other = VersionedData(0, b"x")
                await io.retrying("write", s.consensus.compare_and_set, "other", None, other)
            faults.disk_full = 0
        assert created and created[0].upper == Antichain([0])
        faults.disk_full = 1
        io.handle(DropShard(G))
        await anyio.sleep(0.05)
        assert not s.state(str(G)).finalized
        faults.disk_full = 0
        await drained(io, lambda: s.state(str(G)).finalized)
        assert io.errors == []

    run_io(main, on=full)


def test_transient_failures_are_retried_and_a_write_whose_answer_was_lost_lands_once() -> None:
    """A write whose compare-and-set applied but whose answer was lost used to be reported
    *failed* (so the client's append failed though its rows landed); a downgrade or drop that
    failed once was never retried (a dropped shard stayed unfinalized). Storage effects are now
    retried while they fail transiently, writes with their idempotency token."""
    from tidegate.runtime.platform import InlinePlatform
    from tidegate.sim.choices import SeededChoices
    from tidegate.sim.process import SimProcess
    from tidegate.sim.storage import BlobClient, ConsensusClient, SimDisk, StorageFaults

    async def main() -> None:
        disk, faults, process = SimDisk(), StorageFaults(SeededChoices(3)), SimProcess("c")
        process.start()
        s = ShardStore(BlobClient(disk, process, faults), ConsensusClient(disk, process, faults))
        io = ShardStorageIO(s, platform=InlinePlatform())
        rec = Recorder()
        row = (1, "a", None, 0.5)
        async with anyio.create_task_group() as tg:
            io.start(tg, lambda fn: fn(rec))
            await io.ensure_shard(G, SCHEMA)
            cas = "consensus compare-and-set"
            faults.scripted[cas] = ["after", "before"]
            io.handle(WriteToShard(1, G, ((row, 3, 1),), Antichain([0]), Antichain([5])))
            await drained(io, lambda: len(rec.calls) == 1)
            assert rec.calls == [("write", 1, G, True, Antichain([5]))]
            assert s.snapshot_rows(str(G), 4) == [(row, 4, 1)]  # once, not twice
            faults.scripted[cas] = ["before", "before"]
            io.handle(DropShard(G))
            await drained(io, lambda: io.idle)
            assert s.state(str(G)).finalized
        assert io.retries >= 3 and not io.errors

    anyio.run(main)


def test_an_empty_write_at_the_upper_is_reported_applied(tmp_path: Path) -> None:
    """Issue 16: a write without updates expecting the upper it sets is a no-op success at the
    store (file blob + SQLite consensus here). Before the fix the store refused it with
    InvalidShardBounds, and the IO reported it failed with the shard's upper, which was the
    expected upper itself: an ``InvalidUppers`` that contradicts itself."""

    async def main(io: ShardStorageIO, rec: Recorder, s: ShardStore) -> None:
        io.set_schema(G, SCHEMA)
        row = (1, "a", None, 0.5)
        io.handle(RegisterShard(G))
        io.handle(WriteToShard(1, G, ((row, 3, 1),), Antichain([0]), Antichain([5])))
        io.handle(WriteToShard(2, G, (), Antichain([5]), Antichain([5])))
        io.handle(WriteToShard(3, G, (), Antichain([4]), Antichain([4])))  # not the upper
        await drained(io, lambda: len(rec.calls) == 3)
        assert rec.calls == [
            ("write", 1, G, True, Antichain([5])),
            ("write", 2, G, True, Antichain([5])),
            ("write", 3, G, False, Antichain([5])),
        ]
        assert io.errors == []
        assert s.snapshot_rows(str(G), 4) == [(row, 4, 1)]

    run_io(main, ShardStore.open(*default_urls(tmp_path)))


def test_the_controllers_empty_append_at_the_upper_completes_without_error(
    tmp_path: Path,
) -> None:
    """The same through the spec controller, wired to the IO as the driver wires it (outcomes
    call the controller, then its effects are carried out): the append completes with no
    error and the upper stays. Before the fix it completed with ``InvalidUppers`` naming the
    table at the very upper the append expected."""

    async def outer() -> None:
        io = ShardStorageIO(ShardStore.open(*default_urls(tmp_path)))
        ctl = Controller()
        completed: list[AppendCompleted] = []

        def apply() -> None:
            for e in ctl.drain():
                if isinstance(e, AppendCompleted):
                    completed.append(e)
                elif isinstance(
                    e, RegisterShard | WriteToShard | ReadSnapshot | DowngradeShardSince | DropShard
                ):
                    io.handle(e)

        def report(fn: Callable[[Any], object]) -> None:
            fn(ctl)
            apply()

        async with anyio.create_task_group() as tg:
            io.start(tg, report)
            fr = await io.ensure_shard(G, SCHEMA)
            ctl.storage.create_collections([(G, CollectionDescription(Table()))], {G: fr})
            apply()
            row = (1, "a", None, 0.5)
            first = ctl.storage.append([AppendCommand(G, [(row, 0, 1)], Antichain([3]))])
            empty = ctl.storage.append([AppendCommand(G, [], Antichain([3]))])
            apply()
            await drained(io, lambda: len(completed) == 2)
            assert completed == [AppendCompleted(first, None), AppendCompleted(empty, None)]
            assert ctl.storage.collection(G).upper == Antichain([3])
            assert io.errors == []

    anyio.run(outer)
