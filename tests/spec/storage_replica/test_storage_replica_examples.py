"""Documented behaviours of StorageReplica, one example each (see the module docstring of its replica module)."""

from __future__ import annotations

import inspect
import uuid
from typing import Any

import pytest

from tidegate.spec.errors import (
    DeposedController,
    InvalidBindings,
    RemoteProtocolError,
    ShardWriteNotInFlight,
    SinkCommitNotInFlight,
    SinkInputRejected,
    SourceBatchRejected,
    StorageCommandAfterDrop,
    StorageCommandRejected,
    StorageReplicaError,
    UnknownIngestion,
    UnknownStorageSink,
    UnrequestedStorageCallback,
)
from tidegate.spec.frontier import Antichain, Product
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.schema import Schema
from tidegate.spec.storage import (
    CollectionDescription,
    DroppedId,
    ExportDescription,
    Ingestion,
    RunIngestion,
    RunSink,
    SimulatedSink,
    SimulatedSource,
    SinkStatistics,
    SourceBatch,
    SourceStatistics,
    SourceStatus,
    StatisticsUpdate,
    StatusUpdate,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageFrontierUpper,
    StorageHello,
    StorageInitializationComplete,
)
from tidegate.spec.storage_replica import (
    AckSource,
    CloseSink,
    CommitSink,
    OpenSink,
    ReadRemap,
    ReadSinkInput,
    Reply,
    StartSource,
    StopSinkInput,
    StopSource,
    StorageReplica,
    StorageReplicaOutput,
    WriteShard,
)

REMAP, ING, SINK, INPUT = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3), GlobalId.user(4)
SCHEMA = Schema.of(("v", "int64", False))
SOURCE = SimulatedSource("up")
TARGET = SimulatedSink("down")
DESC = CollectionDescription(Ingestion("i", REMAP, SOURCE, SCHEMA))
RUN = RunIngestion(ING, DESC, Antichain([0]))
SINK_DESC = ExportDescription(INPUT, "i", Antichain([5]), TARGET, SCHEMA)
RUN_SINK = RunSink(SINK, SINK_DESC, Antichain([5]), False)
EMPTY = Antichain()


def A(t: int) -> Antichain:
    return Antichain([t])


def replies(outs: list[StorageReplicaOutput]) -> list[Any]:
    return [o.response for o in outs if isinstance(o, Reply)]


def io(outs: list[StorageReplicaOutput]) -> list[StorageReplicaOutput]:
    return [o for o in outs if not isinstance(o, Reply)]


def acts(outs: list[StorageReplicaOutput]) -> list[Any]:
    """Outputs without statistics (reported on every tick that changed them)."""
    return [
        o for o in outs if not (isinstance(o, Reply) and isinstance(o.response, StatisticsUpdate))
    ]


def started(*commands: Any, writes: bool = True) -> StorageReplica:
    r = StorageReplica(backoff_ms=100, backoff_max_ms=400)
    r.handle_command(StorageHello(uuid.UUID(int=1)))
    for c in commands:
        r.handle_command(c)
    r.handle_command(StorageInitializationComplete())
    if writes:
        r.handle_command(StorageAllowWrites())
    return r


def fingerprint(r: StorageReplica) -> Any:
    return (
        r.session.snapshot(),
        r.ingestions(),
        r.sinks(),
        tuple(r.uppers(i) for i in r.ingestions()),
        tuple(r.buffered().items()),
        tuple(r.status(i) for i in (*r.ingestions(), *r.sinks())),
        r.writes_allowed,
    )


def refused(r: StorageReplica, error: type[Exception], call: Any, *args: Any) -> None:
    r.drain()
    before = fingerprint(r)
    with pytest.raises(error):
        call(*args)
    assert fingerprint(r) == before
    assert io(r.drain()) == []


def loaded(
    writes: bool = True, data_upper: int = 0, remap: tuple[Any, ...] = (), remap_upper: int = 0
) -> StorageReplica:
    r = started(RUN, writes=writes)
    r.drain()
    r.remap_loaded(ING, A(data_upper), list(remap), A(remap_upper))
    return r


# -- ingestion ------------------------------------------------------------------------------


