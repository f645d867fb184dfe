"""Example tests pinning each rule of the controller and replica sessions (reference/compute.md §3-6)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tidegate.spec.errors import (
    AllowCompactionRegression,
    CommandAfterDrop,
    CompactionPastPendingPeek,
    DataflowAsOfUnset,
    DroppedAtMismatch,
    DuplicateAllowWrites,
    DuplicateCollection,
    DuplicatePeek,
    DuplicatePeekResponse,
    DuplicateSchedule,
    FrontierBeforeAsOf,
    FrontierRegression,
    FrontiersForSubscribe,
    ImportSinceViolation,
    InvalidPeekRows,
    LocalProtocolError,
    NotAnIndex,
    NotASubscribe,
    ProtocolError,
    RemoteProtocolError,
    ResponseAfterClose,
    ResponseAfterDrop,
    StageViolation,
    SubscribeGap,
    SubscribeNotConsolidated,
    SubscribeUpdateOutOfRange,
    TidegateError,
    UnknownCollection,
    UnknownPeek,
    UnrequestedCancel,
    UnrequestedDroppedAt,
    blamed,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
    AllowCompaction,
    AllowWrites,
    BeginComputation,
    BuildDataflow,
    CancelPeek,
    CancelPendingPeek,
    CollectionKind,
    CompactCollection,
    ComputeParameters,
    ControllerSession,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    DropCollection,
    EnableWrites,
    FrontierKind,
    Frontiers,
    Hello,
    IndexExport,
    IndexImport,
    InitializationComplete,
    InitializeInstance,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    Peek,
    PeekCanceled,
    PeekDescription,
    PeekError,
    PeekResponse,
    PeekRows,
    ReleaseDataflow,
    ReplicaSession,
    RunDataflow,
    Schedule,
    ScheduleExport,
    ServePeek,
    SetConfiguration,
    SinkExport,
    Stage,
    StartIteration,
    Status,
    SubscribeBatch,
    SubscribeConnection,
    SubscribeDroppedAt,
    SubscribeResponse,
    UpdateConfiguration,
)

LOG = GlobalId.system(1)
IDX = GlobalId.user(1)
MV = GlobalId.user(2)
SUB = GlobalId.user(3)
OTHER = GlobalId.user(99)
P1, P2 = uuid.UUID(int=1), uuid.UUID(int=2)
EMPTY = Antichain()


def at(t: int) -> Antichain:
    return Antichain([t])


def index_df(
    gid: GlobalId = IDX, as_of: int = 2, imports: tuple[GlobalId, ...] = ()
) -> DataflowDescription:
    return DataflowDescription(
        debug_name=f"index {gid}",
        index_imports=tuple(IndexImport(i, i) for i in imports),
        index_exports=(IndexExport(gid, gid),),
        as_of=at(as_of),
    )


def sink_df(gid: GlobalId, conn: Any, as_of: Antichain) -> DataflowDescription:
    return DataflowDescription(
        debug_name=f"sink {gid}", sink_exports=(SinkExport(gid, IDX, conn),), as_of=as_of
    )


SETUP = [
    Hello(uuid.UUID(int=100)),
    CreateInstance(InstanceConfig(LoggingConfig(index_logs=(("arrangements", LOG),)))),
    CreateDataflow(index_df()),
    CreateDataflow(sink_df(MV, MaterializedViewConnection(), at(2))),
    CreateDataflow(sink_df(SUB, SubscribeConnection(), at(3))),
    Peek(PeekDescription(P1, IDX, 5)),
]

Session = ControllerSession | ReplicaSession


def sessions(*, computing: bool = True) -> list[Session]:
    """A controller and a replica session after SETUP (and InitializationComplete if ``computing``)."""
    out: list[Session] = [ControllerSession(), ReplicaSession()]
    cmds = [*SETUP, InitializationComplete()] if computing else SETUP
    for s in out:
        for cmd in cmds:
            s.on_command(cmd)
    return out


def drop_idx(session: Session) -> None:
    """Drop IDX the way a controller does: SETUP's pending peek on it is cancelled first."""
    session.on_command(CancelPeek(P1))
    session.on_command(AllowCompaction(IDX, EMPTY))


