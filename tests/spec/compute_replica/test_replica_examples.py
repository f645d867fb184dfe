"""Documented behaviours of ComputeReplica, one example each (reference/compute.md §4-6)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidegate.spec.compute_replica import (
    ComputeReplica,
    PeekPersist,
    ReadSource,
    Reconciled,
    Respond,
    StopReading,
    WriteOutput,
    compaction_error_message,
    result_size,
)
from tidegate.spec.errors import ProtocolError, StageViolation, TidegateError
from tidegate.spec.errors.replica import (
    CommandRejected,
    DataflowRejected,
    IncompatibleInstance,
    SourceFeedRejected,
    UnknownPersistPeek,
    UnknownSink,
    UnknownSource,
    WriteNotInFlight,
)
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain, Product
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.relation import Get, Project
from tidegate.spec.plan.schema import Schema
from tidegate.spec.protocol import (
    AllowCompaction,
    AllowWrites,
    BuildDesc,
    CancelPeek,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    FrontierKind,
    Frontiers,
    Hello,
    IndexExport,
    IndexImport,
    InitializationComplete,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    Peek,
    PeekCanceled,
    PeekDescription,
    PeekError,
    PeekResponse,
    PeekRows,
    RowSetFinishing,
    Schedule,
    SinkExport,
    SourceImport,
    SubscribeBatch,
    SubscribeConnection,
    SubscribeDroppedAt,
    SubscribeResponse,
    UpdateConfiguration,
)
from tidegate.spec.protocol.types import ComputeParameters
from tidegate.spec.strategies.protocol import commands
from tidegate.spec.testing.compute_replica import ReplicaDriver, ReplicaStorageModel

T1 = GlobalId.user(1)
OBJ = GlobalId.user(10)
IDX = GlobalId.user(11)
SUB = GlobalId.transient(12)
MV = GlobalId.user(13)
SCHEMA = Schema.of(("k", "int64", False), ("s", "string"))
EMPTY = Antichain()


def at(t: int) -> Antichain:
    return Antichain([t])


def dataflow(
    *,
    as_of: int = 0,
    index: bool = True,
    sub: bool = False,
    mv: bool = False,
    plan: object | None = None,
    obj: GlobalId = OBJ,
    idx: GlobalId = IDX,
) -> DataflowDescription:
    sinks = []
    if sub:
        sinks.append(SinkExport(SUB, obj, SubscribeConnection()))
    if mv:
        sinks.append(SinkExport(MV, obj, MaterializedViewConnection()))
    return DataflowDescription(
        "test",
        source_imports=(SourceImport(T1),),
        objects_to_build=(BuildDesc(obj, plan if plan is not None else Get(T1, SCHEMA)),),
        index_exports=(IndexExport(idx, obj, (0,)),) if index else (),
        sink_exports=tuple(sinks),
        as_of=at(as_of),
    )


def peek(n: int, ts: int, gid: GlobalId = IDX, **kw: object) -> Peek:
    return Peek(PeekDescription(uuid.UUID(int=n), gid, ts, **kw))  # type: ignore[arg-type]


class Rig:
    """A replica, an in-memory storage with table u1, and a driver that checks every response."""

    def __init__(self, *, logging: LoggingConfig | None = None, clock: object = None) -> None:
        self.storage = ReplicaStorageModel()
        self.storage.create(T1)
        self.replica = ComputeReplica(PythonExecutor(), clock=clock)  # type: ignore[arg-type]
        self.driver = ReplicaDriver(self.replica, self.storage)
        self.config = InstanceConfig(logging or LoggingConfig())
        self.nonce = 0

    def connect(self, *cmds: object, config: InstanceConfig | None = None) -> list[object]:
        self.nonce += 1
        out = self.driver.command(Hello(uuid.UUID(int=self.nonce)))
        out += self.driver.command(CreateInstance(config or self.config))
        for c in cmds:
            out += self.driver.command(c)  # type: ignore[arg-type]
        out += self.driver.command(InitializationComplete())
        return list(out)

    def cmd(self, c: object) -> list[object]:
        return list(self.driver.command(c))  # type: ignore[arg-type]

    def append(self, updates: list[tuple[tuple[object, ...], int, int]], upper: int) -> None:
        self.storage.append(T1, updates, upper)  # type: ignore[arg-type]

    def step(self) -> list[object]:
        return list(self.driver.step())


def peek_answers(responses: list[object]) -> dict[int, object]:
    return {r.uuid.int: r.result for r in responses if isinstance(r, PeekResponse)}


# -- stages -----------------------------------------------------------------------------------


def test_a_command_before_hello_is_a_stage_error_and_changes_nothing() -> None:
    replica = ComputeReplica(PythonExecutor())
    before = replica.session.snapshot()
    with pytest.raises(StageViolation):
        replica.handle_command(CreateDataflow(dataflow()))
    assert replica.session.snapshot() == before
    assert replica.installed_dataflows() == ()


def test_nothing_runs_or_answers_before_initialization_complete() -> None:
    rig = Rig()
    rig.cmd(Hello(uuid.UUID(int=1)))
    rig.cmd(CreateInstance(rig.config))
    assert rig.cmd(CreateDataflow(dataflow())) == []
    assert rig.cmd(Schedule(IDX)) == []
    assert rig.cmd(peek(1, 0)) == []
    rig.append([((1, "a"), 0, 1)], 1)
    assert rig.step() == [] and rig.replica.installed_dataflows() == ()
    rig.cmd(InitializationComplete())
    assert rig.replica.reading() == {T1: at(0)}
    answers = peek_answers(rig.step())
    assert answers == {1: PeekRows((((1, "a"), 1),))}


# -- dataflows, reads, frontiers --------------------------------------------------------------


def test_reading_starts_at_schedule_and_frontiers_strictly_increase_from_the_as_of() -> None:
    rig = Rig()
    rig.connect()
    assert rig.cmd(CreateDataflow(dataflow(as_of=2))) == []
    assert rig.replica.reading() == {}
    rig.replica.drain()
    rig.replica.handle_command(Schedule(IDX))
    outs = rig.replica.drain()
    rig.driver.checker.on_command(Schedule(IDX))
    rig.driver.perform(outs)
    assert ReadSource(T1, at(2)) in outs
    rig.append([((1, "a"), 0, 1)], 2)
    # The snapshot needs an upper past the as_of; the index's own upper starts at the as_of.
    assert [r for r in rig.step() if isinstance(r, Frontiers)] == [
        Frontiers(IDX, write=at(2), output=at(2))
    ]
    rig.append([((2, "b"), 2, 1)], 4)
    reports = [r for r in rig.step() if isinstance(r, Frontiers)]
    # The input frontier trails the delivered upper by one: see ComputeReplica._run.
    assert reports == [Frontiers(IDX, write=at(4), input=at(3), output=at(4))]
    assert [r for r in rig.step() if isinstance(r, Frontiers)] == []  # nothing new: nothing sent
    rig.append([], 5)
    assert [r for r in rig.step() if isinstance(r, Frontiers)] == [
        Frontiers(IDX, write=at(5), input=at(4), output=at(5))
    ]


def test_two_dataflows_on_one_source_restart_the_read_and_both_see_everything() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow(as_of=1)), Schedule(IDX))
    rig.append([((1, "a"), 0, 1), ((2, "b"), 1, 1)], 3)
    rig.step()
    other = dataflow(as_of=0, obj=GlobalId.user(20), idx=GlobalId.user(21))
    rig.cmd(CreateDataflow(other))
    rig.replica.drain()
    rig.replica.handle_command(Schedule(GlobalId.user(21)))
    outs = rig.replica.drain()
    rig.driver.checker.on_command(Schedule(GlobalId.user(21)))
    rig.driver.perform(outs)
    assert outs == [ReadSource(T1, at(0))]
    rig.append([((3, "c"), 3, 1)], 4)
    rig.step()
    rig.cmd(peek(1, 3))
    rig.cmd(peek(2, 3, GlobalId.user(21)))
    rig.cmd(peek(3, 0, GlobalId.user(21)))
    answers = peek_answers(rig.driver.responses)
    full = PeekRows((((1, "a"), 1), ((2, "b"), 1), ((3, "c"), 1)))
    assert answers == {1: full, 2: full, 3: PeekRows((((1, "a"), 1),))}


def test_an_ill_typed_plan_is_rejected_and_changes_nothing() -> None:
    rig = Rig()
    rig.connect()
    before = rig.replica.session.snapshot()
    bad = dataflow(plan=Project(Get(T1, SCHEMA), (5,)))
    with pytest.raises(DataflowRejected, match="dataflow-runnable"):
        rig.replica.handle_command(CreateDataflow(bad))
    assert rig.replica.session.snapshot() == before
    assert rig.replica.installed_dataflows() == ()
    rig.cmd(CreateDataflow(dataflow()))  # the good one is still accepted


@pytest.mark.parametrize("when", [Product(1, 1), "3", 1.5, True])
def test_a_peek_at_a_time_that_is_not_an_int_is_rejected_and_changes_nothing(when: object) -> None:
    """Such a peek used to be recorded as pending, then failed every later command that served it."""
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 2)
    rig.step()
    before = rig.replica.session.snapshot()
    with pytest.raises(CommandRejected, match="int-times"):
        rig.replica.handle_command(Peek(PeekDescription(uuid.UUID(int=9), IDX, when)))  # type: ignore[arg-type]
    assert rig.replica.session.snapshot() == before
    assert rig.replica.pending_peeks() == ()
    assert peek_answers(rig.cmd(peek(1, 1))) == {1: PeekRows((((1, "a"), 1),))}


def test_an_ill_typed_plan_is_rejected_during_initialization_too() -> None:
    rig = Rig()
    rig.cmd(Hello(uuid.UUID(int=1)))
    rig.cmd(CreateInstance(rig.config))
    with pytest.raises(DataflowRejected):
        rig.replica.handle_command(CreateDataflow(dataflow(plan=Project(Get(T1, SCHEMA), (9,)))))


# -- peeks ------------------------------------------------------------------------------------


def test_a_peek_waits_until_the_upper_passes_its_time() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 2)
    rig.step()
    assert peek_answers(rig.cmd(peek(1, 1))) == {1: PeekRows((((1, "a"), 1),))}  # before the upper
    assert peek_answers(rig.cmd(peek(2, 2))) == {}  # at the upper: not ready
    assert peek_answers(rig.step()) == {}
    rig.append([((2, "b"), 2, 1)], 3)
    assert peek_answers(rig.step()) == {2: PeekRows((((1, "a"), 1), ((2, "b"), 1)))}


def test_a_peek_behind_the_compaction_frontier_gets_the_documented_error() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 5)
    rig.step()
    rig.cmd(AllowCompaction(IDX, at(3)))
    answer = peek_answers(rig.cmd(peek(1, 1)))[1]
    assert answer == PeekError(compaction_error_message(at(3), 1))
    assert "Arrangement compaction frontier ([3]) is beyond the time of the attempted read (1)" in (
        answer.message  # type: ignore[union-attr]
    )


def test_the_result_size_limit_turns_a_large_answer_into_an_error() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "abcdef"), 0, 2)], 1)
    rig.step()
    size = result_size([((1, "abcdef"), 2)])
    assert size == 2 * (8 + 6)
    rig.cmd(UpdateConfiguration(ComputeParameters(max_result_size=size - 1)))
    assert peek_answers(rig.cmd(peek(1, 0))) == {
        1: PeekError(f"result exceeds max size of {size - 1} bytes")
    }
    rig.cmd(UpdateConfiguration(ComputeParameters(max_result_size=size)))
    assert isinstance(peek_answers(rig.cmd(peek(2, 0)))[2], PeekRows)


def test_cancel_answers_a_pending_peek_and_ignores_an_answered_one() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 1)
    rig.step()
    assert peek_answers(rig.cmd(peek(1, 0))) == {1: PeekRows((((1, "a"), 1),))}
    assert rig.cmd(CancelPeek(uuid.UUID(int=1))) == []
    rig.cmd(peek(2, 7))
    assert rig.cmd(CancelPeek(uuid.UUID(int=2))) == [PeekResponse(uuid.UUID(int=2), PeekCanceled())]
    rig.append([], 9)
    assert peek_answers(rig.step()) == {}
    assert rig.replica.pending_peeks() == ()


def test_finishing_and_key_lookups_apply_to_index_peeks() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1), ((2, "b"), 0, 1), ((3, "c"), 0, 1)], 1)
    rig.step()
    fin = RowSetFinishing(limit=1, offset=1, project=(1,))
    assert peek_answers(rig.cmd(peek(1, 0, finishing=fin))) == {1: PeekRows(((("b",), 1),))}
    looked = rig.cmd(peek(2, 0, literal_constraints=((3,),)))
    assert peek_answers(looked) == {2: PeekRows((((3, "c"), 1),))}


def test_persist_peeks_go_to_the_driver_and_come_back_finished() -> None:
    rig = Rig()
    rig.connect()
    rig.append([((1, "a"), 0, 1), ((2, "b"), 1, 1)], 3)
    rig.replica.drain()
    rig.replica.handle_command(peek(1, 1, T1, target="persist", finishing=RowSetFinishing(limit=1)))
    outs = rig.replica.drain()
    assert outs == [PeekPersist(uuid.UUID(int=1), T1, 1, RowSetFinishing(limit=1))]
    rig.replica.complete_persist_peek(uuid.UUID(int=1), {(2, "b"): 1, (1, "a"): 1})
    [answer] = rig.replica.drain()
    assert answer == Respond(PeekResponse(uuid.UUID(int=1), PeekRows((((1, "a"), 1),))))
    with pytest.raises(UnknownPersistPeek):
        rig.replica.complete_persist_peek(uuid.UUID(int=99), {})


def test_a_cancelled_persist_peek_ignores_the_late_result() -> None:
    rig = Rig()
    rig.connect()
    rig.replica.handle_command(peek(1, 5, T1, target="persist"))
    rig.replica.drain()
    rig.replica.handle_command(CancelPeek(uuid.UUID(int=1)))
    outs = rig.replica.drain()
    assert outs == [Respond(PeekResponse(uuid.UUID(int=1), PeekCanceled()))]
    rig.replica.complete_persist_peek(uuid.UUID(int=1), {(1, "a"): 1})
    assert rig.replica.drain() == []


# -- subscribes -------------------------------------------------------------------------------


def test_subscribe_batches_start_at_zero_are_contiguous_and_end_with_dropped_at() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow(as_of=2, index=False, sub=True)), Schedule(SUB))
    rig.append([((1, "a"), 0, 1), ((2, "b"), 3, 1), ((2, "b"), 3, 1)], 4)
    [first] = [r for r in rig.step() if isinstance(r, SubscribeResponse)]
    assert first == SubscribeResponse(
        SUB, SubscribeBatch(at(0), at(4), ((2, (1, "a"), 1), (3, (2, "b"), 2)))
    )
    rig.append([((1, "a"), 4, -1)], 6)
    [second] = [r for r in rig.step() if isinstance(r, SubscribeResponse)]
    assert second == SubscribeResponse(SUB, SubscribeBatch(at(4), at(6), ((4, (1, "a"), -1),)))
    outs = rig.cmd(AllowCompaction(SUB, EMPTY))
    assert outs == [SubscribeResponse(SUB, SubscribeDroppedAt(at(6)))]
    assert rig.replica.reading() == {}


def test_a_subscribe_without_snapshot_ends_once_its_upper_reaches_up_to() -> None:
    """Materialize's subscribe sink: no snapshot means only times after the as_of; no update at
    or past ``up_to``; once the frontier reaches ``up_to`` a last batch ends at ``[]`` (so no
    ``DroppedAt`` follows the drop), however the inputs move on."""
    rig = Rig()
    df = dataflow(as_of=2, index=False)
    sink = SinkExport(SUB, OBJ, SubscribeConnection(), with_snapshot=False, up_to=at(5))
    rig.connect(CreateDataflow(replace(df, sink_exports=(sink,), until=at(5))), Schedule(SUB))
    rig.append([((1, "a"), 0, 1), ((2, "b"), 2, 1), ((3, "c"), 3, 1)], 4)
    [first] = [r for r in rig.step() if isinstance(r, SubscribeResponse)]
    assert first == SubscribeResponse(SUB, SubscribeBatch(at(0), at(4), ((3, (3, "c"), 1),)))
    rig.append([((4, "d"), 4, 1), ((5, "e"), 5, 1)], 7)
    [last] = [r for r in rig.step() if isinstance(r, SubscribeResponse)]
    assert last == SubscribeResponse(SUB, SubscribeBatch(at(4), EMPTY, ((4, (4, "d"), 1),)))
    rig.append([((6, "f"), 7, 1)], 9)
    assert not [r for r in rig.step() if isinstance(r, SubscribeResponse)]
    assert rig.cmd(AllowCompaction(SUB, EMPTY)) == []


def test_a_subscribe_whose_as_of_is_its_up_to_ends_with_nothing() -> None:
    rig = Rig()
    df = dataflow(as_of=3, index=False)
    sink = SinkExport(SUB, OBJ, SubscribeConnection(), up_to=at(3))
    rig.connect(CreateDataflow(replace(df, sink_exports=(sink,))), Schedule(SUB))
    rig.append([((1, "a"), 0, 1)], 4)
    [only] = [r for r in rig.step() if isinstance(r, SubscribeResponse)]
    assert only == SubscribeResponse(SUB, SubscribeBatch(at(0), EMPTY, ()))


# -- materialized views -----------------------------------------------------------------------


def mv_rig() -> Rig:
    rig = Rig()
    rig.driver.auto_write = False
    rig.storage.create(MV)
    rig.connect(CreateDataflow(dataflow(index=False, mv=True)), Schedule(MV))
    return rig


def test_a_materialized_view_writes_only_after_allow_writes() -> None:
    rig = mv_rig()
    rig.append([((1, "a"), 0, 1)], 2)
    for _ in range(3):
        rig.step()
    assert rig.driver.writes == {} and rig.driver.write_log == []
    rig.cmd(AllowWrites(MV))
    assert rig.driver.writes == {MV: WriteOutput(MV, (((1, "a"), 0, 1),), at(0), at(2))}
    responses = rig.driver.complete_writes()
    assert rig.storage.upper(MV) == 2 and rig.storage.contents(MV, 1) == {(1, "a"): 1}
    assert Frontiers(MV, write=at(2)) in responses


def test_a_materialized_view_advances_without_writing_when_another_replica_wrote_first() -> None:
    rig = mv_rig()
    rig.cmd(AllowWrites(MV))
    rig.append([((1, "a"), 0, 1)], 2)
    rig.step()
    assert MV in rig.driver.writes
    # Another replica writes [0, 5) first: our compare-and-append fails.
    rig.storage.append(MV, [((1, "a"), 0, 1)], 5)
    responses = rig.driver.complete_writes()
    assert Frontiers(MV, write=at(5)) in responses  # write frontier ahead of our output (2)
    assert rig.replica.session.last_reported(MV, FrontierKind.OUTPUT) == at(2)
    assert rig.driver.writes == {}
    rig.append([((2, "b"), 6, 1)], 7)
    rig.step()
    assert rig.driver.writes == {MV: WriteOutput(MV, (((2, "b"), 6, 1),), at(5), at(7))}


def test_write_callbacks_name_known_sinks_and_the_write_in_flight() -> None:
    rig = mv_rig()
    with pytest.raises(UnknownSink):
        rig.replica.write_completed(GlobalId.user(99), at(1))
    with pytest.raises(WriteNotInFlight):
        rig.replica.write_completed(MV, at(1))


# -- drop -------------------------------------------------------------------------------------


def test_drop_reports_empty_frontiers_and_stops_reading() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 2)
    rig.step()
    rig.replica.drain()
    rig.replica.handle_command(AllowCompaction(IDX, EMPTY))
    outs = rig.replica.drain()
    rig.driver.checker.on_command(AllowCompaction(IDX, EMPTY))
    assert Respond(Frontiers(IDX, write=EMPTY, input=EMPTY, output=EMPTY)) in outs
    assert StopReading(T1) in outs
    rig.driver.perform(outs)
    rig.append([], 4)
    assert rig.step() == []
    assert rig.replica.installed_dataflows() == ()
    assert rig.driver.checker.owes_nothing()


# -- storage callbacks ------------------------------------------------------------------------


def test_storage_data_must_be_for_a_read_and_move_forward() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    with pytest.raises(UnknownSource):
        rig.replica.feed_source(GlobalId.user(77), [], at(1))
    rig.replica.feed_source(T1, [((1, "a"), 0, 1)], at(3))
    with pytest.raises(SourceFeedRejected):
        rig.replica.feed_source(T1, [], at(2))
    with pytest.raises(SourceFeedRejected):
        rig.replica.feed_source(T1, [((1, "a"), 1, 1)], at(4))  # before the delivered upper
    rig.replica.feed_source(T1, [((1, "a"), 3, 1)], at(4))


# -- reconnect --------------------------------------------------------------------------------


def test_reconnect_keeps_a_compatible_dataflow_and_drops_pending_peeks_unanswered() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 2)
    rig.step()
    rig.cmd(peek(1, 9))
    built = rig.replica.built_dataflows
    replay = (CreateDataflow(dataflow(as_of=1)), Schedule(IDX), AllowCompaction(IDX, at(1)))
    rig.connect(*replay)
    assert rig.driver.reconciled == [Reconciled(((IDX,),), (), ())]
    assert rig.replica.reused_dataflows == 1 and rig.replica.built_dataflows == built
    # The kept index reports its frontiers afresh in the new iteration.
    assert Frontiers(IDX, write=at(2), input=at(1), output=at(2)) in rig.step()
    assert peek_answers(rig.driver.responses) == {}  # the old peek is never answered
    rig.append([], 10)
    assert peek_answers(rig.step()) == {}
    assert peek_answers(rig.cmd(peek(2, 1))) == {2: PeekRows((((1, "a"), 1),))}


def test_the_commands_kept_for_reconciliation_stay_bounded_by_the_live_state() -> None:
    """A long-running replica gets an AllowCompaction per collection per tick; it must not keep them all.

    (It kept every command of the iteration, so memory grew without bound.)
    """
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 1)
    rig.step()  # read its snapshot: a reconnect may keep it
    for t in range(1, 2_001):
        rig.cmd(AllowCompaction(IDX, at(t)))
        rig.cmd(peek(t, t))
        rig.cmd(CancelPeek(uuid.UUID(int=t)))
    assert rig.replica.retained_commands <= 8
    # The reduced history still reconciles: the index compacted to 2000 is kept for as_of 2000.
    rig.connect(CreateDataflow(dataflow(as_of=2_000)), Schedule(IDX))
    assert rig.driver.reconciled == [Reconciled(((IDX,),), (), ())]


def test_reconnect_rebuilds_a_changed_dataflow_and_drops_the_forgotten_one() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    changed = dataflow(plan=Project(Get(T1, SCHEMA), (0, 1, 0)), obj=OBJ, idx=IDX)
    rig.connect(CreateDataflow(changed), Schedule(IDX))
    assert rig.driver.reconciled == [Reconciled((), ((IDX,),), ((IDX,),))]
    rig.connect()
    assert rig.driver.reconciled[-1] == Reconciled((), (), ((IDX,),))
    assert rig.replica.installed_dataflows() == ()


@pytest.mark.parametrize("scheduled", [False, True], ids=["never scheduled", "snapshot not read"])
def test_reconnect_rebuilds_at_the_new_as_of_a_dataflow_that_has_not_read_its_snapshot(
    scheduled: bool,
) -> None:
    """Churn seed 156 of the simulator: a controller died between ``CreateDataflow`` (as_of 0)
    and ``Schedule``; the restored one sent the index again at as_of 800, with the table's
    since at 600. The replica kept the old dataflow (compatible: 0 <= 800) and, scheduled,
    read the table from 0, below its since. Until it has read its snapshot a dataflow's as_of
    is readable only under the old controller's holds, which the new one does not inherit."""
    rig = Rig()
    rig.connect(CreateDataflow(dataflow(as_of=0)), *([Schedule(IDX)] if scheduled else []))
    assert rig.driver.reads == ({T1: (0, None)} if scheduled else {})
    built = rig.replica.built_dataflows
    rig.append([((1, "a"), 0, 1)], 9)  # written and compacted while nobody read it
    rig.connect(CreateDataflow(dataflow(as_of=8)), Schedule(IDX))
    assert rig.driver.reconciled == [Reconciled((), ((IDX,),), ((IDX,),))]
    assert rig.replica.built_dataflows == built + 1 and rig.replica.reused_dataflows == 0
    assert rig.replica.reading() == {T1: at(8)}
    assert rig.step()[-1] == Frontiers(IDX, write=at(9), input=at(8), output=at(9))
    assert peek_answers(rig.cmd(peek(1, 8))) == {1: PeekRows((((1, "a"), 1),))}