def test_an_ingestion_loads_its_bindings_starts_upstream_and_reports_starting() -> None:
    r = started(RUN)
    outs = r.drain()
    assert io(outs) == [ReadRemap(ING, ING, REMAP)]
    assert replies(outs) == [StatusUpdate(ING, SourceStatus.STARTING)]
    r.remap_loaded(ING, A(0), [], A(0))
    assert io(r.drain()) == [StartSource(ING, SOURCE, SCHEMA, 0)]
    r.source_started(ING)
    assert replies(r.drain()) == [StatusUpdate(ING, SourceStatus.RUNNING)]


def test_each_tick_mints_one_binding_then_writes_remap_then_data() -> None:
    r = loaded()
    r.drain()
    r.feed_source(ING, SourceBatch((((10,), 0, 1), ((11,), 2, 1)), 3, 64))
    assert io(r.drain()) == []  # nothing is written before a tick
    r.tick(1_000)
    assert io(r.drain()) == [WriteShard(REMAP, (((3,), 1_000, 1),), A(0), A(1_001))]
    r.feed_source(ING, SourceBatch((((12,), 3, 1),), 4))
    r.tick(1_001)
    assert io(r.drain()) == []  # one write in flight at a time
    r.write_completed(REMAP, A(1_001))
    assert r.drain() == [
        WriteShard(ING, (((10,), 1_000, 1), ((11,), 1_000, 1)), A(0), A(1_001)),
        Reply(StorageFrontierUpper(REMAP, A(1_001))),
    ]
    r.write_completed(ING, A(1_001))
    assert r.drain() == [AckSource(ING, 3), Reply(StorageFrontierUpper(ING, A(1_001)))]
    assert r.uppers(ING) == (1_001, 1_001)
    # The clock went back: the next binding is at the remap upper, never before it.
    r.tick(5)
    assert io(r.drain()) == [
        WriteShard(REMAP, (((4,), 1_001, 1), ((3,), 1_001, -1)), A(1_001), A(1_002))
    ]


def test_a_quiet_source_still_advances_both_uppers() -> None:
    r = loaded()
    r.source_started(ING)
    r.drain()
    r.tick(50)
    assert io(r.drain()) == [WriteShard(REMAP, (), A(0), A(51))]
    r.write_completed(REMAP, A(51))
    assert io(r.drain()) == [WriteShard(ING, (), A(0), A(51))]
    r.write_completed(ING, A(51))
    assert replies(r.drain()) == [StorageFrontierUpper(ING, A(51))]


def test_bindings_beyond_the_data_upper_get_their_data_first() -> None:
    # A previous incarnation minted [3) at 4 and [5) at 6 but wrote data only up to 4.
    r = loaded(data_upper=4, remap=(((3,), 3, 1), ((5,), 6, 1), ((3,), 6, -1)), remap_upper=7)
    assert r.drain()[0] == StartSource(ING, SOURCE, SCHEMA, 3)  # binding(D - 1)
    r.tick(100)
    assert io(r.drain()) == []  # waits for upstream to deliver the bound offsets
    r.feed_source(ING, SourceBatch((((7,), 3, 1), ((8,), 4, 1), ((9,), 6, 1)), 7))
    assert io(r.drain()) == [WriteShard(ING, (((7,), 6, 1), ((8,), 6, 1)), A(4), A(7))]


def test_nothing_is_written_before_allow_writes() -> None:
    r = loaded(writes=False)
    r.drain()
    r.feed_source(ING, SourceBatch((((1,), 0, 1),), 1))
    r.tick(10)
    assert io(r.drain()) == []
    r.handle_command(StorageAllowWrites())
    r.tick(11)
    assert io(r.drain()) == [WriteShard(REMAP, (((1,), 11, 1),), A(0), A(12))]


def test_a_lost_race_reloads_and_resumes_from_what_is_durable() -> None:
    r = loaded()
    r.drain()
    r.feed_source(ING, SourceBatch((((1,), 0, 1), ((2,), 1, 1)), 2))
    r.tick(10)
    r.drain()
    refused(r, ShardWriteNotInFlight, r.write_failed, REMAP, A(0))  # that is no mismatch
    r.write_failed(REMAP, A(9))
    assert io(r.drain()) == [ReadRemap(ING, ING, REMAP)]
    # The other incarnation bound [1) at 5 and wrote its data: resume at 1, the reader goes on.
    r.remap_loaded(ING, A(6), [((1,), 5, 1)], A(9))
    # Acknowledged up to binding(D - 1); the data of the other's bindings beyond D (none) follow.
    assert io(r.drain()) == [AckSource(ING, 1), WriteShard(ING, (), A(6), A(9))]
    assert r.buffered()[ING] == 1  # offset 0 is durable: dropped
    assert r.uppers(ING) == (6, 9)


