"""Numerics through Spark: values of any digits and scale cross into Spark and back exactly
(as their text in a binary column, ``arrow_values.NUMERIC_ARROW``), and the SparkExecutor's
operators over them (grouping and joining on numeric keys, sums, averages, ordering) agree
with the PythonExecutor and with PostgreSQL's answers worked out by hand."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tidegate.replica.spark import SparkExecutor
from tidegate.replica.spark._arrow import rows_from_table, table_from_counts
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    AggFunc,
    Aggregate,
    BinaryFunc,
    CallBinary,
    CallVariadic,
    ColumnRef,
    Distinct,
    Filter,
    Get,
    Join,
    Literal,
    Map,
    Plan,
    Reduce,
    ScalarType,
    Schema,
    TopK,
    VariadicFunc,
)
from tidegate.spec.protocol.responses import PeekRows
from tidegate.spec.protocol.types import (
    BuildDesc,
    ColumnOrder,
    DataflowDescription,
    IndexExport,
    SourceImport,
)

pytestmark = pytest.mark.spark

A, B = GlobalId.user(1), GlobalId.user(2)
OBJ, IDX = GlobalId.user(10), GlobalId.user(20)
Feeds = list[dict[GlobalId, list[Update]]]


def dataflow(plan: Plan, sources: tuple[GlobalId, ...] = (A,)) -> DataflowDescription:
    return DataflowDescription(
        "numeric",
        source_imports=tuple(SourceImport(g) for g in sources),
        objects_to_build=(BuildDesc(OBJ, plan),),
        index_exports=(IndexExport(IDX, OBJ, (0,)),),
        as_of=Antichain([0]),
    )


def ups(t: int, *rows: tuple[tuple[Any, ...], int]) -> list[Update]:
    return [(r, t, d) for r, d in rows]


def _run(ex: Any, desc: DataflowDescription, feeds: Feeds) -> list[list[Any]]:
    h = ex.install(desc)
    out = []
    for t, feed in enumerate(feeds):
        for src in ex.source_inputs(h):
            ex.feed(h, src, feed.get(src, []), Antichain([t + 1]))
        out.append(
            sorted(
                (b.id, b.lower, b.upper, sorted(map(repr, b.updates)), sorted(b.errors))
                for b in ex.step()
            )
        )
    return out


def assert_agrees(spark: SparkSession, desc: DataflowDescription, feeds: Feeds) -> None:
    sx, px = SparkExecutor(spark), PythonExecutor()
    assert _run(sx, desc, feeds) == _run(px, desc, feeds)
    for t in range(len(feeds)):
        assert sx.peek(IDX, t) == px.peek(IDX, t)


S = Schema.of(("k", "numeric"), ("v", "numeric"), ("i", "int64"))
BIG = Decimal("-123456789012345678901234567890123456789012.000000000000000000000000001")
TINY = Decimal("1E-30")


def test_numerics_cross_into_spark_and_back_exactly(spark: SparkSession) -> None:
    pairs = [((BIG, TINY, 1), 2), ((Decimal("1.5"), None, None), -1), ((Decimal(0), BIG, 0), 1)]
    table = table_from_counts(S, pairs)
    back = spark.createDataFrame(table).toArrow()
    got = rows_from_table(back, S.arity)
    assert got == pairs
    assert all(type(v) is Decimal for (row, _n) in got for v in row[:2] if v is not None)


FEEDS: Feeds = [
    {
        A: ups(
            0,
            ((Decimal("1.5"), Decimal("0.1"), 1), 1),
            ((Decimal("1.5"), Decimal("0.2"), 2), 1),
            ((BIG, TINY, 3), 2),
            ((None, Decimal(7), 4), 1),
        )
    },
    {A: ups(1, ((Decimal("1.5"), Decimal("0.1"), 1), -1), ((Decimal(2), Decimal("1.25"), 5), 1))},
    {A: ups(2, ((BIG, TINY, 3), -1), ((Decimal(2), Decimal("-1.25"), 6), 1))},
]
GA = Get(A, S)
K, V, N = ColumnRef(0), ColumnRef(1), ColumnRef(2)

PLANS: list[Plan] = [
    Reduce(
        GA,
        (0,),
        (
            Aggregate(AggFunc.SUM, 1),
            Aggregate(AggFunc.AVG, 1),
            Aggregate(AggFunc.MIN, 1),
            Aggregate(AggFunc.MAX, 1),
            Aggregate(AggFunc.COUNT, 1, distinct=True),
        ),
    ),
    Map(
        GA,
        (
            CallBinary(BinaryFunc.DIV, V, N),
            CallBinary(BinaryFunc.MUL, K, V),
            CallVariadic(
                VariadicFunc.NUMERIC_TYPMOD,
                (V, Literal(4, ScalarType.INT64), Literal(2, ScalarType.INT64)),
            ),
        ),
        ("q", "p", "r"),
    ),
    Filter(GA, (CallBinary(BinaryFunc.GT, V, Literal(Decimal("0.15"), ScalarType.NUMERIC)),)),
    Distinct(Map(GA, (CallBinary(BinaryFunc.ADD, K, Literal(1, ScalarType.INT64)),), ("k1",))),
    TopK(GA, (), (ColumnOrder(1, desc=True),), 2),
    Join((GA, Get(B, S)), ((0, 3),)),
]


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: type(p).__name__)
def test_operators_over_numerics_agree_with_the_python_executor(
    spark: SparkSession, plan: Plan
) -> None:
    feeds = [{**f, B: list(f[A])} for f in FEEDS]
    assert_agrees(spark, dataflow(plan, (A, B)), feeds)


def test_a_numeric_reduce_answers_what_postgresql_answers(spark: SparkSession) -> None:
    """``SELECT k, sum(v), avg(v) ... GROUP BY k`` after step 1, as PostgreSQL computes it:
    the sum exact, the average at ``numeric``'s division scale (20 digits for 0.2 + 1.25
    over 2 is 0.725, exact; one value over one row is itself)."""
    sx = SparkExecutor(spark)
    plan = Reduce(GA, (0,), (Aggregate(AggFunc.SUM, 1), Aggregate(AggFunc.AVG, 1)))
    h = sx.install(dataflow(plan))
    for t, feed in enumerate(FEEDS[:2]):
        sx.feed(h, A, feed[A], Antichain([t + 1]))
        sx.step()
    rows = sx.peek(IDX, 1)
    want: Any = PeekRows(
        (
            ((None, Decimal(7), Decimal(7)), 1),
            ((Decimal("1.5"), Decimal("0.2"), Decimal("0.2")), 1),
            ((Decimal(2), Decimal("1.25"), Decimal("1.25")), 1),
            ((BIG, 2 * TINY, TINY), 1),
        )
    )
    assert isinstance(rows, PeekRows)
    assert sorted(rows.rows, key=repr) == sorted(want.rows, key=repr)
    px = PythonExecutor()
    hp = px.install(dataflow(plan))
    for t, feed in enumerate(FEEDS[:2]):
        px.feed(hp, A, feed[A], Antichain([t + 1]))
        px.step()
    assert px.peek(IDX, 1) == rows
