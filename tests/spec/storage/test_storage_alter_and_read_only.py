"""``alter_export`` and exports in read-only mode, as Materialize's storage controller does them.

Pinned behaviours (``src/storage-controller/src/lib.rs``):

* ``create_exports`` runs an export (``run_export``: ``RunSink`` to its
  instance) only ``if !self.read_only``, and ``allow_writes`` (our
  ``read_write``) runs every export then: a read-only controller sends no
  ``RunSink`` at all, so not even a faulty replica can write to a sink target;
* ``alter_export`` takes a new read hold on the description's ``from`` at its
  since, refuses with ``ReadBeforeSince(from)`` unless that since is strictly
  before every time of the export's write frontier (where the sink resumes),
  keeps the write frontier and read policy, and sends ``RunSink`` with the
  new description, which replaces the running sink.
"""

from __future__ import annotations

import pytest

from tidegate.spec.errors import (
    ExportInstanceMissing,
    IdentifierMissing,
    InvalidUsage,
    ReadBeforeSince,
)
from tidegate.spec.frontier import Antichain
from tidegate.spec.frontier.read_policy import LagWriteFrontier
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import Schema
from tidegate.spec.storage import (
    CollectionDescription,
    ExportDescription,
    RunSink,
    SendStorageCommand,
    SimulatedSink,
    StorageAllowCompaction,
    StorageAllowWrites,
    StorageController,
    StorageFrontierUpper,
    StorageInitializationComplete,
    Table,
)
from tidegate.spec.storage_replica import StorageReplica
from tidegate.spec.storage_replica.outputs import OpenSink, ReadSinkInput, StopSinkInput
from tidegate.spec.testing import controller_fingerprint

u1, u2, u5 = GlobalId.user(1), GlobalId.user(2), GlobalId.user(5)
TABLE = CollectionDescription(Table())
SCHEMA = Schema.of(("a", "int64"))


def A(*ts: int) -> Antichain:
    return Antichain(ts)


def _controller(read_only: bool = False) -> StorageController:
    """Instance ``i`` with replica ``r``; tables u1 and u2 at upper 10, lagging by 2 (since 8)."""
    c = StorageController(read_only=read_only, check_protocol=True)
    c.create_instance("i")
    c.connect_replica("i", "r")
    c.initialization_complete()
    c.create_collections([(u1, TABLE), (u2, TABLE)])
    c.update_write_frontiers([(u1, A(10)), (u2, A(10))])
    c.set_read_policy([(u1, LagWriteFrontier(2, 1)), (u2, LagWriteFrontier(2, 1))])
    return c


def _sink(c: StorageController, from_id: GlobalId = u1, target: str = "t") -> None:
    token = c.prepare_export(u5, from_id)
    c.create_exports([(token, ExportDescription(from_id, "i", A(0), SimulatedSink(target)))])


def _sent(c: StorageController) -> list[object]:
    return [e.command for e in c.drain() if isinstance(e, SendStorageCommand)]


# -- read-only: no RunSink until writes are allowed --------------------------------------------


def test_a_read_only_controller_runs_no_export_until_writes_are_allowed() -> None:
    c = _controller(read_only=True)
    c.drain()
    _sink(c)
    c.update_write_frontiers([(u5, A(9))])  # the export's hold moves: still nothing sent
    sent = _sent(c)
    assert not [m for m in sent if isinstance(m, RunSink | StorageAllowCompaction)]
    assert not [m for m in c.history("i") if isinstance(m, RunSink)]
    c.read_write()
    sent = _sent(c)
    assert sent[0] == StorageAllowWrites()
    (run,) = [m for m in sent if isinstance(m, RunSink)]
    assert (run.id, run.as_of) == (u5, A(8))  # advanced to the hold it has now
    assert run in c.history("i")


def test_a_read_only_controller_drops_an_export_it_never_ran_without_a_word() -> None:
    c = _controller(read_only=True)
    _sink(c)
    c.drain()
    c.drop_sinks([u5])
    assert _sent(c) == []
    c.read_write()
    assert [m for m in _sent(c) if isinstance(m, RunSink)] == []


def test_a_replica_connected_to_a_read_only_controller_gets_no_run_sink_in_its_history() -> None:
    c = _controller(read_only=True)
    _sink(c)
    c.connect_replica("i", "r2")
    sent = _sent(c)
    assert StorageInitializationComplete() in sent
    assert not [m for m in sent if isinstance(m, RunSink)]


# -- alter_export ---------------------------------------------------------------------------------


