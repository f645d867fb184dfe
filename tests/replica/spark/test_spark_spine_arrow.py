"""The spine's write buffer and long-only columns, and the accumulating Reduce's two paths
(grouped in Arrow, or in Python for float keys and values beyond int64): each agrees with the
PythonExecutor, and Spark's modular fold agrees with the driver's."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from tidegate.replica.spark import SparkExecutor
from tidegate.replica.spark._fingerprint import PRIME
from tidegate.replica.spark.arrangement import Acc, SparkAccumulators, fold_mod_prime
from tidegate.replica.spark.operators import AccumulatingReduceNode
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import AggFunc, Aggregate, Get, Reduce, Schema
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport

pytestmark = pytest.mark.spark

A, OBJ, IDX = GlobalId.user(1), GlobalId.user(10), GlobalId.user(20)
AGGS = (
    Aggregate(AggFunc.COUNT),
    Aggregate(AggFunc.SUM, 1),
    Aggregate(AggFunc.AVG, 1),
    Aggregate(AggFunc.COUNT, 1),
    Aggregate(AggFunc.SUM, 2),
)


@given(st.integers(0, 2**62 - 1), st.integers(0, 2**62 - 1))
def test_fold_mod_prime_is_the_exact_residue(high: int, low: int) -> None:
    got = fold_mod_prime(pa.array([high], pa.int64()), pa.array([low], pa.int64()))
    assert got.to_pylist() == [(high * 2**30 + low) % PRIME]


def _install(ex: Any, schema: Schema) -> int:
    plan = Reduce(Get(A, schema), (0,), AGGS)
    handle: int = ex.install(
        DataflowDescription(
            "acc",
            source_imports=(SourceImport(A),),
            objects_to_build=(BuildDesc(OBJ, plan),),
            index_exports=(IndexExport(IDX, OBJ, (0,)),),
            as_of=Antichain([0]),
        )
    )
    return handle


def _steps(key: Any) -> list[list[tuple[Any, int, int]]]:
    """Many times per step, retractions, a group whose count cancels (key 3), NULLs."""
    k = [key(i) for i in range(4)]
    return [
        [((k[0], 10, 1), 0, 1), ((k[0], None, 2), 0, 2), ((k[1], 5, 0), 1, 1)],
        [((k[0], 10, 1), 2, -1), ((k[3], 7, 7), 2, 1), ((k[3], 8, 8), 3, -1), ((k[2], 1, 1), 3, 1)],
        [((k[1], 5, 0), 4, -1), ((k[3], 8, 8), 4, 1), ((None, 4, 4), 5, 3)],
    ]


@pytest.mark.parametrize(
    ("key_type", "key", "arrow"),
    [
        ("int64", lambda i: i, True),
        ("string", lambda i: f"k{i}", True),
        ("float64", lambda i: float(i), False),  # Arrow tells -0.0 from 0.0: Python groups
        # numerics as their text: equal numbers are equal bytes, so Arrow groups them
        (
            "numeric",
            lambda i: [Decimal("1.5"), Decimal("-1E-30"), Decimal(10**40), Decimal(0)][i],
            True,
        ),
    ],
)
def test_both_paths_of_the_accumulating_reduce_agree_with_the_reference(
    spark: SparkSession, key_type: str, key: Any, arrow: bool
) -> None:
    schema = Schema.of(("k", key_type), ("v", "int64"), ("w", "int64", False))
    for force_python in (False, True):
        sx, px = SparkExecutor(spark), PythonExecutor()
        hs, hp = _install(sx, schema), _install(px, schema)
        node = next(n for n in sx._dataflows[hs].nodes if isinstance(n, AccumulatingReduceNode))
        assert node._arrow_keys is arrow
        if force_python:
            node._arrow_keys = False
        for i, batch in enumerate(_steps(key)):
            upper = Antichain([2 * i + 2])
            sx.feed(hs, A, batch, upper)
            px.feed(hp, A, batch, upper)
            got = sorted(map(repr, (u for b in sx.step() for u in b.updates)))
            assert got == sorted(map(repr, (u for b in px.step() for u in b.updates)))
        for t in range(6):
            assert sx.peek(IDX, t) == px.peek(IDX, t)


def test_the_write_buffer_stays_in_the_driver_until_fanout_changes(spark: SparkSession) -> None:
    acc = SparkAccumulators(spark, Schema.of(("k", "int64")), [Acc.COUNT, Acc.SUM])
    for i in range(3):
        acc.append({(i,): [1, 5], (9,): [1, -(2**40)]})
    assert acc.levels == [0, 0, 0] and acc.jobs == 0
    assert all(r.sources() == ([], [r.local]) for r in acc.runs)
    assert acc.lookup([(9,), (1,)]) == {(9,): [3, -3 * 2**40], (1,): [1, 5]}
    assert acc.jobs == 0  # nothing is in Spark yet: no job
    acc.append({(9,): [1, -(2**40)]})
    (run,) = acc.runs
    assert run.level == 1 and run.size == 4  # consolidated in Arrow before it was shipped
    assert run.pending is not None
    run.pending.result()
    assert acc.lookup([(9,)]) == {(9,): [4, -4 * 2**40]} and acc.jobs == 1


@pytest.mark.parametrize("key_type", ["string", "float64"])
def test_spark_merges_fold_sums_and_fingerprints_exactly(
    spark: SparkSession, key_type: str
) -> None:
    """17 appends: level-1 runs (consolidated in Arrow, or by Spark for float keys) and one
    level-2 merge by Spark, whose long-only arithmetic must match Python's integers."""
    schema = Schema.of(("k", key_type))
    a, b = ("a", None) if key_type == "string" else (1.5, None)
    acc = SparkAccumulators(spark, schema, [Acc.COUNT, Acc.SUM, Acc.FINGERPRINT])
    for _ in range(17):
        acc.append({(a,): [1, 2**70 + 3, PRIME - 2], (b,): [1, -(2**33) - 1, 1]})
    assert acc.levels == [2, 0]
    merged = acc.runs[0]
    assert merged.pending is not None
    merged.pending.result()
    want = {
        (a,): [17, 17 * (2**70 + 3), (17 * (PRIME - 2)) % PRIME],
        (b,): [17, 17 * (-(2**33) - 1), 17],
    }
    assert acc.lookup([(a,), (b,), ("zz",) if key_type == "string" else (0.5,)]) == want


def test_a_failed_background_job_is_raised_at_the_next_read(spark: SparkSession) -> None:
    acc = SparkAccumulators(spark, Schema.of(("k", "int64")), [Acc.COUNT])

    def fail(*_: Any) -> Any:
        raise RuntimeError("shipping failed")

    acc._ship = fail  # type: ignore[method-assign]
    for i in range(4):
        acc.append({(i,): [1]})
    (run,) = acc.runs
    assert run.pending is not None
    with pytest.raises(RuntimeError, match="shipping failed"):
        run.pending.result()
    with pytest.raises(RuntimeError, match="shipping failed"):
        acc.lookup([(1,)])
