"""A storage collection the driver cannot read fails the index peeks that wait on it.

``ComputeReplica.source_failed`` marks a followed collection unreadable: index peeks that
are not ready and whose dataflow reads it (directly or through an imported index) answer a
``PeekError`` naming the error instead of waiting; peeks that are ready are answered as
before; new data for the collection (a repair) clears the mark.
"""

from __future__ import annotations

import uuid

import pytest

from tidegate.spec.compute_replica import ComputeReplica
from tidegate.spec.errors import DeposedController
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.relation import Get
from tidegate.spec.plan.schema import Schema
from tidegate.spec.protocol import (
    BuildDesc,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Hello,
    IndexExport,
    IndexImport,
    InitializationComplete,
    InstanceConfig,
    LoggingConfig,
    Peek,
    PeekDescription,
    PeekError,
    PeekResponse,
    PeekRows,
    Schedule,
    SourceImport,
)
from tidegate.spec.testing.compute_replica import ReplicaDriver, ReplicaStorageModel

T1 = GlobalId.user(1)
OBJ, IDX = GlobalId.user(10), GlobalId.user(11)
OBJ2, IDX2 = GlobalId.user(20), GlobalId.user(21)
SCHEMA = Schema.of(("k", "int64", False), ("v", "string", True))


def _peek(n: int, ts: int, gid: GlobalId = IDX) -> Peek:
    return Peek(PeekDescription(uuid.UUID(int=n), gid, ts))


def _answers(responses: list[object]) -> dict[int, object]:
    return {r.uuid.int: r.result for r in responses if isinstance(r, PeekResponse)}


def _rig() -> tuple[ComputeReplica, ReplicaDriver, ReplicaStorageModel]:
    storage = ReplicaStorageModel()
    storage.create(T1)
    replica = ComputeReplica(PythonExecutor())
    driver = ReplicaDriver(replica, storage)
    on_table = DataflowDescription(
        "on-table",
        source_imports=(SourceImport(T1),),
        objects_to_build=(BuildDesc(OBJ, Get(T1, SCHEMA)),),
        index_exports=(IndexExport(IDX, OBJ, (0,)),),
        as_of=Antichain([0]),
    )
    on_index = DataflowDescription(
        "on-index",
        index_imports=(IndexImport(IDX, SCHEMA, (0,)),),
        objects_to_build=(BuildDesc(OBJ2, Get(IDX, SCHEMA)),),
        index_exports=(IndexExport(IDX2, OBJ2, (0,)),),
        as_of=Antichain([0]),
    )
    driver.command(Hello(uuid.UUID(int=1)))
    driver.command(CreateInstance(InstanceConfig(LoggingConfig())))
    for c in (CreateDataflow(on_table), CreateDataflow(on_index), Schedule(IDX), Schedule(IDX2)):
        driver.command(c)  # type: ignore[arg-type]
    driver.command(InitializationComplete())
    return replica, driver, storage


def test_peeks_waiting_on_an_unreadable_collection_answer_an_error_until_it_is_repaired() -> None:
    replica, driver, storage = _rig()
    storage.append(T1, [((1, "a"), 0, 1)], 2)  # type: ignore[arg-type]
    driver.step()
    replica.source_failed(T1, "BlobCorrupt: blob 'u1/x.parquet' is corrupt")
    assert replica.source_errors() == {T1: "BlobCorrupt: blob 'u1/x.parquet' is corrupt"}
    # Ready: answered from what was read. Waiting on the broken input: an error, not a hang,
    # for the index on the table and for the index built on that index.
    assert _answers(driver.command(_peek(1, 1))) == {1: PeekRows((((1, "a"), 1),))}
    out = driver.command(_peek(2, 2)) + driver.command(_peek(3, 5, IDX2)) + driver.step()
    answers = _answers(out)
    for n in (2, 3):
        assert isinstance(answers[n], PeekError)
        assert f"storage collection {T1} is unreadable: BlobCorrupt" in answers[n].message
    # Repaired: the next delivery clears the mark and peeks wait (then answer) as before.
    storage.append(T1, [((2, "b"), 2, 1)], 3)  # type: ignore[arg-type]
    driver.step()
    assert replica.source_errors() == {}
    out = driver.command(_peek(4, 2)) + driver.command(_peek(5, 3)) + driver.step()
    assert _answers(out) == {4: PeekRows((((1, "a"), 1), ((2, "b"), 1)))}


def test_an_unread_collection_is_ignored() -> None:
    replica, _driver, _storage = _rig()
    replica.source_failed(GlobalId.user(99), "BlobMissing")
    assert replica.source_errors() == {}


def test_a_deposed_controllers_hello_is_refused_and_the_dataflows_stay() -> None:
    """A replica that served a controller of epoch 2 refuses a protocol iteration of epoch 1 (a
    controller stopped, taken for dead, resumed) before it changes anything, and serves the
    newer controller on (found by the simulator's zombie controller: the deposed controller's
    dataflows read below the since the newer one had moved)."""
    replica = ComputeReplica(PythonExecutor())
    driver = ReplicaDriver(replica, ReplicaStorageModel())
    driver.command(Hello(uuid.UUID(int=1), 2))
    driver.command(CreateInstance(InstanceConfig(LoggingConfig())))
    driver.command(InitializationComplete())
    before = (replica.installed_dataflows(), replica.stage, replica.epoch)
    with pytest.raises(DeposedController) as refused:
        replica.handle_command(Hello(uuid.UUID(int=2), 1))
    assert (refused.value.epoch, refused.value.served) == (1, 2)
    assert (replica.installed_dataflows(), replica.stage, replica.epoch) == before
    driver.command(Hello(uuid.UUID(int=3), 2))  # the same controller reconnecting
    assert replica.epoch == 2