def test_alter_export_to_a_new_input_moves_the_hold_and_reruns_the_sink() -> None:
    c = _controller()
    _sink(c)
    c.update_write_frontiers([(u5, A(9))])  # the sink covered [.., 9)
    c.drain()
    assert c.collection(u1).since == A(8)
    c.alter_export(u5, ExportDescription(u2, "i", A(0), SimulatedSink("t")))
    sent = _sent(c)
    (run,) = [m for m in sent if isinstance(m, RunSink)]
    assert run.description.from_id == u2 and run.as_of == A(8)
    view = c.export(u5)
    assert (view.read_capability, view.upper) == (A(8), A(9))  # the write frontier is kept
    assert c.dependencies(u5) == [u2]
    c.update_write_frontiers([(u1, A(20))])
    assert c.collection(u1).since == A(18)  # released: u1 compacts by its policy again
    assert c.collection(u2).since == A(8)  # held where the sink resumes
    history = [m for m in c.history("i") if isinstance(m, RunSink)]
    assert [m.description.from_id for m in history] == [u2]  # a replay runs the new one


def test_alter_export_refuses_an_input_not_readable_where_the_sink_resumes() -> None:
    c = _controller()
    _sink(c)
    c.update_write_frontiers([(u5, A(9)), (u2, A(30))])  # u2's since is now 28 > 8
    c.drain()
    before = controller_fingerprint(c)
    with pytest.raises(ReadBeforeSince) as e:
        c.alter_export(u5, ExportDescription(u2, "i", A(0), SimulatedSink("t")))
    assert e.value.id == u2
    assert controller_fingerprint(c) == before and c.drain() == []


def test_a_sink_that_never_progressed_cannot_be_altered() -> None:
    """Its write frontier is ``[0]``: no since is strictly before 0 (as in Materialize)."""
    c = _controller()
    _sink(c)
    with pytest.raises(ReadBeforeSince):
        c.alter_export(u5, ExportDescription(u1, "i", A(0), SimulatedSink("other")))


def test_alter_export_errors_change_nothing() -> None:
    c = _controller()
    _sink(c)
    c.update_write_frontiers([(u5, A(9))])
    c.drain()
    before = controller_fingerprint(c)
    with pytest.raises(IdentifierMissing):
        c.alter_export(u2, ExportDescription(u1, "i"))  # not an export
    with pytest.raises(IdentifierMissing):
        c.alter_export(u5, ExportDescription(GlobalId.user(9), "i"))
    with pytest.raises(ExportInstanceMissing):
        c.alter_export(u5, ExportDescription(u1, "nowhere"))
    with pytest.raises(InvalidUsage):
        c.alter_export(u5, "not a description")  # type: ignore[arg-type]
    assert controller_fingerprint(c) == before and c.drain() == []


def test_a_read_only_controller_alters_without_running_the_sink() -> None:
    c = _controller(read_only=True)
    _sink(c)
    c.update_write_frontiers([(u5, A(9))])
    c.drain()
    c.alter_export(u5, ExportDescription(u1, "i", A(0), SimulatedSink("other")))
    assert _sent(c) == []
    c.read_write()
    (run,) = [m for m in _sent(c) if isinstance(m, RunSink)]
    assert run.description.connection == SimulatedSink("other")


def test_the_replica_replaces_a_running_sink_when_it_is_altered() -> None:
    """The protocol allows a second ``RunSink`` for a live sink (an alter), on both sides: the
    replica closes the old run and resumes the new one from what its target covers."""
    c = _controller()
    replica = StorageReplica()

    def deliver() -> None:
        for m in _sent(c):
            replica.handle_command(m)

    deliver()  # Hello, the history, InitializationComplete, AllowWrites
    token = c.prepare_export(u5, u1)
    c.create_exports([(token, ExportDescription(u1, "i", A(0), SimulatedSink("t"), SCHEMA))])
    deliver()
    assert OpenSink(u5, SimulatedSink("t"), SCHEMA) in replica.drain()
    replica.sink_opened(u5, 9)  # its target covers [.., 9)
    assert ReadSinkInput(u5, u1, 8) in replica.drain()
    c.handle_response("i", "r", StorageFrontierUpper(u5, A(9)))
    c.alter_export(u5, ExportDescription(u2, "i", A(0), SimulatedSink("t"), SCHEMA))
    deliver()
    out = replica.drain()
    assert out.index(StopSinkInput(u5)) < out.index(OpenSink(u5, SimulatedSink("t"), SCHEMA))
    assert replica.sinks() == (u5,)
    replica.sink_opened(u5, 9)
    assert ReadSinkInput(u5, u2, 8) in replica.drain()  # the new input, read where it resumes