def rejects(session: Session, event: Any, error: type[ProtocolError]) -> ProtocolError:
    """``event`` is rejected with exactly ``error``, naming its rule, and the session is unchanged."""
    is_command = not isinstance(event, Frontiers | PeekResponse | SubscribeResponse | Status)
    call: Callable[[Any], Any] = session.on_command if is_command else session.on_response
    before = session.snapshot()
    with pytest.raises(error) as info:
        call(event)
    # Blame: the controller's own commands and the replica's own responses are local bugs.
    local = is_command == isinstance(session, ControllerSession)
    side = LocalProtocolError if local else RemoteProtocolError
    assert type(info.value) is type(blamed(error("probe"), side))
    assert session.snapshot() == before
    assert f"[{error.rule}]" in str(info.value)
    return info.value


def both_reject(event: Any, error: type[ProtocolError], *, computing: bool = True) -> None:
    for s in sessions(computing=computing):
        rejects(s, event, error)


# -- stages ---------------------------------------------------------------------------


def test_stages_progress_in_order_and_read_write_is_entered_by_allow_writes() -> None:
    s = ControllerSession()
    assert s.stage is Stage.AWAITING_HELLO
    assert s.on_command(Hello(P1)) is Stage.CREATION
    assert s.on_command(CreateInstance(InstanceConfig())) is Stage.INITIALIZATION
    s.on_command(CreateDataflow(sink_df(MV, MaterializedViewConnection(), at(0))))
    assert s.on_command(InitializationComplete()) is Stage.READ_ONLY
    assert s.on_command(AllowWrites(MV)) is Stage.READ_WRITE
    assert s.on_command(AllowCompaction(MV, EMPTY)) is Stage.READ_WRITE  # never left


def test_allow_writes_during_initialization_leads_straight_to_read_write() -> None:
    s = ControllerSession()
    s.on_command(Hello(P1))
    s.on_command(CreateInstance(InstanceConfig()))
    s.on_command(CreateDataflow(index_df()))
    assert s.on_command(AllowWrites(IDX)) is Stage.INITIALIZATION
    assert s.on_command(InitializationComplete()) is Stage.READ_WRITE


@pytest.mark.parametrize(
    "cmd",
    [CreateInstance(InstanceConfig()), InitializationComplete(), Schedule(IDX), CancelPeek(P1)],
    ids=lambda c: type(c).__name__,
)
def test_nothing_but_hello_first(cmd: Any) -> None:
    for s in (ControllerSession(), ReplicaSession()):
        err = rejects(s, cmd, StageViolation)
        assert "before Hello" in str(err)


def test_create_instance_only_right_after_hello_and_once() -> None:
    for s in (ControllerSession(), ReplicaSession()):
        s.on_command(Hello(P1))
        rejects(s, UpdateConfiguration(ComputeParameters()), StageViolation)
        rejects(s, InitializationComplete(), StageViolation)
        s.on_command(CreateInstance(InstanceConfig()))
        rejects(s, CreateInstance(InstanceConfig()), StageViolation)


def test_initialization_complete_exactly_once() -> None:
    both_reject(InitializationComplete(), StageViolation)


def test_a_new_hello_starts_a_new_iteration_anywhere() -> None:
    for s in sessions():
        s.on_command(Hello(P2))
        assert s.stage is Stage.CREATION
        assert s.nonce == P2
        assert not s.collections
        s.on_command(CreateInstance(InstanceConfig()))
        # Ids and uuids of the old iteration may be used again.
        s.on_command(CreateDataflow(index_df()))
        s.on_command(Peek(PeekDescription(P1, IDX, 5)))


