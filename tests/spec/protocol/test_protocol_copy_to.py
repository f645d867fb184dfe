"""The protocol's rules for copy-to sinks (docs/reference/compute.md sections 4 and 6.1).

A replica answers each copy-to at most once (``CopyToResponse``: rows, an
error, or ``CopyToDropped`` after a drop), never reports frontiers for it, and
owes ``CopyToDropped`` for a copy-to dropped before it answered.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tidegate.spec.errors import (
    DuplicateCopyToResponse,
    FrontiersForCopyTo,
    LocalProtocolError,
    NotACopyTo,
    ProtocolError,
    RemoteProtocolError,
    ResponseAfterClose,
    ResponseAfterDrop,
    StageViolation,
    UnknownCollection,
    UnrequestedCopyToDropped,
    blamed,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
    AllowCompaction,
    CollectionKind,
    ControllerSession,
    CopyToConnection,
    CopyToDropped,
    CopyToError,
    CopyToResponse,
    CopyToRowCount,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    DropCollection,
    Frontiers,
    Hello,
    IndexExport,
    InitializationComplete,
    InstanceConfig,
    ReplicaSession,
    Schedule,
    SinkExport,
    Status,
)

IDX = GlobalId.user(1)
CT = GlobalId.transient(2)
OTHER = GlobalId.user(99)
EMPTY = Antichain()

Session = ControllerSession | ReplicaSession


def at(t: int) -> Antichain:
    return Antichain([t])


SETUP = [
    Hello(uuid.UUID(int=100)),
    CreateInstance(InstanceConfig()),
    CreateDataflow(
        DataflowDescription("index", index_exports=(IndexExport(IDX, IDX),), as_of=at(2))
    ),
    CreateDataflow(
        DataflowDescription(
            "copy-to",
            sink_exports=(SinkExport(CT, IDX, CopyToConnection("file:///x")),),
            as_of=at(3),
        )
    ),
    Schedule(CT),
    InitializationComplete(),
]


def sessions() -> list[Session]:
    out: list[Session] = [ControllerSession(), ReplicaSession()]
    for s in out:
        for cmd in SETUP:
            s.on_command(cmd)
    return out


def rejects(session: Session, resp: Any, error: type[ProtocolError]) -> None:
    """``resp`` is rejected with exactly ``error`` (blamed on the right side); nothing changes."""
    before = session.snapshot()
    with pytest.raises(error) as info:
        session.on_response(resp)
    side = RemoteProtocolError if isinstance(session, ControllerSession) else LocalProtocolError
    assert type(info.value) is type(blamed(error("probe"), side))
    assert session.snapshot() == before


def test_a_replica_answers_a_copy_to_at_most_once() -> None:
    for s in sessions():
        s.on_response(CopyToResponse(CT, CopyToRowCount(7)))
        rejects(s, CopyToResponse(CT, CopyToRowCount(7)), DuplicateCopyToResponse)
        rejects(s, CopyToResponse(CT, CopyToError("again")), DuplicateCopyToResponse)
        rejects(s, Status(CT), ResponseAfterClose)


def test_an_error_is_the_one_answer_too() -> None:
    for s in sessions():
        s.on_response(CopyToResponse(CT, CopyToError("not writable")))
        rejects(s, CopyToResponse(CT, CopyToRowCount(1)), DuplicateCopyToResponse)


def test_copy_to_responses_only_for_copy_tos_and_no_frontiers_for_them() -> None:
    for s in sessions():
        rejects(s, CopyToResponse(IDX, CopyToRowCount(1)), NotACopyTo)
        rejects(s, CopyToResponse(OTHER, CopyToRowCount(1)), UnknownCollection)
        rejects(s, Frontiers(CT, write=at(4)), FrontiersForCopyTo)


def test_dropped_only_after_a_drop_and_owed_by_an_unanswered_copy_to() -> None:
    controller, replica = sessions()
    assert replica.pending_copy_tos() == (CT,)
    assert not replica.owes_nothing()
    for s in (controller, replica):
        rejects(s, CopyToResponse(CT, CopyToDropped()), UnrequestedCopyToDropped)
    controller.on_command(AllowCompaction(CT, EMPTY))
    drop = replica.on_command(AllowCompaction(CT, EMPTY))[0]
    assert drop == DropCollection(CT, CollectionKind.COPY_TO, (), False, True)
    assert replica.owed_copy_to_dropped() == (CT,)
    # The controller cannot know whether the replica saw the drop before it answered.
    controller.check_response(CopyToResponse(CT, CopyToRowCount(2)))
    rejects(replica, CopyToResponse(CT, CopyToRowCount(2)), ResponseAfterDrop)
    for s in (controller, replica):
        s.on_response(CopyToResponse(CT, CopyToDropped()))
        rejects(s, CopyToResponse(CT, CopyToDropped()), DuplicateCopyToResponse)
    assert replica.owed_copy_to_dropped() == ()
    assert replica.owes_nothing()


def test_an_answered_copy_to_owes_nothing_on_its_drop() -> None:
    replica = sessions()[1]
    replica.on_response(CopyToResponse(CT, CopyToRowCount(0)))
    drop = replica.on_command(AllowCompaction(CT, EMPTY))[0]
    assert drop == DropCollection(CT, CollectionKind.COPY_TO, (), False, False)
    assert replica.owes_nothing()


def test_a_new_iteration_forgets_the_answers() -> None:
    replica = sessions()[1]
    replica.on_response(CopyToResponse(CT, CopyToRowCount(1)))
    for cmd in SETUP:
        replica.on_command(cmd)
    assert replica.pending_copy_tos() == (CT,)
    replica.on_response(CopyToResponse(CT, CopyToRowCount(1)))


def test_no_copy_to_answer_before_initialization_complete() -> None:
    for s in (ControllerSession(), ReplicaSession()):
        for cmd in SETUP[:-1]:
            s.on_command(cmd)
        rejects(s, CopyToResponse(CT, CopyToRowCount(1)), StageViolation)
        s.on_command(SETUP[-1])
        s.on_response(CopyToResponse(CT, CopyToRowCount(1)))
