"""Copy-to sinks on the replica core: the contents at the as_of, handed out once; one answer.

The replica gathers the sink's contents at the dataflow's as_of from its
executor, hands them to its driver to write (:class:`WriteCopyTo`) once they
are complete, and answers the controller exactly once: rows written, an
error, or ``CopyToDropped`` when the copy-to is dropped first.
"""

from __future__ import annotations

import uuid

import pytest

from tidegate.spec.compute_replica import ComputeReplica, Respond, WriteCopyTo
from tidegate.spec.errors.replica import UnknownCopyTo
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.relation import Get
from tidegate.spec.plan.schema import Schema
from tidegate.spec.protocol import (
    AllowCompaction,
    BuildDesc,
    CopyToConnection,
    CopyToDropped,
    CopyToError,
    CopyToResponse,
    CopyToRowCount,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Frontiers,
    Hello,
    InitializationComplete,
    InstanceConfig,
    Schedule,
    SinkExport,
    SourceImport,
)
from tidegate.spec.testing.compute_replica import ReplicaDriver, ReplicaStorageModel

T1 = GlobalId.user(1)
OBJ = GlobalId.user(10)
CT = GlobalId.transient(12)
SCHEMA = Schema.of(("k", "int64", False), ("s", "string"))
URL = "file:///tmp/copy"
EMPTY = Antichain()


def at(t: int) -> Antichain:
    return Antichain([t])


def copy_to_dataflow(as_of: int = 2, plan: object | None = None) -> DataflowDescription:
    return DataflowDescription(
        "copy-to",
        source_imports=(SourceImport(T1),),
        objects_to_build=(BuildDesc(OBJ, plan if plan is not None else Get(T1, SCHEMA)),),
        sink_exports=(SinkExport(CT, OBJ, CopyToConnection(URL), up_to=at(as_of + 1)),),
        as_of=at(as_of),
    )


class Rig:
    def __init__(self) -> None:
        self.storage = ReplicaStorageModel()
        self.storage.create(T1)
        self.replica = ComputeReplica(PythonExecutor())
        self.driver = ReplicaDriver(self.replica, self.storage)

    def connect(self, *cmds: object) -> list[object]:
        out = self.driver.command(Hello(uuid.UUID(int=1)))
        out += self.driver.command(CreateInstance(InstanceConfig()))
        for c in cmds:
            out += self.driver.command(c)  # type: ignore[arg-type]
        out += self.driver.command(InitializationComplete())
        return list(out)

    def copy_to_answers(self) -> list[object]:
        return [r for r in self.driver.responses if isinstance(r, CopyToResponse)]


def started(as_of: int = 2) -> Rig:
    rig = Rig()
    rig.connect(CreateDataflow(copy_to_dataflow(as_of)), Schedule(CT))
    return rig


def test_the_contents_at_the_as_of_are_handed_out_once_complete() -> None:
    rig = started(as_of=2)
    # Inserts and retractions before and at the as_of; a change after it is not copied.
    rig.storage.append(T1, [((1, "a"), 0, 1), ((2, "b"), 0, 2), ((2, "b"), 1, -1)], 2)
    rig.driver.step()
    assert rig.driver.copy_tos == {}  # the upper has not passed the as_of yet
    rig.storage.append(T1, [((3, "c"), 2, 2), ((1, "a"), 2, -1), ((4, "d"), 3, 1)], 5)
    rig.driver.step()
    write = rig.driver.copy_tos.pop(CT)
    assert write == WriteCopyTo(CT, URL, 2, SCHEMA, (((2, "b"), 1), ((3, "c"), 2)))
    assert rig.copy_to_answers() == []  # answered only once the driver reports the write
    rig.replica.copy_to_completed(CT, 3)
    rig.driver.perform()
    assert rig.copy_to_answers() == [CopyToResponse(CT, CopyToRowCount(3))]
    # Nothing more: no second write, no second answer, no frontiers.
    rig.storage.append(T1, [((5, "e"), 5, 1)], 8)
    rig.driver.step()
    assert rig.driver.copy_tos == {}
    assert rig.copy_to_answers() == [CopyToResponse(CT, CopyToRowCount(3))]
    assert not [r for r in rig.driver.responses if isinstance(r, Frontiers) and r.id == CT]
    with pytest.raises(UnknownCopyTo):
        rig.replica.copy_to_completed(CT, 3)


