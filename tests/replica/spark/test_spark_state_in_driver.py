"""Operator state kept in the driver while small (no Spark job per step), moved into Spark after.

Issue 21 §2: the ``SparkExecutor`` keeps each stateful operator's arrangement
as Arrow tables in the driver up to ``state_memory_rows`` entries; a step over
such state runs no Spark job (counted by ``spark_jobs()``). Past the threshold
the state moves into Spark in the background, and lookups become Spark jobs.
Results are the ``PythonExecutor``'s throughout.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tidegate.replica.spark import SparkExecutor
from tidegate.replica.spark.arrangement import SparkArrangement
from tidegate.spec.errors import ExecutorError
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import AggFunc, Aggregate, Distinct, Get, Join, Reduce, Schema, TopK
from tidegate.spec.protocol.responses import PeekRows
from tidegate.spec.protocol.types import (
    BuildDesc,
    ColumnOrder,
    DataflowDescription,
    IndexExport,
    SourceImport,
)

pytestmark = pytest.mark.spark

FACTS, DIM, OBJ, IDX = GlobalId.user(1), GlobalId.user(2), GlobalId.user(3), GlobalId.user(4)
FS = Schema.of(("k", "int64", False), ("v", "int64", False))
DS = Schema.of(("k", "int64", False), ("label", "string", False))


def _plans() -> dict[str, Any]:
    return {
        "aggregate": Reduce(
            Get(FACTS, FS), (0,), (Aggregate(AggFunc.COUNT), Aggregate(AggFunc.SUM, 1))
        ),
        "max": Reduce(Get(FACTS, FS), (0,), (Aggregate(AggFunc.MAX, 1),)),
        "distinct": Distinct(Get(FACTS, FS)),
        "topk": TopK(Get(FACTS, FS), (0,), (ColumnOrder(1, True),), 2),
        "join": Join((Get(FACTS, FS), Get(DIM, DS)), ((0, 2),)),
    }


def _install(ex: Any, plan: Any) -> int:
    imports = (SourceImport(FACTS), SourceImport(DIM)) if isinstance(plan, Join) else None
    return int(
        ex.install(
            DataflowDescription(
                "t",
                source_imports=imports or (SourceImport(FACTS),),
                objects_to_build=(BuildDesc(OBJ, plan),),
                index_exports=(IndexExport(IDX, OBJ, (0,)),),
                as_of=Antichain([0]),
            )
        )
    )


def _batches(steps: int, keys: int, size: int) -> list[dict[GlobalId, list[Update]]]:
    rng = random.Random(5)
    live: list[tuple[int, int]] = []
    out: list[dict[GlobalId, list[Update]]] = []
    for t in range(steps):
        facts: list[Update] = []
        for _ in range(size):
            if live and rng.random() < 0.25:
                facts.append((live.pop(rng.randrange(len(live))), t, -1))
            else:
                row = (rng.randrange(keys), rng.randrange(100))
                live.append(row)
                facts.append((row, t, 1))
        if t == 0:
            dims: list[Update] = [((k, "L0"), t, 1) for k in range(keys)]
        else:  # one key's label changes per step
            k = t % keys
            dims = [((k, f"L{t - keys if t >= keys else 0}"), t, -1), ((k, f"L{t}"), t, 1)]
        out.append({FACTS: facts, DIM: dims})
    return out


def _run(ex: Any, plan: Any, batches: list[dict[GlobalId, list[Update]]]) -> list[Any]:
    """Feed every step; the index's rows after each (peeked at that step's time)."""
    h = _install(ex, plan)
    seen = []
    for t, batch in enumerate(batches):
        for src in ex.source_inputs(h):
            ex.feed(h, src, batch.get(src, []), Antichain([t + 1]))
        ex.step()
        result = ex.peek(IDX, t)
        assert isinstance(result, PeekRows)
        seen.append(sorted(result.rows, key=repr))
    return seen


@pytest.mark.parametrize("name", sorted(_plans()))
def test_small_state_steps_run_no_spark_job(spark: SparkSession, name: str) -> None:
    plan = _plans()[name]
    batches = _batches(12, 20, 15)
    ex = SparkExecutor(spark)
    got = _run(ex, plan, batches)
    assert got == _run(PythonExecutor(), plan, batches)
    assert ex.spark_jobs() == 0
    assert not any(ex.state_in_spark().values())
    (records,) = ex.state_records().values()
    assert records > 0  # driver-resident state counts towards the memory limit's estimate


@pytest.mark.parametrize("name", sorted(_plans()))
def test_state_moves_into_spark_past_the_threshold(spark: SparkSession, name: str) -> None:
    plan = _plans()[name]
    batches = _batches(14, 20, 15)
    ex = SparkExecutor(spark, state_memory_rows=40)
    h = _install(ex, plan)
    want = _run(PythonExecutor(), plan, batches)
    jobs_before_move = None
    for t, batch in enumerate(batches):
        for src in ex.source_inputs(h):
            ex.feed(h, src, batch.get(src, []), Antichain([t + 1]))
        if not ex.state_in_spark()[h]:
            jobs_before_move = ex.spark_jobs()
        ex.step()
        if t == 4:
            ex.wait_for_state_moves()
        result = ex.peek(IDX, t)
        assert isinstance(result, PeekRows)
        assert sorted(result.rows, key=repr) == want[t], f"step {t}"
    assert jobs_before_move == 0  # no state lookup ran a Spark job while the state was small
    assert ex.state_in_spark()[h]
    assert ex.spark_jobs() > 0  # after the move, lookups are Spark jobs


def test_threshold_zero_keeps_state_in_spark_from_the_start(spark: SparkSession) -> None:
    plan = _plans()["aggregate"]
    batches = _batches(6, 20, 15)
    ex = SparkExecutor(spark, state_memory_rows=0)
    assert _run(ex, plan, batches) == _run(PythonExecutor(), plan, batches)
    assert all(ex.state_in_spark().values())


def test_state_memory_rows_is_validated(spark: SparkSession) -> None:
    with pytest.raises(ExecutorError):
        SparkExecutor(spark, state_memory_rows=-1)


def test_a_driver_arrangement_filters_composite_keys_in_arrow(spark: SparkSession) -> None:
    schema = Schema.of(("a", "int64"), ("b", "string"), ("v", "int64"))
    arr = SparkArrangement(spark, schema, (0, 1))
    arr.keep_in_driver(None)
    want: dict[tuple[Any, ...], int] = {}
    for i in range(30):
        change = {(i % 5, f"s{i % 3}", i): 1, (None, "x", i % 2): 1}
        arr.append(change)
        for r, d in change.items():
            want[r] = want.get(r, 0) + d
    arr.settle()
    assert not arr.in_spark and arr.jobs == 0
    got = arr.lookup([(1, "s1"), (None, "x"), (9, "s0")])
    assert got == {
        (1, "s1"): {r: c for r, c in want.items() if r[:2] == (1, "s1")},
        (None, "x"): {r: c for r, c in want.items() if r[:2] == (None, "x")},
    }
    assert arr.jobs == 0