def test_reconnect_with_an_incompatible_instance_tells_the_driver_to_halt() -> None:
    rig = Rig()
    rig.connect()
    rig.cmd(Hello(uuid.UUID(int=50)))
    other = InstanceConfig(LoggingConfig(enable_logging=True))
    with pytest.raises(IncompatibleInstance, match="halt"):
        rig.replica.handle_command(CreateInstance(other))


def test_subscribes_are_never_reused() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow(sub=True)), Schedule(IDX), Schedule(SUB))
    rig.connect(CreateDataflow(dataflow(sub=True)), Schedule(IDX), Schedule(SUB))
    assert rig.driver.reconciled[-1].reused == ()
    assert rig.driver.reconciled[-1].rebuilt == ((IDX, SUB),)


# -- logs -------------------------------------------------------------------------------------


def test_introspection_logs_are_indexes_that_can_be_peeked() -> None:
    now = [100]
    logs = (("peek_durations", GlobalId.system(1)), ("dataflow_steps", GlobalId.system(2)))
    rig = Rig(logging=LoggingConfig(enable_logging=True, index_logs=logs), clock=lambda: now[0])
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.cmd(peek(1, 0))
    now[0] = 130
    rig.append([((1, "a"), 0, 1)], 1)
    rig.step()  # answers the peek after 30 ms
    now[0] = 140
    rig.step()  # the log records it
    rig.step()
    answer = peek_answers(rig.cmd(peek(2, 140, GlobalId.system(1))))[2]
    assert answer == PeekRows(((("00000000-0000-0000-0000-000000000001", "u11", 30), 1),))
    steps = peek_answers(rig.cmd(peek(3, 140, GlobalId.system(2))))[3]
    assert isinstance(steps, PeekRows)
    assert [row[0] for row, _ in steps.rows] == [1]  # step 1, logged at 140 by step 2