def test_a_failed_write_is_the_one_answer() -> None:
    rig = started()
    rig.storage.append(T1, [((1, "a"), 0, 1)], 4)
    rig.driver.step()
    assert CT in rig.driver.copy_tos
    rig.replica.copy_to_failed(CT, "file:///nope is not writable")
    rig.driver.perform()
    assert rig.copy_to_answers() == [
        CopyToResponse(CT, CopyToError("file:///nope is not writable"))
    ]


def test_a_copy_to_dropped_before_it_finished_answers_dropped_and_ignores_the_late_write() -> None:
    rig = started()
    rig.storage.append(T1, [((1, "a"), 0, 1)], 4)
    rig.driver.step()
    assert CT in rig.driver.copy_tos
    rig.driver.command(AllowCompaction(CT, EMPTY))
    assert rig.copy_to_answers() == [CopyToResponse(CT, CopyToDropped())]
    rig.replica.copy_to_completed(CT, 1)  # the write finished anyway: it answers nothing
    assert rig.replica.drain() == []
    assert rig.driver.checker.owes_nothing()


def test_a_copy_to_dropped_before_its_data_answers_dropped() -> None:
    rig = started()
    outs = rig.driver.command(AllowCompaction(CT, EMPTY))
    assert outs == [CopyToResponse(CT, CopyToDropped())]
    assert rig.replica.reading() == {}


def test_an_answered_copy_to_owes_nothing_when_dropped() -> None:
    rig = started()
    rig.storage.append(T1, [((1, "a"), 0, 1)], 4)
    rig.driver.step()
    rig.replica.copy_to_completed(CT, 1)
    rig.driver.perform()
    assert rig.driver.command(AllowCompaction(CT, EMPTY)) == []
    assert rig.copy_to_answers() == [CopyToResponse(CT, CopyToRowCount(1))]


def test_an_error_in_the_collection_is_the_answer() -> None:
    from tidegate.spec.plan.relation import Map
    from tidegate.spec.plan.scalar import BinaryFunc, CallBinary, ColumnRef, Literal
    from tidegate.spec.plan.schema import ScalarType

    div = CallBinary(BinaryFunc.DIV, ColumnRef(0), Literal(0, ScalarType.INT64))
    plan = Map(Get(T1, SCHEMA), (div,), ("q",))
    rig = Rig()
    rig.connect(CreateDataflow(copy_to_dataflow(plan=plan)), Schedule(CT))
    rig.storage.append(T1, [((1, "a"), 0, 1)], 4)
    rig.driver.step()
    assert rig.driver.copy_tos == {}
    [answer] = rig.copy_to_answers()
    assert isinstance(answer, CopyToResponse) and isinstance(answer.result, CopyToError)
    assert "division by zero" in answer.result.message


def test_a_reconnect_rebuilds_the_copy_to_and_forgets_the_old_write() -> None:
    rig = started()
    rig.storage.append(T1, [((1, "a"), 0, 1)], 4)
    rig.driver.step()
    old = rig.driver.copy_tos.pop(CT)
    # A new controller connection replays the copy-to: it is rebuilt, never reused.
    rig.driver.checker = type(rig.driver.checker)()
    rig.driver.responses.clear()
    rig.connect(CreateDataflow(copy_to_dataflow()), Schedule(CT))
    rig.driver.step()
    new = rig.driver.copy_tos.pop(CT)
    assert new == old
    rig.replica.copy_to_completed(CT, 1)  # the old iteration's write: ignored
    assert [o for o in rig.replica.drain() if isinstance(o, Respond)] == []
    rig.replica.copy_to_completed(CT, 1)  # the new one answers
    rig.driver.perform()
    assert rig.copy_to_answers() == [CopyToResponse(CT, CopyToRowCount(1))]