def test_driver_bugs_are_typed_and_change_nothing() -> None:
    r = loaded()
    r.drain()
    r.feed_source(ING, SourceBatch((((1,), 0, 1),), 2))
    refused(r, UnknownIngestion, r.feed_source, INPUT, SourceBatch((), 1))
    refused(r, SourceBatchRejected, r.feed_source, ING, SourceBatch((), 1))  # upper goes back
    refused(
        r, SourceBatchRejected, r.feed_source, ING, SourceBatch((((1,), 1, 1),), 3)
    )  # offset delivered
    refused(
        r, SourceBatchRejected, r.feed_source, ING, SourceBatch((((1,), 5, 1),), 5)
    )  # not below upper
    refused(r, SourceBatchRejected, r.feed_source, ING, SourceBatch((("x", 3, 1),), 5))  # not a row
    refused(r, ShardWriteNotInFlight, r.write_completed, ING, A(4))
    refused(r, UnknownIngestion, r.write_completed, INPUT, A(4))
    refused(r, UnrequestedStorageCallback, r.remap_loaded, ING, A(0), [], A(0))
    refused(r, UnrequestedStorageCallback, r.source_started, ING)  # already running (fed)
    refused(r, UnknownStorageSink, r.sink_opened, SINK, None)
    refused(r, StorageCommandRejected, r.tick, -1)
    r.tick(10)
    (write,) = io(r.drain())
    assert isinstance(write, WriteShard)
    refused(r, ShardWriteNotInFlight, r.write_completed, REMAP, A(10))  # another upper


def test_remap_contents_that_are_not_bindings_are_refused() -> None:
    r = started(RUN)
    r.drain()
    refused(r, InvalidBindings, r.remap_loaded, ING, A(5), [], A(3))  # data ahead of remap
    refused(r, InvalidBindings, r.remap_loaded, ING, A(1), [((3,), 0, 2)], A(3))
    r.remap_loaded(ING, A(1), [((3,), 0, 1)], A(3))
    assert r.uppers(ING) == (1, 3)


def test_a_failing_source_stalls_and_restarts_after_a_backoff() -> None:
    r = loaded()
    r.tick(1_000)
    r.drain()
    r.feed_source(ING, SourceBatch((((1,), 0, 1),), 2))
    r.source_failed(ING, "connection reset")
    assert replies(r.drain())[-1] == StatusUpdate(ING, SourceStatus.STALLED, "connection reset")
    r.tick(1_050)
    assert StartSource(ING, SOURCE, SCHEMA, 2) not in r.drain()
    r.tick(1_100)  # 100 ms later: read on from what is buffered
    assert StartSource(ING, SOURCE, SCHEMA, 2) in r.drain()
    r.source_failed(ING, "again")
    r.tick(1_250)
    assert StartSource(ING, SOURCE, SCHEMA, 2) not in r.drain()  # the backoff doubled
    r.tick(1_300)
    assert StartSource(ING, SOURCE, SCHEMA, 2) in r.drain()
    r.source_started(ING)
    assert replies(r.drain())[-1] == StatusUpdate(ING, SourceStatus.RUNNING)