def test_logs_stay_empty_but_readable_when_logging_is_disabled() -> None:
    logs = (("peek_durations", GlobalId.system(1)),)
    rig = Rig(logging=LoggingConfig(enable_logging=False, index_logs=logs))
    rig.connect()
    rig.step()
    rig.step()
    assert peek_answers(rig.cmd(peek(1, 0, GlobalId.system(1)))) == {1: PeekRows(())}


def test_protocol_errors_surface_as_protocol_errors() -> None:
    rig = Rig()
    rig.connect()
    with pytest.raises(ProtocolError):
        rig.replica.handle_command(Schedule(GlobalId.user(404)))


def test_frontier_lag_tracks_each_collection_and_retracts_on_drop() -> None:
    now = [10]
    logs = (("frontier_lag", GlobalId.system(3)),)
    rig = Rig(logging=LoggingConfig(enable_logging=True, index_logs=logs), clock=lambda: now[0])
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 4)
    rig.step()  # logs at 10, upper 11; the index is at 4: lag 7 (logged next step)
    now[0] = 20
    rig.step()
    lag = peek_answers(rig.cmd(peek(1, 20, GlobalId.system(3))))[1]
    assert lag == PeekRows(((("u11", 7), 1),))
    rig.cmd(AllowCompaction(IDX, EMPTY))
    now[0] = 30
    rig.step()
    rig.step()
    assert peek_answers(rig.cmd(peek(2, 30, GlobalId.system(3)))) == {2: PeekRows(())}


