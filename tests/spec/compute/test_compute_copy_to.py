"""Copy-to sinks in the compute controller (docs/reference/compute.md sections 9.4, 9.6, 9.10).

A copy-to writes its input's contents at the as_of once; the controller gives
its client the first replica's answer (rows or an error) and then drops it.
"""

from __future__ import annotations

import dataclasses

import pytest

from tidegate.spec.compute import (
    ERROR_TARGET_REPLICA_FAILED,
    ComputeController,
    CopyToOut,
    InMemoryStorage,
)
from tidegate.spec.errors import (
    EmptyAsOfForCopyTo,
    RemoteProtocolError,
    WriteOnlyCollection,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import ValidFrom
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import AllowCompaction, CreateDataflow
from tidegate.spec.protocol.responses import (
    CopyToDropped,
    CopyToError,
    CopyToResponse,
    CopyToRowCount,
    Frontiers,
)
from tidegate.spec.protocol.types import CopyToConnection, DataflowDescription, SinkExport
from tidegate.spec.testing.controller import commands_to, of_type, subscribe_dataflow

S1 = GlobalId.user(1)
CT = GlobalId.transient(7)
A = Antichain
URL = "file:///tmp/out"


def copy_to_dataflow(export: GlobalId, as_of: Antichain | int = 2) -> DataflowDescription:
    df = subscribe_dataflow(export, sources=[S1], as_of=as_of)
    return dataclasses.replace(
        df, sink_exports=(SinkExport(export, export, CopyToConnection(URL)),)
    )


@pytest.fixture
def storage() -> InMemoryStorage:
    st = InMemoryStorage()
    st.add_collection(S1, since=0, upper=10)
    return st


@pytest.fixture
def ctl(storage: InMemoryStorage) -> ComputeController:
    c = ComputeController(storage, check_protocol=True)
    c.initialization_complete()
    c.create_instance("c1")
    c.add_replica("c1", "r1")
    c.add_replica("c1", "r2")
    c.drain()
    return c


def test_empty_as_of_is_refused_and_changes_nothing(
    ctl: ComputeController, storage: InMemoryStorage
) -> None:
    before = storage.storage_frontiers(S1)
    with pytest.raises(EmptyAsOfForCopyTo) as e:
        ctl.create_dataflow("c1", copy_to_dataflow(CT, as_of=A()))
    assert e.value.id == CT
    assert ctl.drain() == []
    assert ctl.instance("c1").active_copy_tos() == []
    assert storage.storage_frontiers(S1) == before


def test_read_policy_on_a_copy_to_is_refused(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", copy_to_dataflow(CT))
    ctl.drain()
    with pytest.raises(WriteOnlyCollection) as e:
        ctl.set_read_policy("c1", [(CT, ValidFrom(A([5])))])
    assert e.value.id == CT
    assert ctl.drain() == []


def test_first_answer_wins_then_the_copy_to_is_dropped(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", copy_to_dataflow(CT))
    sent = ctl.drain()
    for r in ("r1", "r2"):
        assert any(isinstance(c, CreateDataflow) for c in commands_to(sent, r))
    assert ctl.instance("c1").active_copy_tos() == [CT]

    ctl.handle_response("c1", "r2", 1, CopyToResponse(CT, CopyToRowCount(5)))
    out = ctl.drain()
    assert of_type(out, CopyToOut) == [CopyToOut("c1", CT, rows=5)]
    # The copy-to is dropped right away: every replica is told to drop it.
    for r in ("r1", "r2"):
        assert commands_to(out, r) == [AllowCompaction(CT, A())]
    assert ctl.instance("c1").active_copy_tos() == []

    # The slower replica's answer (here an error) reaches no client.
    ctl.handle_response("c1", "r1", 1, CopyToResponse(CT, CopyToError("disk full")))
    assert of_type(ctl.drain(), CopyToOut) == []
    # Both replicas are done with it: the collection is gone.
    assert CT not in [c.id for c in ctl.instance("c1").collections()]


def test_an_error_answer_goes_to_the_client_once(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", copy_to_dataflow(CT))
    ctl.drain()
    ctl.handle_response("c1", "r1", 1, CopyToResponse(CT, CopyToError("not writable")))
    ctl.handle_response("c1", "r2", 1, CopyToResponse(CT, CopyToRowCount(3)))
    assert of_type(ctl.drain(), CopyToOut) == [CopyToOut("c1", CT, error="not writable")]


def test_a_replica_dropped_answer_after_the_drop_is_accepted_silently(
    ctl: ComputeController,
) -> None:
    ctl.create_dataflow("c1", copy_to_dataflow(CT))
    ctl.drain()
    ctl.handle_response("c1", "r1", 1, CopyToResponse(CT, CopyToRowCount(1)))
    ctl.drain()
    ctl.handle_response("c1", "r2", 1, CopyToResponse(CT, CopyToDropped()))
    assert of_type(ctl.drain(), CopyToOut) == []
    assert CT not in [c.id for c in ctl.instance("c1").collections()]


def test_a_second_answer_from_one_replica_is_its_fault(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", copy_to_dataflow(CT))
    ctl.drain()
    ctl.handle_response("c1", "r1", 1, CopyToResponse(CT, CopyToRowCount(1)))
    with pytest.raises(RemoteProtocolError):
        ctl.handle_response("c1", "r1", 1, CopyToResponse(CT, CopyToRowCount(1)))
    with pytest.raises(RemoteProtocolError):  # no Frontiers for a copy-to
        ctl.handle_response("c1", "r2", 1, Frontiers(CT, write=A([3])))


def test_an_answered_copy_to_is_not_replayed_to_a_rehydrating_replica(
    ctl: ComputeController,
) -> None:
    ctl.create_dataflow("c1", copy_to_dataflow(CT))
    ctl.drain()
    # Before an answer, a rehydrated replica is sent the copy-to again ...
    ctl.replica_failed("c1", "r2", 1, "cut")
    replay = commands_to(ctl.drain(), "r2")
    assert [c for c in replay if isinstance(c, CreateDataflow)] != []
    ctl.handle_response("c1", "r1", 1, CopyToResponse(CT, CopyToRowCount(4)))
    ctl.drain()
    # ... after the answer it is not.
    ctl.replica_failed("c1", "r2", 2, "cut")
    replay = commands_to(ctl.drain(), "r2")
    assert [c for c in replay if isinstance(c, CreateDataflow)] == []
    assert [c for c in replay if isinstance(c, AllowCompaction) and c.id == CT] == []


def test_a_targeted_copy_to_fails_with_its_replica(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", copy_to_dataflow(CT), target_replica="r1")
    ctl.drain()
    ctl.drop_replica("c1", "r1")
    out = ctl.drain()
    assert of_type(out, CopyToOut) == [CopyToOut("c1", CT, error=ERROR_TARGET_REPLICA_FAILED)]


def test_dropping_a_copy_to_answers_nobody(ctl: ComputeController) -> None:
    ctl.create_dataflow("c1", copy_to_dataflow(CT))
    ctl.drain()
    ctl.drop_collections("c1", [CT])
    ctl.drain()
    ctl.handle_response("c1", "r1", 1, CopyToResponse(CT, CopyToDropped()))
    ctl.handle_response("c1", "r2", 1, CopyToResponse(CT, CopyToRowCount(2)))
    assert of_type(ctl.drain(), CopyToOut) == []
