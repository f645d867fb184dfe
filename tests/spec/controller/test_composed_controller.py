"""The composed controller: compute holds on storage flow into storage; storage uppers into scheduling."""

from __future__ import annotations

import pytest

from tidegate.spec.compute import FrontierUpper, PeekResultOut
from tidegate.spec.controller import Controller
from tidegate.spec.errors import CollectionMissing, SinceViolation
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier, ValidFrom
from tidegate.spec.ids import GlobalId
from tidegate.spec.protocol.commands import CreateDataflow, Schedule
from tidegate.spec.protocol.responses import Frontiers, PeekResponse, PeekRows
from tidegate.spec.storage import CollectionDescription, MaterializedView, Table, UpperChanged
from tidegate.spec.testing.controller import commands_to, index_dataflow, mv_dataflow, of_type

A = Antichain
T1, MV = GlobalId.user(1), GlobalId.user(30)
I1 = GlobalId.user(10)


@pytest.fixture
def ctl() -> Controller:
    c = Controller()
    c.storage.create_collections([(T1, CollectionDescription(Table()))])
    c.initialization_complete()
    c.compute.create_instance("c1")
    c.compute.add_replica("c1", "r1")
    return c


def storage_since(ctl: Controller, id: GlobalId) -> Antichain:
    fr = ctl.storage.storage_frontiers(id)
    assert fr is not None
    return fr[0]


def test_storage_upper_schedules_waiting_dataflow(ctl: Controller) -> None:
    ctl.drain()
    ctl.compute.create_dataflow("c1", index_dataflow(I1, sources=[T1], as_of=0))
    effects = ctl.drain()
    assert CreateDataflow in [type(c) for c in commands_to(effects)]
    assert Schedule(I1) not in commands_to(effects)  # T1's upper is still [0]
    ctl.storage.update_write_frontiers([(T1, A([5]))])
    effects = ctl.drain()
    assert UpperChanged(T1, A([5])) in effects
    assert commands_to(effects) == [Schedule(I1)]


def test_compute_holds_keep_storage_readable(ctl: Controller) -> None:
    ctl.storage.update_write_frontiers([(T1, A([10]))])
    ctl.storage.set_read_policy([(T1, LagWriteFrontier(0, 1))])
    assert storage_since(ctl, T1) == A([10])
    with pytest.raises(SinceViolation):
        ctl.compute.create_dataflow("c1", index_dataflow(I1, sources=[T1], as_of=9))
    ctl.compute.create_dataflow("c1", index_dataflow(I1, sources=[T1], as_of=10))
    ctl.storage.update_write_frontiers([(T1, A([20]))])
    # The dataflow holds T1 at its as_of, the replica at what it read so far.
    assert storage_since(ctl, T1) == A([10])
    ctl.compute.handle_response("c1", "r1", 1, Frontiers(I1, A([15]), A([15]), A([15])))
    ctl.compute.set_read_policy("c1", [(I1, ValidFrom(A([14])))])
    ctl.compute.maintain()
    assert storage_since(ctl, T1) == A([14])
    ctl.compute.drop_collections("c1", [I1])
    ctl.compute.handle_response("c1", "r1", 1, Frontiers(I1, A(), A(), A()))
    assert storage_since(ctl, T1) == A([20])  # only storage's own policy is left


def test_persist_peek_holds_storage(ctl: Controller) -> None:
    ctl.storage.update_write_frontiers([(T1, A([10]))])
    ctl.drain()
    uid = ctl.compute.peek("c1", T1, 3, target="persist")
    ctl.drain()
    ctl.storage.set_read_policy([(T1, LagWriteFrontier(0, 1))])
    assert storage_since(ctl, T1) == A([3])
    ctl.drain()
    ctl.compute.handle_response("c1", "r1", 1, PeekResponse(uid, PeekRows(())))
    out = ctl.drain()
    assert len(of_type(out, PeekResultOut)) == 1
    assert storage_since(ctl, T1) == A([10])
    with pytest.raises(SinceViolation):
        ctl.compute.peek("c1", T1, 3, target="persist")


def test_materialized_view_needs_its_storage_collection(ctl: Controller) -> None:
    with pytest.raises(CollectionMissing):
        ctl.compute.create_dataflow("c1", mv_dataflow(MV, sources=[T1]))
    ctl.storage.create_collections([(MV, CollectionDescription(MaterializedView(inputs=(T1,))))])
    ctl.storage.update_write_frontiers([(MV, A([4])), (T1, A([8]))])
    ctl.drain()
    ctl.compute.create_dataflow("c1", mv_dataflow(MV, sources=[T1], as_of=3))
    effects = ctl.drain()
    assert FrontierUpper("c1", MV, A([4])) in effects
    assert ctl.compute.collection_frontiers("c1", MV).write_frontier == A([4])