def test_a_dependent_dataflow_is_kept_when_its_imported_index_is_kept() -> None:
    rig = Rig()
    upstream = dataflow()
    reader_obj, reader_idx = GlobalId.user(30), GlobalId.user(31)
    reader = DataflowDescription(
        "reader",
        index_imports=(IndexImport(IDX, OBJ, (0,)),),
        objects_to_build=(BuildDesc(reader_obj, Project(Get(OBJ, SCHEMA), (1,))),),
        index_exports=(IndexExport(reader_idx, reader_obj, ()),),
        as_of=at(0),
    )
    cmds = (CreateDataflow(upstream), CreateDataflow(reader), Schedule(IDX), Schedule(reader_idx))
    rig.connect(*cmds)
    rig.append([((1, "a"), 0, 1)], 2)
    rig.step()
    rig.connect(*cmds)
    assert rig.driver.reconciled[-1] == Reconciled(((IDX,), (reader_idx,)), (), ())
    rig.step()
    assert peek_answers(rig.cmd(peek(1, 1, reader_idx))) == {1: PeekRows(((("a",), 1),))}


def test_a_kept_materialized_view_goes_back_to_read_only_until_allow_writes() -> None:
    rig = mv_rig()
    rig.driver.auto_write = True
    rig.cmd(AllowWrites(MV))
    rig.append([((1, "a"), 0, 1)], 2)
    rig.step()
    assert rig.storage.upper(MV) == 2
    rig.connect(CreateDataflow(dataflow(index=False, mv=True)), Schedule(MV))
    assert rig.driver.reconciled[-1].reused == ((MV,),)
    rig.append([((2, "b"), 2, 1)], 3)
    rig.step()
    assert rig.storage.upper(MV) == 2  # read-only again in the new iteration
    rig.cmd(AllowWrites(MV))
    rig.step()
    assert rig.storage.upper(MV) == 3
    assert rig.storage.contents(MV, 2) == {(1, "a"): 1, (2, "b"): 1}