def test_a_source_that_fails_right_after_connecting_backs_off_until_it_makes_progress() -> None:
    """A reader that connects and fails at once (the upstream keeps breaking the stream) was
    retried every base interval for ever, since connecting reset the backoff, its status
    flapping between running and stalled each time: it backs off, doubling up to the maximum,
    until the source makes progress, which forgives the backoff."""
    r = loaded()
    r.tick(1_000)
    r.drain()
    r.feed_source(ING, SourceBatch((((1,), 0, 1),), 2))
    now = 1_000
    for wait in (100, 200, 400, 400):  # each retry connects, then fails as before
        r.source_failed(ING, "UpstreamUnreachable: connection reset")
        r.tick(now + wait - 1)
        assert StartSource(ING, SOURCE, SCHEMA, 2) not in r.drain(), wait
        now += wait
        r.tick(now)
        assert StartSource(ING, SOURCE, SCHEMA, 2) in r.drain(), wait
        r.source_started(ING)
    r.feed_source(ING, SourceBatch((), 2))  # nothing new: still no progress
    r.source_failed(ING, "UpstreamUnreachable: connection reset")
    r.tick(now + 399)
    assert StartSource(ING, SOURCE, SCHEMA, 2) not in r.drain()
    now += 400
    r.tick(now)
    assert StartSource(ING, SOURCE, SCHEMA, 2) in r.drain()
    r.feed_source(ING, SourceBatch((((2,), 2, 1),), 3))  # progress
    r.source_failed(ING, "UpstreamUnreachable: connection reset")
    r.tick(now + 100)  # the base interval again
    assert StartSource(ING, SOURCE, SCHEMA, 3) in r.drain()


def test_drop_tears_down_and_answers_dropped() -> None:
    r = loaded()
    r.source_started(ING)
    r.tick(10)
    r.drain()
    r.handle_command(StorageAllowCompaction(ING, EMPTY))
    outs = r.drain()
    assert io(outs) == [StopSource(ING)]
    assert replies(outs) == [StatusUpdate(ING, SourceStatus.DROPPED), DroppedId(ING)]
    assert r.ingestions() == ()
    r.write_completed(REMAP, A(11))  # the write under way: its outcome is ignored
    assert io(r.drain()) == []
    refused(r, StorageCommandAfterDrop, r.handle_command, StorageAllowCompaction(ING, EMPTY))


def test_an_ingestion_that_cannot_run_ceases_and_can_be_dropped() -> None:
    bare = RunIngestion(ING, CollectionDescription(Ingestion("i")), A(0))
    r = started(bare)
    ((status,),) = [replies(r.drain())]
    assert status.status is SourceStatus.CEASED and "remap collection, connection, schema" in (
        status.error or ""
    )
    r.tick(5)
    assert r.drain() == []  # nothing to do, nothing to report
    r.handle_command(StorageAllowCompaction(ING, EMPTY))
    assert replies(r.drain()) == [StatusUpdate(ING, SourceStatus.DROPPED), DroppedId(ING)]


def test_a_reconnect_keeps_what_it_runs_again_and_stops_the_rest() -> None:
    r = loaded()
    r.source_started(ING)
    r.handle_command(RUN_SINK)
    r.tick(10)
    r.drain()
    r.handle_command(StorageHello(uuid.UUID(int=2)))
    r.handle_command(RUN)
    r.handle_command(StorageInitializationComplete())
    outs = r.drain()
    assert io(outs) == [CloseSink(SINK)]  # the sink was not run again
    assert replies(outs) == [
        StatusUpdate(ING, SourceStatus.RUNNING)
    ]  # re-reported in the new iteration
    assert r.ingestions() == (ING,)
    r.write_completed(REMAP, A(11))  # the write under way goes on ...
    assert r.drain() == [Reply(StorageFrontierUpper(REMAP, A(11)))]
    r.handle_command(StorageAllowWrites())  # ... but writes wait for this iteration's AllowWrites
    assert [type(o) for o in r.drain()] == [WriteShard]


def test_statistics_are_reported_on_ticks() -> None:
    r = loaded()
    r.drain()
    r.feed_source(ING, SourceBatch((((1,), 0, 1), ((2,), 0, 1)), 1, 40))
    r.tick(10)
    stats = [x for x in replies(r.drain()) if isinstance(x, StatisticsUpdate)]
    assert stats == [StatisticsUpdate(ING, SourceStatistics(2, 40, offset_known=1))]
    r.tick(11)
    assert [x for x in replies(r.drain()) if isinstance(x, StatisticsUpdate)] == []


def test_protocol_violations_are_the_controllers_and_change_nothing() -> None:
    r = loaded()
    r.drain()
    refused(r, RemoteProtocolError, r.handle_command, StorageInitializationComplete())
    refused(r, RemoteProtocolError, r.handle_command, RUN)
    product = Antichain([Product(1, 2)])
    refused(r, StorageCommandRejected, r.handle_command, RunSink(SINK, SINK_DESC, product, False))