def test_no_responses_before_initialization_complete() -> None:
    for s in sessions(computing=False):
        err = rejects(s, Frontiers(IDX, write=at(3)), StageViolation)
        assert "InitializationComplete" in str(err)
        rejects(s, PeekResponse(P1, PeekRows(())), StageViolation)


# -- command dependencies -------------------------------------------------------------


def test_create_dataflow_needs_an_as_of() -> None:
    df = DataflowDescription("no as_of", index_exports=(IndexExport(OTHER, OTHER),))
    both_reject(CreateDataflow(df), DataflowAsOfUnset)


def test_export_ids_never_repeat_in_an_iteration() -> None:
    both_reject(CreateDataflow(index_df(IDX)), DuplicateCollection)
    both_reject(CreateDataflow(index_df(LOG)), DuplicateCollection)
    twice = DataflowDescription(
        "twice", index_exports=(IndexExport(OTHER, OTHER), IndexExport(OTHER, OTHER)), as_of=at(0)
    )
    both_reject(CreateDataflow(twice), DuplicateCollection)
    for s in sessions():
        drop_idx(s)
        rejects(s, CreateDataflow(index_df(IDX)), DuplicateCollection)  # not even after a drop


def test_log_index_ids_are_distinct() -> None:
    config = InstanceConfig(LoggingConfig(index_logs=(("a", LOG), ("b", LOG))))
    for s in (ControllerSession(), ReplicaSession()):
        s.on_command(Hello(P1))
        rejects(s, CreateInstance(config), DuplicateCollection)


def test_index_imports_must_be_live_indexes_with_since_at_most_as_of() -> None:
    both_reject(CreateDataflow(index_df(OTHER, imports=(GlobalId.user(50),))), UnknownCollection)
    both_reject(CreateDataflow(index_df(OTHER, imports=(SUB,))), NotAnIndex)
    both_reject(CreateDataflow(index_df(OTHER, as_of=1, imports=(IDX,))), ImportSinceViolation)
    for s in sessions():
        s.on_command(CreateDataflow(index_df(OTHER, as_of=2, imports=(IDX, LOG))))
        s.on_command(AllowCompaction(LOG, at(4)))
        rejects(
            s,
            CreateDataflow(index_df(GlobalId.user(7), as_of=3, imports=(LOG,))),
            ImportSinceViolation,
        )
        s.on_command(AllowCompaction(LOG, EMPTY))
        rejects(
            s,
            CreateDataflow(index_df(GlobalId.user(7), as_of=9, imports=(LOG,))),
            CommandAfterDrop,
        )


@pytest.mark.parametrize(
    "cmd",
    [
        Schedule(OTHER),
        AllowWrites(OTHER),
        AllowCompaction(OTHER, at(3)),
        Peek(PeekDescription(P2, OTHER, 1)),
    ],
    ids=lambda c: type(c).__name__,
)
def test_create_dataflow_precedes_commands_naming_its_collections(cmd: Any) -> None:
    both_reject(cmd, UnknownCollection)
    for s in sessions():
        s.on_command(CreateDataflow(index_df(OTHER)))
        s.on_command(cmd)


@pytest.mark.parametrize(
    "cmd",
    [
        Schedule(IDX),
        AllowWrites(IDX),
        AllowCompaction(IDX, EMPTY),
        AllowCompaction(IDX, at(9)),
        Peek(PeekDescription(P2, IDX, 5)),
    ],
    ids=lambda c: type(c).__name__,
)
def test_nothing_names_a_dropped_collection(cmd: Any) -> None:
    for s in sessions():
        drop_idx(s)
        rejects(s, cmd, CommandAfterDrop)