def test_commands_of_the_initialization_stage_are_answered_after_it() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 1)
    rig.step()
    rig.cmd(Hello(uuid.UUID(int=40)))
    rig.cmd(CreateInstance(rig.config))
    for c in (CreateDataflow(dataflow()), Schedule(IDX), peek(1, 0), peek(2, 5)):
        assert rig.cmd(c) == []
    assert rig.cmd(CancelPeek(uuid.UUID(int=2))) == []
    answers = peek_answers(rig.cmd(InitializationComplete()))
    assert answers == {1: PeekRows((((1, "a"), 1),)), 2: PeekCanceled()}


def test_an_interrupted_initialization_reconciles_against_the_last_running_iteration() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 1)
    rig.step()  # read its snapshot: a reconnect may keep it
    rig.cmd(Hello(uuid.UUID(int=41)))
    rig.cmd(CreateInstance(rig.config))
    rig.cmd(CreateDataflow(dataflow(plan=Project(Get(T1, SCHEMA), (0, 1, 1)))))
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))  # never executed the interrupted one
    assert rig.driver.reconciled[-1] == Reconciled(((IDX,),), (), ())


def test_a_later_reader_restarts_the_read_just_below_the_earlier_readers_progress() -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((9, None), 3, -1)], 5)
    rig.step()
    rig.cmd(AllowCompaction(IDX, at(5)))
    late = dataflow(as_of=5, obj=GlobalId.user(20), idx=GlobalId.user(21))
    rig.cmd(CreateDataflow(late))
    rig.replica.drain()
    rig.replica.handle_command(Schedule(GlobalId.user(21)))
    outs = rig.replica.drain()
    rig.driver.checker.on_command(Schedule(GlobalId.user(21)))
    rig.driver.perform(outs)
    # u11 was fed up to 5 and reported input 4: the new read starts at 4, below what u11 has.
    assert outs == [ReadSource(T1, at(4))]
    rig.append([], 6)
    rig.step()
    expected = PeekError("invalid data: negative multiplicity -1 for row (9, None)")
    answers = peek_answers(rig.cmd(peek(1, 5)) + rig.cmd(peek(2, 5, GlobalId.user(21))))
    assert answers == {1: expected, 2: expected}


