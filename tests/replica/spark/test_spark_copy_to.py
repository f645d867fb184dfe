"""Copy-to on the SparkExecutor: the replica core hands out the same rows as on the PythonExecutor,
and the replica's writer puts them in Parquet files that read back as the collection at the as_of."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tidegate.replica._copy_to import copy_to_file_names, write_copy_to
from tidegate.replica.spark import SparkExecutor
from tidegate.spec.compute_replica import ComputeReplica, WriteCopyTo
from tidegate.spec.executor import Executor, PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan.relation import AggFunc, Aggregate, Get, Reduce
from tidegate.spec.plan.schema import Schema
from tidegate.spec.protocol import (
    BuildDesc,
    CopyToConnection,
    CreateDataflow,
    CreateInstance,
    DataflowDescription,
    Hello,
    InitializationComplete,
    InstanceConfig,
    Schedule,
    SinkExport,
    SourceImport,
)
from tidegate.spec.testing.compute_replica import ReplicaDriver, ReplicaStorageModel

pytestmark = pytest.mark.spark

T1 = GlobalId.user(1)
OBJ = GlobalId.user(10)
CT = GlobalId.transient(12)
SCHEMA = Schema.of(("k", "int64", False), ("v", "int64", False))


def copy_to_write(executor: Executor) -> WriteCopyTo:
    storage = ReplicaStorageModel()
    storage.create(T1)
    driver = ReplicaDriver(ComputeReplica(executor), storage)
    plan = Reduce(Get(T1, SCHEMA), (0,), (Aggregate(AggFunc.SUM, 1), Aggregate(AggFunc.COUNT)))
    df = DataflowDescription(
        "copy-to",
        source_imports=(SourceImport(T1),),
        objects_to_build=(BuildDesc(OBJ, plan),),
        sink_exports=(SinkExport(CT, OBJ, CopyToConnection("mem://x"), up_to=Antichain([4])),),
        as_of=Antichain([3]),
    )
    for cmd in (
        Hello(uuid.UUID(int=1)),
        CreateInstance(InstanceConfig()),
        CreateDataflow(df),
        Schedule(CT),
        InitializationComplete(),
    ):
        driver.command(cmd)
    storage.append(T1, [((1, 10), 0, 1), ((1, 5), 1, 1), ((2, 7), 1, 1), ((2, 7), 2, -1)], 3)
    storage.append(T1, [((3, 1), 3, 2), ((1, 1), 4, 1)], 6)
    for _ in range(3):
        driver.step()
    return driver.copy_tos[CT]


def test_spark_hands_out_what_python_does_and_it_reads_back(
    spark: SparkSession, tmp_path: Path
) -> None:
    spark_write = copy_to_write(SparkExecutor(spark))
    python_write = copy_to_write(PythonExecutor())
    assert spark_write == python_write
    assert python_write.rows == (((1, 15, 2), 1), ((3, 2, 2), 1))
    out = tmp_path / "out"
    w = spark_write
    n = write_copy_to(f"file://{out}", w.sink_id, int(w.as_of), w.schema, w.rows)
    assert n == 2
    [name] = copy_to_file_names(CT, 3, 1)
    table = pq.read_table(out / name)
    got = Counter(tuple(r.values()) for r in table.to_pylist())
    assert got == Counter({(1, 15, 2): 1, (3, 2, 2): 1})