def test_append_completion_schedules_waiting_dataflow(ctl: Controller) -> None:
    from tidegate.spec.storage import AppendCommand

    ctl.compute.create_dataflow("c1", index_dataflow(I1, sources=[T1], as_of=0))
    ticket = ctl.storage.append([AppendCommand(T1, [(("a",), 0, 1)], A([1]))])
    ctl.drain()
    ctl.storage.complete_write(ticket, T1, True, A([1]))
    effects = ctl.drain()
    assert UpperChanged(T1, A([1])) in effects
    assert commands_to(effects) == [Schedule(I1)]


def test_a_read_only_controller_writes_nothing_until_it_is_made_read_write() -> None:
    """Seed 001's read-only mode (a controller warming up beside the one that writes):
    allow_writes succeeds and sends nothing, appends are refused and change nothing, orphaned
    shards are not dropped, peeks are served; read_write sends AllowWrites for every live
    materialized view allowed to write, once, and a replica added later gets it replayed."""
    from tidegate.spec.errors import ReadOnlyController
    from tidegate.spec.protocol.commands import AllowWrites, Peek
    from tidegate.spec.storage import AppendCommand, StorageController

    # u99: a shard of an object the writer created after this controller read the catalog.
    ctl = Controller(StorageController([GlobalId.user(99)], read_only=True), read_only=True)
    ctl.storage.create_collections(
        [(T1, CollectionDescription(Table())), (MV, CollectionDescription(MaterializedView()))]
    )
    ctl.initialization_complete()
    ctl.compute.create_instance("c1")
    ctl.compute.add_replica("c1", "r1")
    ctl.compute.create_dataflow("c1", mv_dataflow(MV, sources=[T1], as_of=0))
    ctl.compute.create_dataflow("c1", index_dataflow(I1, sources=[T1], as_of=0))
    ctl.compute.allow_writes("c1", MV)
    ctl.storage.reconcile_state()
    effects = ctl.drain()
    assert not [c for c in commands_to(effects) if isinstance(c, AllowWrites)]
    assert not [e for e in effects if type(e).__name__ == "DropShard"]
    assert ctl.read_only
    with pytest.raises(ReadOnlyController):
        ctl.storage.append([AppendCommand(T1, [(("a",), 0, 1)], A([1]))])
    assert ctl.drain() == [] and ctl.storage.pending_appends() == []
    ctl.compute.peek("c1", I1, 0)
    assert [type(c) for c in commands_to(ctl.drain())] == [Peek]

    ctl.read_write()
    assert commands_to(ctl.drain()) == [AllowWrites(MV)]
    ctl.read_write()
    ctl.compute.allow_writes("c1", MV)
    assert commands_to(ctl.drain()) == []  # once
    ctl.compute.add_replica("c1", "r2")
    assert AllowWrites(MV) in commands_to(ctl.drain(), "r2")
    ctl.storage.append([AppendCommand(T1, [(("a",), 0, 1)], A([1]))])
    assert ctl.storage.pending_appends() != []


def test_a_read_only_allow_writes_answers_before_validating() -> None:
    """Materialize's ``ComputeController::allow_writes`` returns ``Ok`` in read-only mode before
    looking the instance or collection up (the adapter replays these calls during a takeover,
    for objects that may be gone meanwhile); read-write, unknown ids are errors."""
    from tidegate.spec.errors import InstanceMissing
    from tidegate.spec.protocol.commands import AllowWrites
    from tidegate.spec.storage import StorageController

    ctl = Controller(StorageController(read_only=True), read_only=True)
    ctl.storage.create_collections([(MV, CollectionDescription(MaterializedView()))])
    ctl.initialization_complete()
    ctl.compute.create_instance("c1")
    ctl.compute.add_replica("c1", "r1")
    ctl.compute.create_dataflow("c1", mv_dataflow(MV, sources=[], as_of=0))
    ctl.drain()
    ctl.compute.allow_writes("nowhere", MV)  # no such instance: fine
    ctl.compute.allow_writes("c1", GlobalId.user(99))  # no such collection: fine
    ctl.compute.allow_writes("c1", MV)  # remembered
    assert not [c for c in commands_to(ctl.drain()) if isinstance(c, AllowWrites)]
    ctl.read_write()
    assert commands_to(ctl.drain()) == [AllowWrites(MV)]
    with pytest.raises(InstanceMissing):
        ctl.compute.allow_writes("nowhere", MV)
    with pytest.raises(CollectionMissing):
        ctl.compute.allow_writes("c1", GlobalId.user(99))