# -- sinks ----------------------------------------------------------------------------------


def test_a_sink_first_commits_the_snapshot_at_its_as_of() -> None:
    r = started(RUN_SINK)
    assert io(r.drain()) == [OpenSink(SINK, TARGET, SCHEMA)]
    r.sink_opened(SINK, None)
    assert r.drain() == [
        ReadSinkInput(SINK, INPUT, 5),
        Reply(StatusUpdate(SINK, SourceStatus.RUNNING)),
    ]
    r.feed_sink_input(SINK, [((1,), 5, 1), ((2,), 5, 1)], 6)
    r.feed_sink_input(SINK, [((1,), 7, -1)], 8)
    refused(r, SinkInputRejected, r.feed_sink_input, SINK, [((3,), 7, 1)], 9)  # before the upper
    refused(r, SinkInputRejected, r.feed_sink_input, SINK, [], 7)  # the upper goes back
    r.tick(1)
    assert io(r.drain()) == [  # in time order; at a time, in the order they were read
        CommitSink(SINK, (((1,), 5, 1), ((2,), 5, 1), ((1,), 7, -1)), None, 5, 8)
    ]
    refused(r, SinkCommitNotInFlight, r.sink_committed, SINK, 9)
    r.sink_committed(SINK, 8, 30)
    assert replies(r.drain()) == [StorageFrontierUpper(SINK, A(8))]
    r.feed_sink_input(SINK, [((4,), 9, 1)], 10)
    r.tick(1_000)  # at most one commit per commit interval (1 s), counted from the last
    early = r.drain()
    assert io(early) == []
    assert StatisticsUpdate(SINK, SinkStatistics(0, 3, 0, 30)) in replies(early)
    r.tick(1_001)
    outs = r.drain()
    assert io(outs) == [CommitSink(SINK, (((4,), 9, 1),), 8, 8, 10)]
    # bytes staged: 8 per integer, time and diff (updates_size); a target that does not say
    # what it stored commits what was staged
    assert StatisticsUpdate(SINK, SinkStatistics(1, 0, 24, 0)) in replies(outs)
    r.sink_committed(SINK, 10)
    r.tick(2_100)
    assert StatisticsUpdate(SINK, SinkStatistics(0, 1, 0, 24)) in replies(r.drain())


def test_a_sink_resumes_after_what_its_target_covers() -> None:
    r = started(RUN_SINK)
    r.drain()
    r.sink_opened(SINK, 9)
    assert io(r.drain()) == [ReadSinkInput(SINK, INPUT, 8)]
    r.feed_sink_input(
        SINK, [((1,), 8, 1), ((2,), 9, 1)], 10
    )  # the snapshot at 8 is covered already
    r.tick(1)
    assert io(r.drain()) == [CommitSink(SINK, (((2,), 9, 1),), 9, 9, 10)]
    # Another incarnation committed up to 12 meanwhile: go on from there.
    refused(r, SinkCommitNotInFlight, r.sink_conflict, SINK, 9)
    r.sink_conflict(SINK, 12)
    assert io(r.drain()) == []  # the read going on still serves
    r.feed_sink_input(SINK, [((3,), 11, 1), ((4,), 12, 1)], 13)
    r.tick(1_001)
    assert io(r.drain()) == [CommitSink(SINK, (((4,), 12, 1),), 12, 12, 13)]


PACED = SimulatedSink("paced", commit_interval_ms=500, progress_interval_ms=5_000)
PACED_RUN = RunSink(SINK, ExportDescription(INPUT, "i", A(5), PACED, SCHEMA), A(5), False)


def paced(covered: int | None = None) -> StorageReplica:
    r = started(PACED_RUN)
    r.sink_opened(SINK, covered)
    r.drain()
    return r


