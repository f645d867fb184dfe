"""Example tests of the SparkExecutor: every operator against the PythonExecutor, retractions and
negative multiplicities, the accumulating Reduce, the spine's merges, compaction, and typed
errors that leave the state unchanged."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tidegate.replica.spark import SparkExecutor
from tidegate.replica.spark.arrangement import Acc, SparkAccumulators, SparkArrangement
from tidegate.replica.spark.operators import AccumulatingReduceNode, ReduceNode
from tidegate.spec.errors import (
    ArityMismatch,
    CompactionRegression,
    DuplicateExport,
    ExecutorError,
    InputFrontierRegression,
    InvalidImport,
    InvalidInputRow,
    PeekNotReady,
    PeekOutOfRange,
    UnknownExport,
    UnknownInput,
    UpdateBeforeFrontier,
)
from tidegate.spec.executor import Executor, ExportBatch, PythonExecutor
from tidegate.spec.frontier import Antichain, Update
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    AggFunc,
    Aggregate,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    ColumnRef,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    JoinKind,
    Literal,
    Map,
    Negate,
    Plan,
    Project,
    Reduce,
    ScalarType,
    Schema,
    Threshold,
    TopK,
    UnaryFunc,
    Union,
    VariadicFunc,
)
from tidegate.spec.protocol.responses import PeekError, PeekRows
from tidegate.spec.protocol.types import (
    BuildDesc,
    ColumnOrder,
    DataflowDescription,
    IndexExport,
    IndexImport,
    RowSetFinishing,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)

pytestmark = pytest.mark.spark

A, B = GlobalId.user(1), GlobalId.user(2)
OBJ, IDX, SUB = GlobalId.user(10), GlobalId.user(20), GlobalId.transient(1)
SA = Schema.of(("k", "int64"), ("v", "int64"))
SB = Schema.of(("k", "int64"), ("s", "string"))


def dataflow(plan: Plan, sources: tuple[GlobalId, ...] = (A,)) -> DataflowDescription:
    return DataflowDescription(
        "example",
        source_imports=tuple(SourceImport(g) for g in sources),
        objects_to_build=(BuildDesc(OBJ, plan),),
        index_exports=(IndexExport(IDX, OBJ, (0,)),),
        sink_exports=(SinkExport(SUB, OBJ, SubscribeConnection()),),
        as_of=Antichain([0]),
    )


Feeds = Sequence[dict[GlobalId, list[Update]]]


def run(ex: Executor, desc: DataflowDescription, feeds: Feeds) -> list[list[ExportBatch]]:
    """Feed step ``t`` (times ``t``) with upper ``t + 1``, then step; the batches of each step."""
    h = ex.install(desc)
    out = []
    for t, feed in enumerate(feeds):
        for src in ex.source_inputs(h):
            ex.feed(h, src, feed.get(src, []), Antichain([t + 1]))
        out.append(sorted(ex.step(), key=lambda b: b.id))
    return out


def _canon(steps: list[list[ExportBatch]]) -> list[list[tuple[Any, ...]]]:
    return [
        [(b.id, b.lower, b.upper, sorted(map(repr, b.updates)), sorted(b.errors)) for b in s]
        for s in steps
    ]


def assert_agrees(spark: SparkSession, desc: DataflowDescription, feeds: Feeds) -> SparkExecutor:
    """The SparkExecutor's batches and peeks at every time equal the PythonExecutor's."""
    sx, px = SparkExecutor(spark), PythonExecutor()
    assert _canon(run(sx, desc, feeds)) == _canon(run(px, desc, feeds))
    for t in range(len(feeds)):
        assert sx.peek(IDX, t) == px.peek(IDX, t)
    return sx


def ups(t: int, *rows: tuple[tuple[Any, ...], int]) -> list[Update]:
    return [(r, t, d) for r, d in rows]


GA, GB = Get(A, SA), Get(B, SB)
FEEDS_A: Feeds = [
    {A: ups(0, ((1, 10), 1), ((1, 20), 2), ((2, 5), 1), ((None, 7), 1))},
    {A: ups(1, ((1, 10), -1), ((3, None), 1), ((2, 5), -1))},
    {A: ups(2, ((2, 6), 1), ((1, 20), -2), ((4, 1), -1))},  # (4, 1): a negative count
    {A: ups(3, ((4, 1), 1), ((1, 30), 1))},
]


@pytest.mark.parametrize(
    "plan",
    [
        pytest.param(
            Map(
                GA,
                (CallBinary(BinaryFunc.DIV, Literal(10, ScalarType.INT64), ColumnRef(1)),),
                ("q",),
            ),
            id="map-errors",
        ),
        pytest.param(
            Filter(GA, (CallBinary(BinaryFunc.GT, ColumnRef(1), Literal(5, ScalarType.INT64)),)),
            id="filter",
        ),
        pytest.param(Project(GA, (1, 0, 1)), id="project"),
        pytest.param(Union((GA, Negate(GA), GA)), id="union-negate"),
        pytest.param(Constant((((9, 9), 2),), SA), id="constant"),
        pytest.param(Distinct(Project(GA, (0,))), id="distinct"),
        pytest.param(Threshold(GA), id="threshold"),
        pytest.param(TopK(GA, (0,), (ColumnOrder(1, desc=True),), limit=1, offset=0), id="topk"),
        pytest.param(
            Reduce(
                GA,
                (0,),
                (
                    Aggregate(AggFunc.MIN, 1),
                    Aggregate(AggFunc.MAX, 1),
                    Aggregate(AggFunc.COUNT, 1, distinct=True),
                ),
            ),
            id="reduce-recomputed",
        ),
        pytest.param(
            Reduce(
                GA,
                (0,),
                (
                    Aggregate(AggFunc.COUNT),
                    Aggregate(AggFunc.SUM, 1),
                    Aggregate(AggFunc.AVG, 1),
                    Aggregate(AggFunc.COUNT, 1),
                ),
            ),
            id="reduce-accumulating",
        ),
        pytest.param(Reduce(GA, (), (Aggregate(AggFunc.COUNT),)), id="reduce-global"),
    ],
)
def test_operator_agrees_with_python_executor(spark: SparkSession, plan: Plan) -> None:
    assert_agrees(spark, dataflow(plan), FEEDS_A)


def test_joins_agree(spark: SparkSession) -> None:
    feeds: Feeds = [
        {
            A: ups(0, ((1, 10), 1), ((2, 5), 1), ((None, 1), 1)),
            B: ups(0, ((1, "x"), 1), ((None, "n"), 1)),
        },
        {A: ups(1, ((1, 11), 2)), B: ups(1, ((1, "y"), 1), ((2, "z"), -1))},
        {A: ups(2, ((1, 10), -1)), B: ups(2, ((1, "x"), -1), ((2, "z"), 1))},
    ]
    assert_agrees(spark, dataflow(Join((GA, GB), ((0, 2),)), (A, B)), feeds)
    assert_agrees(spark, dataflow(Join((GA, GB), ((0, 2),), JoinKind.LEFT), (A, B)), feeds)
    assert_agrees(spark, dataflow(Join((GA, GB)), (A, B)), feeds)  # cross product


@pytest.mark.parametrize("kind", [JoinKind.INNER, JoinKind.LEFT])
def test_a_join_keyed_twice_on_one_column_agrees(spark: SparkSession, kind: JoinKind) -> None:
    """``a.k = b.x AND a.k = b.y``: the left side is keyed on ``k`` twice. A lookup filtered
    its driver tables by a key table naming ``k`` twice, which Arrow refuses (found by the
    SQL oracle's nightly profile); now it filters by each column once, in the driver and,
    once filler has moved the state into materialised runs, in Spark."""
    sb = Schema.of(("x", "int64"), ("y", "int64"))
    plan = Join((Get(A, SA), Get(B, sb)), ((0, 2), (0, 3)), kind)
    filler = [((100 + t * 20 + j, t), 1) for t in range(6) for j in range(20)]
    feeds: Feeds = [
        {A: ups(0, ((1, 10), 1), ((2, 20), 1), *filler[:20]), B: ups(0, ((1, 1), 1), ((2, 3), 1))}
    ]
    feeds += [{A: ups(t, *filler[20 * t : 20 * t + 20])} for t in range(1, 6)]
    feeds += [{B: ups(6, ((2, 2), 1), ((1, 1), -1), ((105, 105), 2))}]
    feeds += [{A: ups(7, ((2, 21), 1), ((1, 10), -1)), B: ups(7, ((3, 3), 1))}]
    sx = assert_agrees(spark, dataflow(plan, (A, B)), feeds)
    rows = sx.peek(IDX, 7)
    assert isinstance(rows, PeekRows)
    matched = {r: n for r, n in rows.rows if r[2] is not None}
    assert matched == {(2, 20, 2, 2): 1, (2, 21, 2, 2): 1, (105, 0, 105, 105): 2}


@pytest.mark.parametrize("kind", [JoinKind.RIGHT, JoinKind.FULL])
def test_right_and_full_joins_agree_incrementally(spark: SparkSession, kind: JoinKind) -> None:
    # a key appears, is retracted below zero and comes back; each step's batch (the
    # padded rows retracted when a match arrives) equals the PythonExecutor's
    feeds: Feeds = [
        {A: ups(0, ((1, 10), 1), ((None, 1), 1)), B: ups(0, ((1, "x"), 1), ((3, "w"), 2))},
        {A: ups(1, ((3, 11), 1), ((1, 10), -1)), B: ups(1, ((None, "n"), 1))},
        {A: ups(2, ((1, 10), 1), ((3, 11), -1)), B: ups(2, ((1, "x"), -1), ((4, "v"), -1))},
        {A: ups(3, ((4, 2), 1)), B: ups(3, ((4, "v"), 2))},
    ]
    sx = assert_agrees(spark, dataflow(Join((GA, GB), ((0, 2),), kind), (A, B)), feeds)
    rows = sx.peek(IDX, 1)
    assert isinstance(rows, PeekRows)
    # at time 1: left (1, 10) is gone, (3, 11) matches (3, "w") twice; the right rows
    # (1, "x") and (None, "n") are padded on the left, FULL pads (None, 1) on the right
    assert dict(rows.rows) == {
        **({(None, 1, None, None): 1} if kind is JoinKind.FULL else {}),
        (3, 11, 3, "w"): 2,
        (None, None, 1, "x"): 1,
        (None, None, None, "n"): 1,
    }


def test_bool_and_string_aggregates_agree(spark: SparkSession) -> None:
    sb = Schema.of(("k", "int64"), ("s", "string"), ("b", "bool"))
    g = Get(A, sb)
    plan = Reduce(
        g,
        (0,),
        (
            Aggregate(AggFunc.BOOL_AND, 2),
            Aggregate(AggFunc.BOOL_OR, 2),
            Aggregate(AggFunc.STRING_AGG, 1, separator=","),
            Aggregate(AggFunc.STRING_AGG, 1, distinct=True, separator=""),
        ),
    )
    desc = DataflowDescription(
        "aggs",
        source_imports=(SourceImport(A),),
        objects_to_build=(BuildDesc(OBJ, plan),),
        index_exports=(IndexExport(IDX, OBJ, (0,)),),
        sink_exports=(SinkExport(SUB, OBJ, SubscribeConnection()),),
        as_of=Antichain([0]),
    )
    feeds: Feeds = [
        {A: ups(0, ((1, "b", True), 1), ((1, "a", False), 2), ((2, None, None), 1))},
        {A: ups(1, ((1, "a", False), -2), ((1, "c", True), 1), ((2, "z", True), -1))},
        {A: ups(2, ((2, "y", None), 2), ((1, "b", True), -1))},
    ]
    sx = assert_agrees(spark, desc, feeds)
    assert sx.peek(IDX, 0) == PeekRows(
        (((1, False, True, "a,a,b", "ab"), 1), ((2, None, None, None, None), 1))
    )
    assert sx.peek(IDX, 1) == PeekRows(
        (((1, True, True, "b,c", "bc"), 1), ((2, None, None, None, None), 1))
    )


def test_scalar_functions_agree(spark: SparkSession) -> None:
    # the Spark operators compile scalars with the spec's compile_scalar: one example each
    st = Schema.of(("k", "int64"), ("s", "string"), ("t", "timestamp"), ("f", "float64"))
    c = ColumnRef
    sl = Literal
    exprs = (
        CallUnary(UnaryFunc.ABS, c(0)),
        CallUnary(UnaryFunc.ROUND, c(3)),
        CallUnary(UnaryFunc.TRIM, c(1)),
        CallBinary(BinaryFunc.ILIKE, c(1), sl("%A%", ScalarType.STRING)),
        CallBinary(BinaryFunc.CONCAT, c(1), sl("!", ScalarType.STRING)),
        CallBinary(BinaryFunc.ADD_MS, c(2), c(0)),
        CallVariadic(VariadicFunc.GREATEST, (c(0), sl(0, ScalarType.INT64))),
        CallVariadic(VariadicFunc.NULLIF, (c(0), sl(2, ScalarType.INT64))),
        CallVariadic(
            VariadicFunc.REPLACE, (c(1), sl("a", ScalarType.STRING), sl("b", ScalarType.STRING))
        ),
        CallVariadic(
            VariadicFunc.LIKE_ESCAPE,
            (c(1), sl("a#%", ScalarType.STRING), sl("#", ScalarType.STRING)),
        ),
        CallVariadic(VariadicFunc.DATE_TRUNC, (sl("hour", ScalarType.STRING), c(2))),
        CallVariadic(VariadicFunc.EXTRACT, (sl("epoch", ScalarType.STRING), c(2))),
    )
    plan = Map(Get(A, st), exprs, tuple(f"e{k}" for k in range(len(exprs))))
    desc = DataflowDescription(
        "scalars",
        source_imports=(SourceImport(A),),
        objects_to_build=(BuildDesc(OBJ, plan),),
        index_exports=(IndexExport(IDX, OBJ, (0,)),),
        sink_exports=(SinkExport(SUB, OBJ, SubscribeConnection()),),
        as_of=Antichain([0]),
    )
    t0 = dt.datetime(2020, 1, 1, 10, 11, 12, 500000)
    feeds: Feeds = [
        {A: ups(0, ((-2, " a% ", t0, 2.5), 1), ((2, None, None, -0.5), 2))},
        # (INT64_MIN ms): abs overflows, the shift leaves the range: errors, retracted later
        {A: ups(1, ((-(2**63), "A", t0, 1.0), 1))},
        {A: ups(2, ((-(2**63), "A", t0, 1.0), -1), ((2, None, None, -0.5), -1))},
    ]
    sx = assert_agrees(spark, desc, feeds)
    assert sx.peek(IDX, 1) == PeekError("integer out of range")
    assert sx.peek(IDX, 2) == PeekRows(
        (
            (
                (
                    -2,
                    " a% ",
                    t0,
                    2.5,
                    2,
                    3.0,
                    "a%",
                    True,
                    " a% !",
                    dt.datetime(2020, 1, 1, 10, 11, 12, 498000),
                    0,
                    -2,
                    " b% ",
                    False,
                    dt.datetime(2020, 1, 1, 10),
                    1577873472.5,
                ),
                1,
            ),
            (
                (
                    2,
                    None,
                    None,
                    -0.5,
                    2,
                    -1.0,
                    None,
                    None,
                    None,
                    None,
                    2,
                    None,
                    None,
                    None,
                    None,
                    None,
                ),
                1,
            ),
        )
    )


def test_many_times_in_one_step_replay_in_order(spark: SparkSession) -> None:
    desc = dataflow(Reduce(GA, (0,), (Aggregate(AggFunc.MAX, 1), Aggregate(AggFunc.SUM, 1))))
    sx, px = SparkExecutor(spark), PythonExecutor()
    updates = [((1, t), t, 1) for t in range(5)] + [((1, 0), 3, -1), ((2, 2), 4, -1)]
    for ex in (sx, px):
        h = ex.install(desc)
        ex.feed(h, A, updates, Antichain([5]))
    assert _canon([sx.step()]) == _canon([px.step()])
    for t in range(5):
        assert sx.peek(IDX, t) == px.peek(IDX, t)


def test_int64_sums_beyond_the_range_are_errors(spark: SparkSession) -> None:
    # a sum typed int64 once returned 3 * (2**63 - 1), which an importing index then
    # refused with InvalidInputRow; it is the group's "integer out of range" error now
    big = 2**63 - 1
    plan = Distinct(Reduce(GA, (0,), (Aggregate(AggFunc.SUM, 1),)))
    feeds: Feeds = [
        {A: ups(0, ((1, big), 2), ((2, 1), 1))},
        {A: ups(1, ((1, big), 1))},
        {A: ups(2, ((1, big), -2))},
    ]
    sx = assert_agrees(spark, dataflow(plan), feeds)
    assert sx.peek(IDX, 1) == PeekError("integer out of range")
    assert sx.peek(IDX, 2) == PeekRows((((1, big), 1), ((2, 1), 1)))


def test_accumulating_reduce_keeps_a_group_whose_counts_cancel(spark: SparkSession) -> None:
    # count(*) is 0 but rows remain (+1 and -1 of different rows): the group stays
    plan = Reduce(GA, (0,), (Aggregate(AggFunc.COUNT), Aggregate(AggFunc.SUM, 1)))
    feeds: Feeds = [
        {A: ups(0, ((1, 1), 1), ((1, 2), -1))},
        {A: ups(1, ((1, 2), 1))},
        {A: ups(2, ((1, 1), -1))},
    ]
    sx = assert_agrees(spark, dataflow(plan), feeds)
    assert sx.peek(IDX, 0) == PeekRows((((1, 0, -1), 1),))
    assert sx.peek(IDX, 1) == PeekRows((((1, 1, 1), 1),))
    assert sx.peek(IDX, 2) == PeekRows(())


def test_reduce_kinds_are_chosen_by_aggregate(spark: SparkSession) -> None:
    sx = SparkExecutor(spark)
    h = sx.install(dataflow(Reduce(GA, (0,), (Aggregate(AggFunc.SUM, 1),))))
    nodes = sx._dataflows[h].nodes
    assert any(isinstance(n, AccumulatingReduceNode) for n in nodes)
    sf = Schema.of(("k", "int64"), ("f", "float64"))
    assert not AccumulatingReduceNode.supports(sf, (Aggregate(AggFunc.SUM, 1),))
    assert not AccumulatingReduceNode.supports(SA, (Aggregate(AggFunc.SUM, 1, distinct=True),))
    assert ReduceNode is not AccumulatingReduceNode


def test_arrangement_spine_merges_and_lookups(spark: SparkSession) -> None:
    arr = SparkArrangement(spark, SA, (0,))
    want: dict[tuple[Any, ...], int] = {}
    for i in range(20):
        change = {(i % 3, i): 1, (None, i % 2): 1, ((i - 1) % 3, i - 1): -1}
        arr.append(change)
        for r, d in change.items():
            want[r] = want.get(r, 0) + d
    want = {r: c for r, c in want.items() if c}
    assert len(arr.runs) <= 4 * 3  # a tiered spine: merged every 4 runs
    assert max(arr.levels) >= 2
    got = {r: c for g in arr.lookup().values() for r, c in g.items()}
    assert got == want
    assert arr.lookup([(None,)]) == {(None,): {r: c for r, c in want.items() if r[0] is None}}
    assert arr.lookup([(7,)]) == {}


def test_accumulators_sum_and_fingerprints_mod_prime(spark: SparkSession) -> None:
    acc = SparkAccumulators(
        spark, Schema.of(("k", "string")), [Acc.COUNT, Acc.SUM, Acc.FINGERPRINT]
    )
    for _ in range(9):
        acc.append({("a",): [1, 2**70, 2**61 - 2], (None,): [1, -1, 1]})
    assert acc.lookup([("a",), (None,), ("b",)]) == {
        ("a",): [9, 9 * 2**70, (9 * (2**61 - 2)) % (2**61 - 1)],
        (None,): [9, -9, 9],
    }


def test_index_import_reads_an_exported_index(spark: SparkSession) -> None:
    sx, px = SparkExecutor(spark), PythonExecutor()
    base = dataflow(Reduce(GA, (0,), (Aggregate(AggFunc.COUNT),)))
    schema = Schema.of(("k", "int64"), ("count", "int64", False))
    reader = DataflowDescription(
        "reader",
        index_imports=(IndexImport(IDX, OBJ, (0,)),),
        objects_to_build=(BuildDesc(GlobalId.user(40), Distinct(Project(Get(OBJ, schema), (1,)))),),
        index_exports=(IndexExport(GlobalId.user(41), GlobalId.user(40), ()),),
        as_of=Antichain([1]),
    )
    outs = []
    for ex in (sx, px):
        h = ex.install(base)
        ex.feed(h, A, ups(0, ((1, 1), 1), ((2, 1), 1)), Antichain([2]))
        ex.step()
        ex.install(reader)
        ex.feed(h, A, ups(2, ((1, 2), 1)), Antichain([4]))
        outs.append(_canon([ex.step()]))
        assert ex.peek(GlobalId.user(41), 3) == PeekRows((((1,), 1), ((2,), 1)))
    assert outs[0] == outs[1]


def test_an_index_that_outgrows_memory_moves_to_spark_and_answers_the_same(
    spark: SparkSession,
) -> None:
    """Past ``index_memory_rows`` rows an index's history moves to Spark (peeks become jobs);
    answers, key lookups, compaction and a dataflow importing it stay as before."""
    sx, px = SparkExecutor(spark, index_memory_rows=2), PythonExecutor()
    plan = Reduce(GA, (0,), (Aggregate(AggFunc.COUNT),))
    schema = Schema.of(("k", "int64"), ("count", "int64", False))
    reader = DataflowDescription(
        "reader",
        index_imports=(IndexImport(IDX, OBJ, (0,)),),
        objects_to_build=(BuildDesc(GlobalId.user(40), Get(OBJ, schema)),),
        index_exports=(IndexExport(GlobalId.user(41), GlobalId.user(40), (0,)),),
        as_of=Antichain([2]),
    )
    handles = {}
    for ex in (sx, px):
        h = handles[ex] = ex.install(dataflow(plan))
        ex.feed(h, A, ups(0, ((1, 1), 1), ((2, 1), 1)), Antichain([1]))
        ex.step()
    assert not sx.index_in_spark(IDX)
    for ex in (sx, px):
        h = handles[ex]
        ex.feed(h, A, ups(1, ((3, 1), 1), ((1, 5), 1)), Antichain([3]))
        ex.step()
        ex.allow_compaction(IDX, Antichain([2]))
        ex.install(reader)
        ex.feed(h, A, ups(3, ((2, 7), -1)), Antichain([5]))
        ex.step()
    assert sx.index_in_spark(IDX) and sx.index_in_spark(GlobalId.user(41))  # 3 rows each
    for at in (2, 3, 4):
        assert sx.peek(IDX, at) == px.peek(IDX, at)
        assert sx.peek(IDX, at, None, ((1,), (9,))) == px.peek(IDX, at, None, ((1,), (9,)))
        assert sx.peek(GlobalId.user(41), at) == px.peek(GlobalId.user(41), at)
    with pytest.raises(ExecutorError):
        SparkExecutor(spark, index_memory_rows=-1)


def test_compaction_peeks_and_drop(spark: SparkSession) -> None:
    sx = SparkExecutor(spark)
    h = sx.install(dataflow(Reduce(GA, (0,), (Aggregate(AggFunc.COUNT),))))
    sx.feed(h, A, ups(0, ((1, 1), 1)) + ups(1, ((1, 2), 1)) + ups(2, ((2, 2), 1)), Antichain([3]))
    sx.step()
    fin = RowSetFinishing((ColumnOrder(0, desc=True),), limit=1)
    assert sx.peek(IDX, 2, fin) == PeekRows((((2, 1), 1),))
    assert sx.peek(IDX, 2, None, ((1,),)) == PeekRows((((1, 2), 1),))
    sx.allow_compaction(IDX, Antichain([2]))
    assert sx.since(IDX) == Antichain([2])
    with pytest.raises(PeekOutOfRange):
        sx.peek(IDX, 1)
    with pytest.raises(PeekNotReady):
        sx.peek(IDX, 3)
    with pytest.raises(ArityMismatch):
        sx.peek(IDX, 2, None, ((1, 2),))
    assert sx.peek(IDX, 2) == PeekRows((((1, 2), 1), ((2, 1), 1)))
    sx.allow_compaction(SUB, Antichain())
    sx.allow_compaction(IDX, Antichain())  # the last export: the dataflow goes
    with pytest.raises(UnknownExport):
        sx.upper(IDX)
    with pytest.raises(UnknownExport):
        sx.source_inputs(h)


def test_misuse_raises_typed_errors_and_changes_nothing(spark: SparkSession) -> None:
    sx = SparkExecutor(spark)
    desc = dataflow(Reduce(GA, (0,), (Aggregate(AggFunc.COUNT),)))
    h = sx.install(desc)
    sx.feed(h, A, ups(0, ((1, 1), 1)), Antichain([2]))
    sx.allow_compaction(IDX, Antichain([1]))
    bad_calls = [
        (lambda: sx.feed(h, A, ups(1, ((1, 1), 1)), Antichain([3])), UpdateBeforeFrontier),
        (lambda: sx.feed(h, A, [], Antichain([1])), InputFrontierRegression),
        (lambda: sx.feed(h, A, [(("x", 1), 2, 1)], Antichain([3])), InvalidInputRow),
        (lambda: sx.feed(h, B, [], Antichain([3])), UnknownExport),
        (lambda: sx.install(desc), DuplicateExport),
        (lambda: sx.install(dataflow(Get(GlobalId.user(99), SA))), UnknownInput),
        (
            lambda: sx.install(
                DataflowDescription(
                    "r",
                    index_imports=(IndexImport(GlobalId.user(98), OBJ, (0,)),),
                    objects_to_build=(BuildDesc(GlobalId.user(97), Get(OBJ, SA)),),
                    index_exports=(IndexExport(GlobalId.user(96), GlobalId.user(97), ()),),
                    as_of=Antichain([0]),
                )
            ),
            InvalidImport,
        ),
        (lambda: sx.allow_compaction(IDX, Antichain([0])), CompactionRegression),
        (lambda: sx.peek(IDX, 0), PeekOutOfRange),
        (lambda: sx.peek(IDX, 1), PeekNotReady),
    ]
    for call, err in bad_calls:
        with pytest.raises(err):
            call()
    batches = sx.step()
    assert [(b.id, b.upper, b.updates) for b in sorted(batches, key=lambda b: b.id)] == [
        (IDX, Antichain([2]), (((1, 1), 0, 1),)),
        (SUB, Antichain([2]), (((1, 1), 0, 1),)),
    ]
    assert sx.peek(IDX, 1) == PeekRows((((1, 1), 1),))
    assert sx.since(IDX) == Antichain([1])


def test_runs_materialise_in_the_background_and_reads_agree(spark: SparkSession) -> None:
    acc = SparkAccumulators(spark, Schema.of(("k", "float64")), [Acc.COUNT, Acc.FINGERPRINT])
    want: dict[tuple[Any, ...], list[int]] = {}
    for i in range(9):
        delta = {(float(i % 3),): [1, 2**61 - 2], (-0.0,): [1, 2**61 - 3]}
        acc.append(delta)
        for k, v in delta.items():
            old = want.setdefault(k, [0, 0])
            old[0] += v[0]
            old[1] = (old[1] + v[1]) % (2**61 - 1)
    # read while merges may still be pending (their parts are read), then after all settled
    early = acc.lookup(list(want))
    for run in acc.runs:
        if run.pending is not None:
            run.pending.result()
    late = acc.lookup(list(want))
    assert early == late == want
    acc.lookup([(1.0,)])  # settles the finished materialisations
    assert acc.levels == [1, 1, 0]
    # level 1 and up: one consolidated Spark frame each; level 0: the driver's write buffer
    assert all(r.sources()[0] and not r.parts and r.local is None for r in acc.runs[:2])
    assert acc.runs[2].sources() == ([], [acc.runs[2].local])
    assert 3 + 3 + 2 <= acc.size_bound <= 4 + 4 + 2  # Arrow counts -0.0 apart from 0.0


def test_accumulating_reduce_over_a_non_nullable_column(spark: SparkSession) -> None:
    """A NOT NULL column keeps only its sum: count and presence come from the group's own."""
    sn = Schema.of(("k", "int64"), ("v", "int64", False))
    aggs = (
        Aggregate(AggFunc.COUNT, 1),
        Aggregate(AggFunc.SUM, 1),
        Aggregate(AggFunc.AVG, 1),
        Aggregate(AggFunc.COUNT),
    )
    plan = Reduce(Get(A, sn), (0,), aggs)
    feeds: Feeds = [
        {A: ups(0, ((1, 10), 1), ((1, 20), 2), ((2, 5), 1))},
        {A: ups(1, ((1, 10), -1), ((2, 5), -1), ((3, 7), 1), ((3, 8), -1))},  # key 3: count 0
        {A: ups(2, ((3, 8), 1), ((2, 2**62), 2), ((1, 20), -2))},
        {A: ups(3, ((3, 7), -1), ((2, -(2**62)), 1))},
    ]
    sx = assert_agrees(spark, dataflow(plan), feeds)
    node = next(n for n in sx._dataflows[0].nodes if isinstance(n, AccumulatingReduceNode))
    assert node.acc.kinds == [Acc.COUNT, Acc.FINGERPRINT, Acc.FINGERPRINT, Acc.SUM]


def test_int64_float64_join_keys_compare_as_float64_in_spark_state(spark: SparkSession) -> None:
    """Issue 16: an int64 joined with a float64 compares as float64 (SQL converts the int),
    also when the matching rows are in Spark: state merged into materialised runs, looked
    up with float keys by a semi-join that casts the long column to double."""
    big = 2**62
    si = Schema.of(("i", "int64"), ("n", "int64"))
    sf = Schema.of(("f", "float64"), ("n", "int64"))
    plan = Join((Get(A, si), Get(B, sf)), ((0, 2),))
    filler_a = [((t * 100 + j, t), 1) for t in range(6) for j in range(12)]
    feeds: Feeds = [{A: ups(0, ((big + 1, -1), 1), ((big, -2), 1), *filler_a[:12])}]
    feeds += [{A: ups(t, *filler_a[12 * t : 12 * t + 12])} for t in range(1, 6)]
    # by now the int64 side's early rows are in a materialised run; the float key finds them
    feeds += [{B: ups(6, ((float(big), -3), 1), ((float(big + 1024), -4), 1))}]
    feeds += [{A: ups(7, ((big + 3, -5), 1), ((big + 1023, -6), 1))}]
    sx = assert_agrees(spark, dataflow(plan, (A, B)), feeds)
    fb = float(big)
    want = {
        (big + 1, -1, fb, -3),
        (big, -2, fb, -3),
        (big + 3, -5, fb, -3),  # 2**62 + 3 is 2.0**62 as a float64
        (big + 1023, -6, fb + 1024, -4),  # and 2**62 + 1023 is 2.0**62 + 1024
    }
    got = sx.peek(IDX, 7)
    assert isinstance(got, PeekRows)
    assert {r for r, _ in got.rows} == want


def test_arrangement_with_float_keys_over_an_int64_column(spark: SparkSession) -> None:
    big = 2**62
    si = Schema.of(("i", "int64"), ("n", "int64"))
    arr = SparkArrangement(spark, si, (0,), as_float=(True,))
    for step in range(8):
        arr.append({(step * 10 + j, step): 1 for j in range(10)})
        if step == 0:
            arr.append({(big + 1, -1): 1, (big, -2): 1, (big + 5000, -3): 1})
    for run in arr.runs:
        if run.pending is not None:
            run.pending.result()
    arr.lookup([(0.0,)])  # settles the finished materialisations
    assert arr.runs[0].level >= 1 and arr.runs[0].sources()[1] == []  # in Spark only
    fb = float(big)
    assert arr.lookup([(fb,)]) == {(fb,): {(big + 1, -1): 1, (big, -2): 1}}
    assert arr.lookup([(3.0,), (-0.0,)]) == {(3.0,): {(3, 0): 1}, (0.0,): {(0, 0): 1}}
    assert arr.lookup([(fb + 2048,)]) == {}  # 2**62 + 5000 is 2.0**62 + 5120


def test_feeds_and_steps_run_with_the_cyclic_collector_paused(spark: SparkSession) -> None:
    """A step's allocations do not set off full collections (``runtime/heap.py``)."""
    import gc

    seen: list[tuple[str, bool]] = []

    class Recording(SparkExecutor):
        def _push(self, *args: Any) -> None:
            seen.append(("feed", gc.isenabled()))
            super()._push(*args)

        def _run(self, *args: Any) -> Any:
            seen.append(("step", gc.isenabled()))
            return super()._run(*args)

    assert gc.isenabled()
    run(Recording(spark), dataflow(Distinct(Get(A, SA))), [{A: ups(0, ((1, 2), 1))}])
    assert seen == [("feed", False), ("step", False)]
    assert gc.isenabled()