# -- any command: taken, or refused typed and unchanged ------------------------------------

_products = st.builds(Product, st.integers(0, 3), st.integers(0, 3))
_odd_times = st.one_of(
    st.integers(-3, 12),
    _products,
    st.floats(allow_nan=False),
    st.text(max_size=2),
    st.booleans(),
    st.none(),
)
_odd_commands = st.one_of(
    st.builds(
        lambda n, t: Peek(PeekDescription(uuid.UUID(int=n), IDX, t)),
        st.integers(100, 104),
        _odd_times,
    ),
    st.builds(
        lambda ts: AllowCompaction(IDX, Antichain(ts)),
        st.lists(st.integers(0, 12), max_size=2) | st.lists(_products, max_size=2),
    ),
)


def _replica_state(rig: Rig) -> tuple[Any, ...]:
    r = rig.replica
    return (r.session.snapshot(), r.pending_peeks(), r.installed_dataflows(), dict(r.reading()))


@given(st.lists(st.one_of(commands(), _odd_commands), min_size=1, max_size=6))
def test_every_command_is_taken_or_refused_typed_and_unchanged(cmds: list[Any]) -> None:
    rig = Rig()
    rig.connect(CreateDataflow(dataflow()), Schedule(IDX))
    rig.append([((1, "a"), 0, 1)], 2)
    rig.step()
    for cmd in cmds:
        before = _replica_state(rig)
        try:
            rig.replica.drain()
            rig.replica.handle_command(cmd)
            outputs = rig.replica.drain()
        except TidegateError:
            assert _replica_state(rig) == before
        else:
            rig.driver.checker.on_command(cmd)  # the driver's own check of the responses follows it
            rig.driver.perform(outputs)
        rig.step()