def test_no_compaction_past_a_pending_peek() -> None:
    """The controller holds a peek's time until the peek is answered or cancelled (reference §9.8)."""
    both_reject(AllowCompaction(IDX, at(6)), CompactionPastPendingPeek)  # P1 is pending at 5
    both_reject(AllowCompaction(IDX, EMPTY), CompactionPastPendingPeek)
    for s in sessions():
        s.on_command(AllowCompaction(IDX, at(5)))  # up to the peek's time is fine
        s.on_command(CancelPeek(P1))
        s.on_command(AllowCompaction(IDX, at(9)))
    controller, replica = sessions()
    for s in (controller, replica):
        s.on_response(Frontiers(IDX, write=at(6)))
        s.on_response(PeekResponse(P1, PeekRows(())))  # answered: no longer pending
        s.on_command(AllowCompaction(IDX, at(9)))


def test_schedule_and_allow_writes_once_per_collection() -> None:
    for s in sessions():
        s.on_command(Schedule(IDX))
        s.on_command(AllowWrites(MV))
        rejects(s, Schedule(IDX), DuplicateSchedule)
        rejects(s, AllowWrites(MV), DuplicateAllowWrites)


def test_allow_compaction_never_goes_back() -> None:
    both_reject(AllowCompaction(IDX, at(1)), AllowCompactionRegression)  # below the as_of 2
    for s in sessions():
        s.on_command(AllowCompaction(IDX, at(4)))
        s.on_command(AllowCompaction(IDX, at(4)))  # no change is fine
        rejects(s, AllowCompaction(IDX, at(3)), AllowCompactionRegression)


def test_peeks_target_indexes_and_use_fresh_uuids() -> None:
    both_reject(Peek(PeekDescription(P2, SUB, 5)), NotAnIndex)
    both_reject(Peek(PeekDescription(P2, MV, 5)), NotAnIndex)
    both_reject(Peek(PeekDescription(P1, IDX, 7)), DuplicatePeek)
    for s in sessions():
        s.on_command(Peek(PeekDescription(P2, LOG, 0)))  # log indexes are peekable
        s.on_command(Peek(PeekDescription(uuid.UUID(int=3), MV, 5, target="persist")))


def test_cancel_peek_follows_its_peek_and_may_repeat() -> None:
    both_reject(CancelPeek(P2), UnknownPeek)
    for s in sessions():
        s.on_command(CancelPeek(P1))
        s.on_command(CancelPeek(P1))


# -- peek responses -------------------------------------------------------------------


def test_exactly_one_response_per_peek() -> None:
    for s in sessions():
        s.on_response(PeekResponse(P1, PeekRows(((("a",), 1),))))
        rejects(s, PeekResponse(P1, PeekError("again")), DuplicatePeekResponse)
        rejects(s, PeekResponse(P2, PeekRows(())), UnknownPeek)


def test_canceled_only_after_cancel_peek() -> None:
    for s in sessions():
        rejects(s, PeekResponse(P1, PeekCanceled()), UnrequestedCancel)
        s.on_command(CancelPeek(P1))
        s.on_response(PeekResponse(P1, PeekCanceled()))


def test_rows_after_cancel_peek_are_still_an_answer() -> None:
    for s in sessions():
        s.on_command(CancelPeek(P1))
        s.on_response(PeekResponse(P1, PeekRows(())))
        rejects(s, PeekResponse(P1, PeekCanceled()), DuplicatePeekResponse)


def test_peek_rows_have_positive_multiplicities() -> None:
    both_reject(PeekResponse(P1, PeekRows(((("a",), 0),))), InvalidPeekRows)
    both_reject(PeekResponse(P1, PeekRows(((("a",), 1), (("b",), -1)))), InvalidPeekRows)


def test_cancel_for_an_answered_peek_is_tolerated_and_answered_with_nothing() -> None:
    r = ReplicaSession()
    for cmd in [*SETUP, InitializationComplete()]:
        r.on_command(cmd)
    r.on_response(PeekResponse(P1, PeekRows(())))
    assert r.on_command(CancelPeek(P1)) == []
    assert r.owes_nothing() or r.owed_dropped_at() == ()