def test_a_sink_commits_at_most_once_per_interval_everything_of_the_interval() -> None:
    r = paced()
    r.feed_sink_input(SINK, [((1,), 5, 1)], 6)
    r.tick(100)
    assert io(r.drain()) == [CommitSink(SINK, (((1,), 5, 1),), None, 5, 6)]  # the first: at once
    r.sink_committed(SINK, 6, 0)
    r.feed_sink_input(SINK, [((2,), 6, 1)], 7)
    r.feed_sink_input(SINK, [], 8)
    r.feed_sink_input(SINK, [((3,), 8, 1)], 9)
    for now in (200, 400, 599):
        r.tick(now)
        assert io(r.drain()) == []
    r.tick(600)
    assert io(r.drain()) == [CommitSink(SINK, (((2,), 6, 1), ((3,), 8, 1)), 6, 6, 9)]
    r.sink_committed(SINK, 9, 0)
    r.feed_sink_input(SINK, [((4,), 9, 1)], 10)
    r.tick(1_099)
    assert io(r.drain()) == []
    r.tick(1_100)
    assert io(r.drain()) == [CommitSink(SINK, (((4,), 9, 1),), 9, 9, 10)]


def test_a_sink_records_bare_progress_only_after_its_progress_interval() -> None:
    r = paced()
    r.feed_sink_input(SINK, [], 6)
    r.tick(0)
    assert io(r.drain()) == [CommitSink(SINK, (), None, 5, 6)]  # the first starts the history
    r.sink_committed(SINK, 6, 0)
    # the input advances; its updates cancel out: nothing a reader could see
    r.feed_sink_input(SINK, [((1,), 6, 1), ((2,), 7, 1), ((2,), 7, -1), ((1,), 6, -1)], 8)
    r.feed_sink_input(SINK, [((3,), 8, 1), ((3,), 8, -1)], 9)
    for now in range(0, 5_000, 100):
        r.feed_sink_input(SINK, [], 10 + now)
        r.tick(now)
        assert io(r.drain()) == []
    assert r.buffered().get(SINK, 0) == 0  # what cancelled out is not held
    r.tick(5_000)
    assert io(r.drain()) == [CommitSink(SINK, (), 6, 6, 4_910)]
    r.sink_committed(SINK, 4_910, 0)
    assert replies(r.drain()) == [StorageFrontierUpper(SINK, A(4_910))]


def test_a_resumed_sink_commits_its_updates_at_once_and_paces_bare_progress() -> None:
    r = paced(covered=9)
    r.feed_sink_input(SINK, [((1,), 8, 1)], 10)  # covered already: no update for the sink
    r.tick(50)
    assert io(r.drain()) == []
    r.feed_sink_input(SINK, [], 11)
    r.tick(5_049)
    assert io(r.drain()) == []
    r.tick(5_050)
    assert io(r.drain()) == [CommitSink(SINK, (), 9, 9, 11)]
    r2 = paced(covered=9)
    r2.feed_sink_input(SINK, [((2,), 9, 1)], 10)
    r2.tick(50)
    assert io(r2.drain()) == [CommitSink(SINK, (((2,), 9, 1),), 9, 9, 10)]


@pytest.mark.parametrize(
    ("commit", "progress"), [(0, 1_000), (1_000, 0), (-5, 1_000), (1.5, 1_000), (2**60, 2**60)]
)
def test_a_sink_with_unusable_intervals_ceases(commit: Any, progress: Any) -> None:
    bad = SimulatedSink("bad", commit_interval_ms=commit, progress_interval_ms=progress)
    r = started(RunSink(SINK, ExportDescription(INPUT, "i", A(5), bad, SCHEMA), A(5), False))
    outs = r.drain()
    assert io(outs) == []
    [status] = [x for x in replies(outs) if isinstance(x, StatusUpdate)]
    assert status.status == SourceStatus.CEASED
    assert "interval_ms" in (status.error or "")


def test_a_failing_sink_stalls_and_retries() -> None:
    r = started(RUN_SINK)
    r.drain()
    r.tick(0)
    r.sink_failed(SINK, "catalog down")
    assert replies(r.drain()) == [StatusUpdate(SINK, SourceStatus.STALLED, "catalog down")]
    r.tick(99)
    assert io(r.drain()) == []
    r.tick(100)
    assert io(r.drain()) == [OpenSink(SINK, TARGET, SCHEMA)]
    refused(r, UnrequestedStorageCallback, r.feed_sink_input, SINK, [], 1)
    r.sink_opened(SINK, None)
    r.handle_command(StorageAllowCompaction(SINK, EMPTY))
    outs = r.drain()
    assert io(outs) == [ReadSinkInput(SINK, INPUT, 5), StopSinkInput(SINK), CloseSink(SINK)]
    assert replies(outs)[-2:] == [StatusUpdate(SINK, SourceStatus.DROPPED), DroppedId(SINK)]


