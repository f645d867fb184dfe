"""The ledger's per-command record updates change exactly the named field and never alias snapshots.

``apply_command`` rebuilds a collection or peek record with its constructor
(cheaper than ``dataclasses.replace``); these tests pin that the result is the
``replace`` of the old record, that a snapshot taken earlier is unchanged, and
that ``ReplicaSession.collection`` agrees with the copying ``collections``.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol import (
    AllowCompaction,
    AllowWrites,
    CancelPeek,
    ControllerSession,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Hello,
    IndexExport,
    InitializationComplete,
    InstanceConfig,
    LoggingConfig,
    MaterializedViewConnection,
    Peek,
    PeekDescription,
    ReplicaSession,
    Schedule,
    SinkExport,
)

LOG = GlobalId.system(1)
IDX = GlobalId.user(1)
MV = GlobalId.user(2)
P1 = uuid.UUID(int=1)


def _setup(session: ControllerSession | ReplicaSession) -> None:
    mv = DataflowDescription(
        debug_name="mv",
        sink_exports=(SinkExport(MV, IDX, MaterializedViewConnection()),),
        as_of=Antichain([2]),
    )
    idx = DataflowDescription(
        debug_name="idx", index_exports=(IndexExport(IDX, IDX),), as_of=Antichain([2])
    )
    for cmd in (
        Hello(uuid.UUID(int=100)),
        CreateInstance(InstanceConfig(LoggingConfig(index_logs=(("arrangements", LOG),)))),
        CreateDataflow(idx),
        CreateDataflow(mv),
        InitializationComplete(),
        Peek(PeekDescription(P1, IDX, 5)),
    ):
        session.on_command(cmd)


CASES: list[tuple[Any, GlobalId, dict[str, Any]]] = [
    (Schedule(IDX), IDX, {"scheduled": True}),
    (AllowWrites(MV), MV, {"writable": True}),
    (AllowCompaction(IDX, Antichain([4])), IDX, {"since": Antichain([4])}),
    (AllowCompaction(MV, Antichain()), MV, {"since": Antichain(), "dropped": True}),
]


@pytest.mark.parametrize("session_type", [ControllerSession, ReplicaSession])
@pytest.mark.parametrize(("cmd", "gid", "changes"), CASES)
def test_a_command_changes_exactly_its_field_and_leaves_snapshots_alone(
    session_type: type[ControllerSession | ReplicaSession],
    cmd: Any,
    gid: GlobalId,
    changes: dict[str, Any],
) -> None:
    s = session_type()
    _setup(s)
    before_rec = s.collections[gid]
    before = s.snapshot()
    s.on_command(cmd)
    assert s.collections[gid] == dataclasses.replace(before_rec, **changes)
    assert s.snapshot() != before
    fresh = session_type()
    _setup(fresh)
    assert fresh.snapshot() == before  # the earlier image was not mutated in place


@pytest.mark.parametrize("session_type", [ControllerSession, ReplicaSession])
def test_cancel_peek_marks_only_that_peek(
    session_type: type[ControllerSession | ReplicaSession],
) -> None:
    s = session_type()
    _setup(s)
    before = s.snapshot()
    s.on_command(CancelPeek(P1))
    ledger = s._ledger
    assert ledger.peeks[P1].cancel_requested
    assert ledger.peeks[P1].peek == PeekDescription(P1, IDX, 5)
    fresh = session_type()
    _setup(fresh)
    assert fresh.snapshot() == before


def test_replica_collection_lookup_agrees_with_the_collections_copy() -> None:
    s = ReplicaSession()
    assert s.collection(IDX) is None
    _setup(s)
    s.on_command(AllowCompaction(MV, Antichain()))
    for gid in (LOG, IDX, MV, GlobalId.user(99)):
        assert s.collection(gid) == s.collections.get(gid)