def test_cancel_for_a_pending_peek_asks_for_an_answer() -> None:
    r = ReplicaSession()
    for cmd in [*SETUP, InitializationComplete()]:
        r.on_command(cmd)
    assert r.on_command(CancelPeek(P1)) == [CancelPendingPeek(P1)]
    assert r.cancel_requested(P1)
    assert r.on_command(CancelPeek(P1)) == []  # already owed
    assert list(r.pending_peeks) == [P1]


def test_a_new_hello_drops_pending_peeks_unanswered() -> None:
    r = ReplicaSession()
    for cmd in [*SETUP, Peek(PeekDescription(P2, IDX, 9)), InitializationComplete()]:
        r.on_command(cmd)
    r.on_response(PeekResponse(P2, PeekError("x")))
    assert r.on_command(Hello(uuid.UUID(int=7))) == [StartIteration(uuid.UUID(int=7), (P1,))]
    assert r.pending_peeks == {}
    for cmd in [CreateInstance(InstanceConfig()), InitializationComplete()]:
        r.on_command(cmd)
    rejects(r, PeekResponse(P1, PeekRows(())), UnknownPeek)


# -- frontier reports -----------------------------------------------------------------


def test_frontiers_strictly_increase_and_start_at_the_as_of() -> None:
    for s in sessions():
        rejects(s, Frontiers(IDX, write=at(1)), FrontierBeforeAsOf)
        s.on_response(Frontiers(IDX, write=at(2), output=at(2)))
        rejects(s, Frontiers(IDX, write=at(2)), FrontierRegression)
        rejects(s, Frontiers(IDX, output=at(1)), FrontierRegression)
        s.on_response(Frontiers(IDX, input=at(2)))  # each kind starts on its own
        s.on_response(Frontiers(IDX, write=at(3), input=None))
        s.on_response(Frontiers(LOG, write=at(0)))  # log indexes have as_of [0]


def test_nothing_after_an_empty_frontier() -> None:
    for s in sessions():
        s.on_response(Frontiers(MV, write=EMPTY))
        rejects(s, Frontiers(MV, write=at(7)), ResponseAfterClose)
        s.on_response(Frontiers(MV, input=EMPTY, output=EMPTY))
        rejects(s, Status(MV), ResponseAfterClose)


def test_no_frontiers_for_subscribes_or_unknown_collections() -> None:
    both_reject(Frontiers(SUB, write=at(3)), FrontiersForSubscribe)
    both_reject(Frontiers(OTHER, write=at(3)), UnknownCollection)
    both_reject(Status(OTHER), UnknownCollection)


def test_after_a_drop_only_empty_frontiers_and_then_nothing() -> None:
    controller, replica = sessions()
    for s in (controller, replica):
        s.on_response(Frontiers(IDX, input=EMPTY))
        drop_idx(s)
    # The controller cannot know whether the replica saw the drop yet.
    controller.check_response(Frontiers(IDX, write=at(5)))
    rejects(replica, Frontiers(IDX, write=at(5)), ResponseAfterDrop)
    assert replica.owed_frontier_reports() == {IDX: (FrontierKind.WRITE, FrontierKind.OUTPUT)}
    replica.on_response(Frontiers(IDX, write=EMPTY, output=EMPTY))
    assert replica.owed_frontier_reports() == {}
    rejects(replica, Frontiers(IDX, output=EMPTY), ResponseAfterClose)


# -- subscribes -----------------------------------------------------------------------


