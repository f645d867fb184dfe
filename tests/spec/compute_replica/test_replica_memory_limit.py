"""Over its memory limit, the replica fails the dataflow holding the most state.

``ComputeReplica.fail_largest_dataflow`` asks the executor for each dataflow's state (in
records), fails the largest (ties: the newest) and returns its exports; the peeks there
answer the error from the next time on, the other dataflows carry on.
"""

from __future__ import annotations

import uuid

from tidegate.spec.compute_replica import MEMORY_LIMIT_EXCEEDED, ComputeReplica
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.relation import AggFunc, Aggregate, Get, Reduce
from tidegate.spec.plan.schema import Schema
from tidegate.spec.protocol import (
    BuildDesc,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Hello,
    IndexExport,
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
SCHEMA = Schema.of(("k", "int64", False), ("v", "string", True))
ROWS, ROWS_IDX = GlobalId.user(10), GlobalId.user(11)  # an index of every row: 50 records
COUNT, COUNT_IDX = GlobalId.user(20), GlobalId.user(21)  # a count: its group keeps 50 rows, +1


def _dataflow(name: str, obj: GlobalId, idx: GlobalId, plan: object) -> DataflowDescription:
    return DataflowDescription(
        name,
        source_imports=(SourceImport(T1),),
        objects_to_build=(BuildDesc(obj, plan),),  # type: ignore[arg-type]
        index_exports=(IndexExport(idx, obj, (0,)),),
        as_of=Antichain([0]),
    )


def _rig() -> tuple[ComputeReplica, ReplicaDriver, ReplicaStorageModel]:
    storage = ReplicaStorageModel()
    storage.create(T1)
    replica = ComputeReplica(PythonExecutor())
    driver = ReplicaDriver(replica, storage)
    rows = _dataflow("rows", ROWS, ROWS_IDX, Get(T1, SCHEMA))
    count = _dataflow(
        "count", COUNT, COUNT_IDX, Reduce(Get(T1, SCHEMA), (), (Aggregate(AggFunc.COUNT),))
    )
    driver.command(Hello(uuid.UUID(int=1)))
    driver.command(CreateInstance(InstanceConfig(LoggingConfig())))
    for c in (CreateDataflow(rows), CreateDataflow(count), Schedule(ROWS_IDX), Schedule(COUNT_IDX)):
        driver.command(c)  # type: ignore[arg-type]
    driver.command(InitializationComplete())
    return replica, driver, storage


def _answer(driver: ReplicaDriver, n: int, gid: GlobalId, ts: int) -> object:
    out = driver.command(Peek(PeekDescription(uuid.UUID(int=n), gid, ts))) + driver.step()
    (result,) = [r.result for r in out if isinstance(r, PeekResponse)]
    return result


def test_nothing_holding_state_fails_nothing() -> None:
    replica, _driver, _storage = _rig()
    assert replica.fail_largest_dataflow("used 2 of 1 bytes") == ()


def test_the_largest_dataflow_fails_and_the_others_serve_on() -> None:
    replica, driver, storage = _rig()
    storage.append(T1, [((k, "x"), 0, 1) for k in range(50)], 2)  # type: ignore[arg-type]
    driver.step()
    assert replica.fail_largest_dataflow("used 2 of 1 bytes") == (COUNT_IDX,)
    storage.append(T1, [((99, "y"), 2, 1)], 4)  # type: ignore[arg-type]
    driver.step()
    assert _answer(driver, 1, COUNT_IDX, 1) == PeekRows((((50,), 1),))  # before: kept
    failed = _answer(driver, 2, COUNT_IDX, 3)
    assert isinstance(failed, PeekError)
    assert f"dataflow {COUNT_IDX} {MEMORY_LIMIT_EXCEEDED}: used 2 of 1 bytes" in failed.message
    rows = _answer(driver, 3, ROWS_IDX, 3)
    assert isinstance(rows, PeekRows) and len(rows.rows) == 51  # the other serves on
    # The failed dataflow counts no more state: the next call fails the other one.
    assert replica.fail_largest_dataflow("still over") == (ROWS_IDX,)
    assert replica.fail_largest_dataflow("still over") == ()