# -- the convention -------------------------------------------------------------------------


def test_outputs_leave_only_through_the_outbox() -> None:
    for name, fn in inspect.getmembers(StorageReplica, inspect.isfunction):
        if name.startswith("_") or name == "drain":
            continue
        ret = inspect.signature(fn).return_annotation
        assert "Output" not in str(ret), f"{name} returns {ret}"
    assert issubclass(StorageCommandRejected, StorageReplicaError)


def test_a_changed_description_restarts_the_ingestion_and_ignores_the_old_writes_outcome() -> None:
    r = loaded()
    r.source_started(ING)
    r.drain()
    r.tick(10)
    (write,) = io(r.drain())
    assert isinstance(write, WriteShard)
    moved = Ingestion("i", REMAP, SimulatedSource("elsewhere"), SCHEMA)
    r.handle_command(StorageHello(uuid.UUID(int=2)))
    r.handle_command(RunIngestion(ING, CollectionDescription(moved), A(0)))
    r.handle_command(StorageInitializationComplete())
    r.handle_command(StorageAllowWrites())
    assert io(r.drain()) == [StopSource(ING), ReadRemap(ING, ING, REMAP)]
    r.write_completed(REMAP, write.new_upper)  # the torn-down ingestion's write landed
    assert r.drain() == []
    r.remap_loaded(ING, A(0), list(write.updates), write.new_upper)
    assert io(r.drain()) == [
        StartSource(ING, SimulatedSource("elsewhere"), SCHEMA, 0),
        WriteShard(ING, (), A(0), write.new_upper),  # the data of the landed binding (none)
    ]


def test_a_source_that_is_not_reading_mints_nothing_its_frontier_stalls() -> None:
    """A source still connecting, or failed, cannot vouch that upstream had nothing new:
    no binding is minted and the uppers stay where they are until it reads again."""
    r = loaded()
    r.drain()
    r.tick(50)  # still starting
    assert io(r.drain()) == []
    r.source_started(ING)
    r.source_failed(ING, "upstream unreachable")
    r.drain()
    r.tick(60)
    assert [o for o in io(r.drain()) if isinstance(o, WriteShard)] == []
    assert r.uppers(ING) == (0, 0)


def test_a_source_error_no_retry_gets_past_ceases_it_for_good() -> None:
    """An upstream schema change or a lost slot: the source ceases (with the error and a hint)
    instead of stalling and restarting for ever (found by the simulator's upstream faults)."""
    r = loaded()
    r.tick(1_000)
    r.drain()
    r.source_failed(ING, "UpstreamSchemaChanged: a column changed type", retryable=False)
    status = replies(r.drain())[-1]
    assert isinstance(status, StatusUpdate) and status.status is SourceStatus.CEASED
    assert status.error == "UpstreamSchemaChanged: a column changed type" and status.hint
    for now in (1_100, 2_000, 60_000):
        r.tick(now)
        assert not [o for o in r.drain() if isinstance(o, StartSource)]  # never restarted


def test_a_deposed_controllers_hello_is_refused_and_changes_nothing() -> None:
    """A replica that served epoch 3 refuses a protocol iteration of epoch 2 (a controller that
    was taken for dead and runs on) and keeps serving epoch 3's."""
    r = StorageReplica(backoff_ms=100, backoff_max_ms=400)
    r.handle_command(StorageHello(uuid.UUID(int=1), 3))
    r.handle_command(RUN)
    r.handle_command(StorageInitializationComplete())
    refused(r, DeposedController, r.handle_command, StorageHello(uuid.UUID(int=2), 2))
    assert r.epoch == 3 and r.ingestions() == (ING,)
    r.handle_command(StorageHello(uuid.UUID(int=3), 3))  # the same controller reconnecting
    r.handle_command(StorageHello(uuid.UUID(int=4), 4))  # a newer one
    assert r.epoch == 4