def test_subscribe_batches_are_contiguous_from_the_minimum_time() -> None:
    for s in sessions():
        rejects(s, SubscribeResponse(SUB, SubscribeBatch(at(1), at(4))), SubscribeGap)
        rejects(s, SubscribeResponse(SUB, SubscribeBatch(at(0), at(2))), FrontierBeforeAsOf)
        rejects(s, SubscribeResponse(SUB, SubscribeBatch(at(0), at(0))), SubscribeGap)
        s.on_response(SubscribeResponse(SUB, SubscribeBatch(at(0), at(4), ((3, ("a",), 1),))))
        rejects(s, SubscribeResponse(SUB, SubscribeBatch(at(5), at(6))), SubscribeGap)
        rejects(s, SubscribeResponse(SUB, SubscribeBatch(at(4), at(4))), SubscribeGap)
        s.on_response(SubscribeResponse(SUB, SubscribeBatch(at(4), at(5))))
        s.on_response(SubscribeResponse(SUB, SubscribeBatch(at(5), EMPTY, ((9, ("b",), -1),))))
        rejects(s, SubscribeResponse(SUB, SubscribeBatch(EMPTY, EMPTY)), ResponseAfterClose)


def test_subscribe_updates_lie_in_their_batch_and_after_the_as_of() -> None:
    both_reject(
        SubscribeResponse(SUB, SubscribeBatch(at(0), at(4), ((2, ("a",), 1),))),
        SubscribeUpdateOutOfRange,
    )
    both_reject(
        SubscribeResponse(SUB, SubscribeBatch(at(0), at(4), ((4, ("a",), 1),))),
        SubscribeUpdateOutOfRange,
    )


def test_subscribe_updates_are_consolidated() -> None:
    dup = ((3, ("a",), 1), (3, ("a",), 2))
    both_reject(SubscribeResponse(SUB, SubscribeBatch(at(0), at(4), dup)), SubscribeNotConsolidated)
    both_reject(
        SubscribeResponse(SUB, SubscribeBatch(at(0), at(4), ((3, ("a",), 0),))),
        SubscribeNotConsolidated,
    )


def test_subscribe_responses_only_for_subscribes() -> None:
    both_reject(SubscribeResponse(IDX, SubscribeBatch(at(0), at(4))), NotASubscribe)
    both_reject(SubscribeResponse(OTHER, SubscribeDroppedAt(at(0))), UnknownCollection)


def test_dropped_at_only_after_a_drop_at_the_last_upper_and_then_nothing() -> None:
    controller, replica = sessions()
    for s in (controller, replica):
        rejects(s, SubscribeResponse(SUB, SubscribeDroppedAt(at(0))), UnrequestedDroppedAt)
        s.on_response(SubscribeResponse(SUB, SubscribeBatch(at(0), at(4))))
        s.on_command(AllowCompaction(SUB, EMPTY))
    controller.check_response(SubscribeResponse(SUB, SubscribeBatch(at(4), at(5))))
    rejects(replica, SubscribeResponse(SUB, SubscribeBatch(at(4), at(5))), ResponseAfterDrop)
    assert replica.owed_dropped_at() == (SUB,)
    for s in (controller, replica):
        rejects(s, SubscribeResponse(SUB, SubscribeDroppedAt(at(0))), DroppedAtMismatch)
        s.on_response(SubscribeResponse(SUB, SubscribeDroppedAt(at(4))))
        rejects(s, SubscribeResponse(SUB, SubscribeDroppedAt(at(4))), ResponseAfterClose)
    assert replica.owed_dropped_at() == ()


def test_a_completed_subscribe_owes_no_dropped_at() -> None:
    r = sessions()[1]
    r.on_response(SubscribeResponse(SUB, SubscribeBatch(at(0), EMPTY)))
    drop, release = r.on_command(AllowCompaction(SUB, EMPTY))
    assert drop == DropCollection(SUB, CollectionKind.SUBSCRIBE, (), owes_dropped_at=False)
    assert release == ReleaseDataflow((SUB,))
    assert r.owes_nothing() is False  # the peek P1 is still pending
    r.on_response(PeekResponse(P1, PeekRows(())))
    assert r.owes_nothing()


# -- replica effects ------------------------------------------------------------------


