"""Example tests: peek lifecycle, subscribe merging, rehydration with history replay, log collections."""

from __future__ import annotations

import uuid

import pytest

from tidegate.spec.compute import (
    ERROR_TARGET_REPLICA_FAILED,
    ComputeController,
    ConnectReplica,
    InMemoryStorage,
    PeekNotification,
    PeekResultOut,
    ReplicaStatusEvent,
    SendCommand,
    SubscribeBatchOut,
)
from tidegate.spec.errors import (
    CollectionMissing,
    PeekMissing,
    ReplicaMissing,
    SinceViolation,
    WriteOnlyCollection,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import ValidFrom
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import (
    AllowCompaction,
    CancelPeek,
    CreateDataflow,
    Hello,
    Peek,
    Schedule,
)
from tidegate.spec.protocol.responses import (
    Frontiers,
    PeekCanceled,
    PeekError,
    PeekResponse,
    PeekRows,
    SubscribeBatch,
    SubscribeDroppedAt,
    SubscribeResponse,
)
from tidegate.spec.protocol.types import RowSetFinishing
from tidegate.spec.testing.controller import (
    commands_to,
    index_dataflow,
    of_type,
    subscribe_dataflow,
)

S1 = GlobalId.user(1)
I1, I2 = GlobalId.user(10), GlobalId.user(11)
SUB = GlobalId.transient(5)
LOG = GlobalId.system(3)
A = Antichain
ROWS = PeekRows(((("x",), 2), (("y",), 1)))


@pytest.fixture
def storage() -> InMemoryStorage:
    st = InMemoryStorage()
    st.add_collection(S1, since=0, upper=10)
    return st


@pytest.fixture
def ctl(storage: InMemoryStorage) -> ComputeController:
    c = ComputeController(storage, check_protocol=True)
    c.initialization_complete()
    c.create_instance("c1", {"peek_log": LOG})
    c.add_replica("c1", "r1")
    c.add_replica("c1", "r2")
    c.create_dataflow("c1", index_dataflow(I1, sources=[S1], as_of=2))
    return c


def since(ctl: ComputeController, id: GlobalId) -> Antichain:
    return ctl.instance("c1").collection(id).read_frontier


# -- peeks -------------------------------------------------------------------------------


def test_peek_holds_then_first_answer_wins(ctl: ComputeController) -> None:
    ctl.set_read_policy("c1", [(I1, ValidFrom(A([3])))])
    assert since(ctl, I1) == A([2])  # warmup still at the as_of
    ctl.drain()
    uid = ctl.peek("c1", I1, 2, RowSetFinishing(limit=5))
    effects = ctl.drain()
    sent = of_type(effects, SendCommand)
    assert {e.replica for e in sent} == {"r1", "r2"}
    assert all(isinstance(e.command, Peek) and e.command.uuid == uid for e in sent)
    ctl.maintain()
    ctl.handle_response("c1", "r1", 1, Frontiers(I1, A([9])))
    assert since(ctl, I1) == A([2])  # the peek holds it
    ctl.drain()
    ctl.handle_response("c1", "r2", 1, PeekResponse(uid, ROWS))
    out = ctl.drain()
    assert of_type(out, PeekNotification) == [PeekNotification("c1", uid, "success", rows=3)]
    assert of_type(out, PeekResultOut) == [PeekResultOut("c1", uid, ROWS)]
    cmds = commands_to(out, "r1")
    # CancelPeek goes out before the AllowCompaction the released hold causes.
    assert cmds == [CancelPeek(uid), AllowCompaction(I1, A([3]))]
    assert commands_to(out, "r2") == cmds
    # The slower replica's answer is ignored.
    ctl.handle_response("c1", "r1", 1, PeekResponse(uid, PeekRows(())))
    assert ctl.drain() == []


def test_peek_validation(ctl: ComputeController) -> None:
    with pytest.raises(SinceViolation) as e:
        ctl.peek("c1", I1, 1)
    assert e.value.id == I1
    with pytest.raises(CollectionMissing):
        ctl.peek("c1", GlobalId.user(99), 5)
    with pytest.raises(ReplicaMissing):
        ctl.peek("c1", I1, 5, target_replica="r9")
    ctl.create_dataflow("c1", subscribe_dataflow(SUB, sources=[S1], as_of=2))
    with pytest.raises(WriteOnlyCollection):
        ctl.peek("c1", SUB, 5)
    assert ctl.instance("c1").pending_peeks() == []


def test_peek_exactly_at_since_is_allowed(ctl: ComputeController) -> None:
    ctl.drain()
    uid = ctl.peek("c1", I1, 2)
    ctl.drain()
    assert ctl.instance("c1").pending_peeks() == [uid]


def test_targeted_peek_ignores_other_replicas(ctl: ComputeController) -> None:
    ctl.drain()
    uid = ctl.peek("c1", I1, 3, target_replica="r2")
    effects = ctl.drain()
    assert {e.replica for e in of_type(effects, SendCommand)} == {"r1", "r2"}
    ctl.handle_response("c1", "r1", 1, PeekResponse(uid, ROWS))
    assert ctl.drain() == []
    ctl.handle_response("c1", "r2", 1, PeekResponse(uid, PeekError("boom")))
    out = ctl.drain()
    assert of_type(out, PeekNotification) == [PeekNotification("c1", uid, "error", message="boom")]
    assert of_type(out, PeekResultOut) == [PeekResultOut("c1", uid, PeekError("boom"))]


def test_targeted_peek_fails_when_its_replica_goes(ctl: ComputeController) -> None:
    ctl.drain()
    uid = ctl.peek("c1", I1, 3, target_replica="r2")
    ctl.drain()
    other = ctl.peek("c1", I1, 3)
    ctl.drain()
    ctl.drop_replica("c1", "r2")
    out = ctl.drain()
    assert of_type(out, PeekResultOut) == [
        PeekResultOut("c1", uid, PeekError(ERROR_TARGET_REPLICA_FAILED))
    ]
    assert commands_to(out, "r1") == [CancelPeek(uid)]
    assert ctl.instance("c1").pending_peeks() == [other]


def test_cancel_peek(ctl: ComputeController) -> None:
    ctl.drain()
    uid = ctl.peek("c1", I1, 3)
    ctl.drain()
    ctl.cancel_peek("c1", uid)
    out = ctl.drain()
    assert of_type(out, PeekResultOut) == [PeekResultOut("c1", uid, PeekCanceled())]
    assert of_type(out, PeekNotification)[0].kind == "canceled"
    assert CancelPeek(uid) in commands_to(out, "r1")
    # A late answer is ignored; a second cancel names no pending peek.
    ctl.handle_response("c1", "r1", 1, PeekResponse(uid, ROWS))
    assert ctl.drain() == []
    with pytest.raises(PeekMissing):
        ctl.cancel_peek("c1", uid)


def test_peek_uuid_comes_from_the_factory_or_the_caller() -> None:
    st = InMemoryStorage()
    st.add_collection(S1)
    ctl = ComputeController(st, uuid_factory=lambda: uuid.UUID(int=42))
    ctl.create_instance("c1")
    ctl.create_dataflow("c1", index_dataflow(I1, sources=[S1]))
    assert ctl.peek("c1", I1, 0) == uuid.UUID(int=42)
    mine = uuid.UUID(int=7)
    assert ctl.peek("c1", I1, 0, uuid=mine) == mine


def test_peek_on_storage_collection_holds_storage(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    storage.set_implied(S1, A([1]))
    for r in ("r1", "r2"):
        ctl.handle_response("c1", r, 1, Frontiers(I1, input=A([2])))
    assert storage.since(S1) == A([1])
    ctl.drain()
    uid = ctl.peek("c1", S1, 1, target="persist")
    ctl.drain()
    storage.set_implied(S1, A([5]))
    assert storage.since(S1) == A([1])  # the peek holds it
    ctl.handle_response("c1", "r1", 1, PeekResponse(uid, ROWS))
    out = ctl.drain()
    assert len(of_type(out, PeekResultOut)) == 1
    assert storage.since(S1) == A([2])  # now only the dataflow's holds at its as_of
    with pytest.raises(SinceViolation):
        ctl.peek("c1", S1, 1, target="persist")
    with pytest.raises(CollectionMissing):
        ctl.peek("c1", GlobalId.user(99), 1, target="persist")


def test_log_collections_are_peekable_from_zero(ctl: ComputeController) -> None:
    view = ctl.instance("c1")
    assert view.collection(LOG).kind == "log"
    assert view.replica_collection("r1", LOG).as_of == A([0])
    ctl.drain()
    uid = ctl.peek("c1", LOG, 0)
    effects = ctl.drain()
    assert len(of_type(effects, SendCommand)) == 2
    ctl.handle_response("c1", "r1", 1, PeekResponse(uid, PeekRows(())))
    out = ctl.drain()
    assert of_type(out, PeekNotification)[0].rows == 0


# -- subscribes ----------------------------------------------------------------------------


def batch(lower, upper, updates=(), error=None):
    return SubscribeResponse(SUB, SubscribeBatch(A(lower), A(upper), tuple(updates), error))


def test_subscribe_merges_replicas_gap_free(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", subscribe_dataflow(SUB, sources=[S1], as_of=2))
    ctl.drain()
    ctl.handle_response("c1", "r1", 1, batch([0], [4], [(2, ("a",), 1), (3, ("b",), 1)]))
    out = ctl.drain()
    assert of_type(out, SubscribeBatchOut) == [
        SubscribeBatchOut("c1", SUB, A([2]), A([4]), ((2, ("a",), 1), (3, ("b",), 1)))
    ]
    # r2 lags: its first batch is a duplicate and is suppressed; the next one is trimmed.
    ctl.handle_response("c1", "r2", 1, batch([0], [3], [(2, ("a",), 1)]))
    assert of_type(ctl.drain(), SubscribeBatchOut) == []
    ctl.handle_response("c1", "r2", 1, batch([3], [6], [(3, ("b",), 1), (5, ("c",), 1)]))
    out = ctl.drain()
    assert of_type(out, SubscribeBatchOut) == [
        SubscribeBatchOut("c1", SUB, A([4]), A([6]), ((5, ("c",), 1),))
    ]
    ctl.handle_response("c1", "r1", 1, batch([4], [], [(5, ("c",), 1)]))
    out = ctl.drain()
    assert of_type(out, SubscribeBatchOut) == [SubscribeBatchOut("c1", SUB, A([6]), A(), ())]
    # Nothing after the upper reached [].
    ctl.handle_response("c1", "r2", 1, batch([6], []))
    assert of_type(ctl.drain(), SubscribeBatchOut) == []
    assert ctl.instance("c1").active_subscribes() == []


def test_subscribe_stops_after_drop(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", subscribe_dataflow(SUB, sources=[S1], as_of=2))
    ctl.handle_response("c1", "r1", 1, batch([0], [3]))
    ctl.drain()
    ctl.drop_collections("c1", [SUB])
    out = ctl.drain()
    assert AllowCompaction(SUB, A()) in commands_to(out, "r1")
    ctl.handle_response("c1", "r1", 1, batch([3], [5]))
    assert of_type(ctl.drain(), SubscribeBatchOut) == []
    ctl.handle_response("c1", "r1", 1, SubscribeResponse(SUB, SubscribeDroppedAt(A([5]))))
    assert SUB in ctl.instance("c1").collection_ids(include_dropped=True)
    ctl.handle_response("c1", "r2", 1, SubscribeResponse(SUB, SubscribeDroppedAt(A([0]))))
    assert SUB not in ctl.instance("c1").collection_ids(include_dropped=True)


def test_targeted_subscribe_error_batch_when_replica_goes(ctl: ComputeController) -> None:
    ctl.drain()
    ctl.create_dataflow("c1", subscribe_dataflow(SUB, sources=[S1], as_of=2), target_replica="r2")
    effects = ctl.drain()
    assert commands_to(effects, "r1") == []
    assert any(isinstance(c, CreateDataflow) for c in commands_to(effects, "r2"))
    ctl.handle_response("c1", "r2", 1, batch([0], [4]))
    ctl.drain()
    ctl.replica_failed("c1", "r2", 1)
    out = ctl.drain()
    assert of_type(out, SubscribeBatchOut) == [
        SubscribeBatchOut("c1", SUB, A([4]), A([4]), (), ERROR_TARGET_REPLICA_FAILED)
    ]
    assert ctl.instance("c1").active_subscribes() == []


def test_subscribe_error_batch_is_forwarded(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", subscribe_dataflow(SUB, sources=[S1], as_of=2))
    ctl.drain()
    ctl.handle_response("c1", "r1", 1, batch([0], [3], error="too big"))
    out = ctl.drain()
    assert of_type(out, SubscribeBatchOut) == [
        SubscribeBatchOut("c1", SUB, A([2]), A([3]), (), "too big")
    ]


# -- failure and rehydration ------------------------------------------------------------------


def test_rehydration_replays_reduced_history_on_next_epoch(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    ctl.create_dataflow("c1", index_dataflow(I2, sources=[S1], as_of=2))
    ctl.drop_collections("c1", [I2])
    storage.advance_upper(S1, A([12]))
    ctl.storage_frontiers_advanced([S1])
    ctl.set_read_policy("c1", [(I1, ValidFrom(A([5])))])
    ctl.maintain()
    ctl.drain()
    pending = ctl.peek("c1", I1, 6)
    ctl.drain()
    ctl.replica_failed("c1", "r1", 1, "connection reset")
    out = ctl.drain()
    statuses = [(e.status, e.epoch) for e in of_type(out, ReplicaStatusEvent)]
    assert statuses == [("failed", 1), ("rehydrating", 2)]
    assert of_type(out, ConnectReplica)[0].epoch == 2
    replay = commands_to(out, "r1")
    assert all(e.epoch == 2 for e in of_type(out, SendCommand))
    assert isinstance(replay[0], Hello)
    dataflows = [c.dataflow for c in replay if isinstance(c, CreateDataflow)]
    assert [d.export_ids for d in dataflows] == [(I1,)]  # I2 was dropped: gone from the history
    assert dataflows[0].as_of == A([5])  # compaction folded into the as_of
    assert dataflows[0].source_imports[0].upper == A([12])  # refreshed source upper
    assert Schedule(I1) in replay
    assert [c.uuid for c in replay if isinstance(c, Peek)] == [pending]
    assert ctl.instance("c1").replica_collection("r1", I1).as_of == A([5])
    # Responses from the old epoch are ignored; the new epoch is heard.
    ctl.handle_response("c1", "r1", 1, PeekResponse(pending, ROWS))
    assert ctl.drain() == []
    ctl.handle_response("c1", "r1", 2, PeekResponse(pending, ROWS))
    assert len(of_type(ctl.drain(), PeekResultOut)) == 1
    # A stale failure report does nothing.
    ctl.replica_failed("c1", "r1", 1)
    assert ctl.drain() == []
    ctl.replica_connected("c1", "r1", 2)
    assert of_type(ctl.drain(), ReplicaStatusEvent)[0].status == "connected"


def test_failed_replica_releases_and_retakes_input_holds(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    before = storage.hold_count(S1)
    ctl.replica_failed("c1", "r1", 1)
    assert storage.hold_count(S1) == before
    ctl.drop_replica("c1", "r1")
    assert storage.hold_count(S1) == before - 1