def test_replica_effects_say_what_to_do_and_what_is_owed() -> None:
    r = ReplicaSession()
    two = DataflowDescription(
        "two exports",
        index_exports=(IndexExport(IDX, IDX),),
        sink_exports=(SinkExport(MV, IDX, MaterializedViewConnection()),),
        as_of=at(1),
    )
    config = InstanceConfig(LoggingConfig(index_logs=(("a", LOG),)))
    params = ComputeParameters(max_result_size=10)
    assert r.on_command(Hello(P1)) == [StartIteration(P1, ())]
    assert r.on_command(CreateInstance(config)) == [InitializeInstance(config, (LOG,))]
    assert r.on_command(UpdateConfiguration(params)) == [SetConfiguration(params, params)]
    assert r.on_command(CreateDataflow(two)) == [BuildDataflow(two)]
    assert r.on_command(Schedule(IDX)) == [ScheduleExport(IDX)]
    assert r.on_command(Schedule(MV)) == [ScheduleExport(MV), RunDataflow((IDX, MV))]
    assert r.on_command(AllowWrites(MV)) == [EnableWrites(MV)]
    assert r.on_command(AllowCompaction(IDX, at(3))) == [CompactCollection(IDX, at(3))]
    assert r.on_command(Peek(PeekDescription(P2, IDX, 4))) == [
        ServePeek(PeekDescription(P2, IDX, 4))
    ]
    assert r.on_command(InitializationComplete()) == [BeginComputation()]
    assert r.stage is Stage.READ_WRITE
    all_kinds = tuple(FrontierKind)
    assert r.on_command(CancelPeek(P2)) == [CancelPendingPeek(P2)]
    assert r.on_command(AllowCompaction(IDX, EMPTY)) == [
        DropCollection(IDX, CollectionKind.INDEX, all_kinds)
    ]
    assert r.on_command(AllowCompaction(MV, EMPTY)) == [
        DropCollection(MV, CollectionKind.MATERIALIZED_VIEW, all_kinds),
        ReleaseDataflow((IDX, MV)),
    ]
    assert r.owed_frontier_reports() == {IDX: all_kinds, MV: all_kinds}


def test_a_dataflow_runs_once_every_export_is_scheduled_or_dropped() -> None:
    r = ReplicaSession()
    two = DataflowDescription(
        "two", index_exports=(IndexExport(IDX, IDX), IndexExport(OTHER, IDX)), as_of=at(0)
    )
    for cmd in (Hello(P1), CreateInstance(InstanceConfig()), CreateDataflow(two)):
        r.on_command(cmd)
    assert r.on_command(Schedule(IDX)) == [ScheduleExport(IDX)]
    assert r.on_command(AllowCompaction(OTHER, EMPTY))[-1] == RunDataflow((IDX, OTHER))


def test_frontier_report_allowed_and_queries() -> None:
    r = sessions()[1]
    assert r.frontier_report_allowed(IDX, FrontierKind.WRITE, at(2))
    assert not r.frontier_report_allowed(IDX, FrontierKind.WRITE, at(1))
    assert not r.frontier_report_allowed(SUB, FrontierKind.WRITE, at(5))
    r.on_response(Frontiers(IDX, write=at(4)))
    assert r.last_reported(IDX, FrontierKind.WRITE) == at(4)
    assert r.last_reported(IDX, FrontierKind.INPUT) is None
    assert r.subscribe_next_lower(SUB) == at(0)
    assert not r.subscribe_ended(SUB)
    assert r.collections[SUB].kind is CollectionKind.SUBSCRIBE
    assert r.collections[LOG].as_of == at(0)


def test_errors_are_typed_tidegate_errors_naming_the_id() -> None:
    [s, _] = sessions()
    err = rejects(s, Schedule(OTHER), UnknownCollection)
    assert isinstance(err, TidegateError)
    assert "u99" in str(err)
