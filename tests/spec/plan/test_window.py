"""The ``Window`` operator: its laws, examples PostgreSQL fixes, and per-partition maintenance.

The differential checks against DuckDB (over SQL, at every time of a history)
are in ``tests/spec/sql/test_sql_duckdb_windows.py``; the executors are held
to the reference by the executor contract, whose random plans include windows.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidegate.spec.executor.operators as operators
from tidegate.spec.errors import InvalidPlan, TypeMismatch, UnknownColumn
from tidegate.spec.executor.operators import SourceNode, WindowNode
from tidegate.spec.frontier import Row
from tidegate.spec.plan import (
    AggFunc,
    Aggregate,
    Constant,
    Schema,
    Window,
    WindowBound,
    WindowBoundKind,
    WindowFrame,
    WindowFunc,
    WindowFuncKind,
    evaluate,
    typecheck,
)
from tidegate.spec.protocol.types import ColumnOrder
from tidegate.spec.strategies.plan import order_bys, schema_rows, window_funcs

S = Schema.of(("p", "int64"), ("a", "int64"), ("b", "float64"), ("s", "string"))
W = WindowFuncKind
B = WindowBoundKind


@st.composite
def _windows(draw: st.DrawFn) -> tuple[Window, list[tuple[Row, int]]]:
    rows = draw(st.lists(st.tuples(schema_rows(S), st.sampled_from([-1, 1, 1, 2, 3])), max_size=12))
    order = draw(order_bys(S.arity))
    funcs = draw(st.lists(window_funcs(S, order), min_size=1, max_size=3))
    key = tuple(draw(st.lists(st.integers(0, 3), max_size=2, unique=True)))
    return Window(Constant(tuple(rows), S), key, order, tuple(funcs)), rows


@given(_windows())
def test_a_window_over_a_partition_equals_the_window_over_that_partition_alone(
    case: tuple[Window, list[tuple[Row, int]]],
) -> None:
    plan, rows = case
    whole = evaluate(plan, {}, 0)

    def key(r: Row) -> Row:
        return tuple(r[i] for i in plan.partition_key)

    errors: Counter[str] = Counter()
    seen: dict[Row, int] = {}
    for p in {key(r) for r, _ in rows}:
        alone = evaluate(
            Window(Constant(tuple(rc for rc in rows if key(rc[0]) == p), S), *_rest(plan)), {}, 0
        )
        assert {r: c for r, c in whole.rows.items() if key(r) == p} == alone.rows
        errors.update(alone.errors)
        seen.update(alone.rows)
    assert seen == whole.rows
    assert dict(errors) == {e: c for e, c in whole.errors.items() if c}


def _rest(plan: Window) -> tuple[Any, ...]:
    return plan.partition_key, plan.order_by, plan.funcs


ROWS = [
    (1, 1, 1.0, "a"),
    (1, 2, 2.0, "b"),
    (1, 2, 3.0, "c"),
    (1, None, 4.0, "d"),
    (2, 5, None, "e"),
]


def _values(funcs: tuple[WindowFunc, ...], order: tuple[ColumnOrder, ...]) -> dict[str, Row]:
    plan = Window(Constant(tuple((r, 1) for r in ROWS), S), (0,), order, funcs)
    return {r[3]: r[4:] for r in evaluate(plan, {}, 0).rows}


def test_ranking_and_peers_as_postgresql() -> None:
    # ORDER BY a: 1, 2, 2, NULL (NULLs last ascending); the two 2s are peers
    got = _values((WindowFunc(W.ROW_NUMBER), WindowFunc(W.RANK), WindowFunc(W.DENSE_RANK)),
                  (ColumnOrder(1),))  # fmt: skip
    assert got == {
        "a": (1, 1, 1), "b": (2, 2, 2), "c": (3, 2, 2), "d": (4, 4, 3), "e": (1, 1, 1),
    }  # fmt: skip


def test_the_default_frame_includes_peers_and_rows_frames_do_not() -> None:
    total = Aggregate(AggFunc.SUM, 2)
    rows_frame = WindowFrame(False)  # ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    got = _values(
        (
            WindowFunc(W.AGGREGATE, aggregate=total),
            WindowFunc(W.AGGREGATE, aggregate=total, frame=rows_frame),
        ),
        (ColumnOrder(1),),
    )
    assert got == {"a": (1.0, 1.0), "b": (6.0, 3.0), "c": (6.0, 6.0), "d": (10.0, 10.0),
                   "e": (None, None)}  # fmt: skip


def test_range_offsets_compare_values_and_null_rows_frame_their_peers() -> None:
    frame = WindowFrame(
        True, WindowBound(B.PRECEDING, 1), WindowBound(B.FOLLOWING, 0)
    )  # RANGE BETWEEN 1 PRECEDING AND 0 FOLLOWING
    count = WindowFunc(W.AGGREGATE, aggregate=Aggregate(AggFunc.COUNT), frame=frame)
    got = _values((count,), (ColumnOrder(1),))
    # a=1: {1}; a=2: {1, 2, 2}; a=NULL: its peers, the NULL rows
    assert got == {"a": (1,), "b": (3,), "c": (3,), "d": (1,), "e": (1,)}
    desc = _values((count,), (ColumnOrder(1, desc=True, nulls_last=False),))
    # descending, 1 PRECEDING means values up to a + 1
    assert desc == {"a": (3,), "b": (2,), "c": (2,), "d": (1,), "e": (1,)}


def test_lag_lead_offsets_and_defaults() -> None:
    got = _values(
        (
            WindowFunc(W.LAG, 3),
            WindowFunc(W.LEAD, 3, 2, 3),  # the default: the row's own s
            WindowFunc(W.LAG, 3, -1),  # a negative lag looks ahead
        ),
        (ColumnOrder(2),),
    )
    assert got == {
        "a": (None, "c", "b"), "b": ("a", "d", "c"), "c": ("b", "c", "d"),
        "d": ("c", "d", None), "e": (None, "e", None),
    }  # fmt: skip


def test_invalid_windows_are_refused_by_typecheck() -> None:
    src = Constant((), S)
    bad_frame = WindowFrame(False, WindowBound(B.CURRENT_ROW), WindowBound(B.PRECEDING, 1))
    with pytest.raises(InvalidPlan):
        typecheck(Window(src, (), (), (WindowFunc(W.FIRST_VALUE, 1, frame=bad_frame),)))
    range_offset = WindowFrame(True, WindowBound(B.PRECEDING, 1))
    with pytest.raises(InvalidPlan):  # a RANGE offset needs exactly one ORDER BY column
        typecheck(Window(src, (), (), (WindowFunc(W.FIRST_VALUE, 1, frame=range_offset),)))
    with pytest.raises(TypeMismatch):  # ... and a numeric one
        typecheck(
            Window(src, (), (ColumnOrder(3),), (WindowFunc(W.LAST_VALUE, 1, frame=range_offset),))
        )
    with pytest.raises(TypeMismatch):  # a lag default of another type
        typecheck(Window(src, (), (), (WindowFunc(W.LAG, 1, 1, 3),)))
    with pytest.raises(UnknownColumn):
        typecheck(Window(src, (9,), (), (WindowFunc(W.ROW_NUMBER),)))
    distinct = Aggregate(AggFunc.COUNT, 1, distinct=True)
    with pytest.raises(InvalidPlan):
        typecheck(Window(src, (), (), (WindowFunc(W.AGGREGATE, aggregate=distinct),)))


def test_an_overflowing_window_aggregate_makes_its_partition_one_error() -> None:
    big = 2**62
    rows = ((1, big, 0.0, "a"), 1), ((1, big, 1.0, "b"), 1), ((2, 1, 0.0, "c"), 1)
    plan = Window(
        Constant(rows, S), (0,), (), (WindowFunc(W.AGGREGATE, aggregate=Aggregate(AggFunc.SUM, 1)),)
    )
    got = evaluate(plan, {}, 0)
    assert got.rows == {(2, 1, 0.0, "c", 1): 1}
    assert got.errors == {"integer out of range": 1}


def test_the_python_executor_recomputes_only_the_partitions_a_change_touches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes: list[int] = []
    real = operators.window_partition

    def counted(rows: Any, plan: Window) -> dict[Row, int]:
        pairs = list(rows)
        sizes.append(sum(c for _, c in pairs))
        return real(pairs, plan)

    monkeypatch.setattr(operators, "window_partition", counted)
    src = SourceNode()
    node = WindowNode(src, Window(Constant((), S), (0,), (ColumnOrder(1),),
                                  (WindowFunc(W.ROW_NUMBER),)))  # fmt: skip
    # 100 partitions of 10 rows each
    src.pending_rows[0] = [((p, i, 0.0, "x"), 1) for p in range(100) for i in range(10)]
    src.run(0)
    node.run(0)
    assert len(sizes) == 100 and len(node.out) == 1000
    sizes.clear()
    src.pending_rows[1] = [((7, 3, 0.0, "x"), -1), ((7, 30, 0.0, "x"), 1)]
    src.run(1)
    node.run(1)
    assert sizes == [10]  # partition 7 alone, recomputed once
    # its rows after the changed one moved up by one; nothing else changed
    changed = Counter({r: c for r, c in node.out})
    assert all(r[0] == 7 for r in changed)
    assert changed[(7, 30, 0.0, "x", 10)] == 1 and changed[(7, 3, 0.0, "x", 4)] == -1


def test_the_dsl_builds_windows() -> None:
    from tidegate.dsl import (
        Schema as DSchema,
    )
    from tidegate.dsl import (
        constant,
        desc,
        lag,
        over,
        rank,
        row_number,
        rows,
        sum_,
    )

    f = constant(
        [(1, "a", 3), (2, "a", 5), (3, "b", 1), (4, "a", 5)],
        DSchema.of(("id", "int64"), ("g", "string"), ("x", "int64")),
    )
    w = f.window(
        row_number().alias("rn"),
        rank(),
        lag("x", 1, "id"),
        over(sum_("x"), rows(-1, 0)).alias("s2"),
        partition_by=["g"],
        order_by=[desc("x"), "id"],
    )
    assert w.schema.names == ("id", "g", "x", "rn", "rank", "lag_x", "s2")
    assert sorted(evaluate(w.plan, {}, 0).rows) == [
        (1, "a", 3, 3, 3, 5, 8),
        (2, "a", 5, 1, 1, 2, 5),
        (3, "b", 1, 1, 1, 3, 1),
        (4, "a", 5, 2, 2, 5, 10),
    ]
    with pytest.raises(UnknownColumn, match="lag"):
        f.window(lag("nope"))


@given(_windows())
def test_running_totals_equal_the_aggregate_over_each_frame(
    case: tuple[Window, list[tuple[Row, int]]],
) -> None:
    """count/sum/avg slide a running total along the frames; the law: the same values as
    the aggregate computed over each frame's slots afresh."""
    import tidegate.spec.plan.window as window

    plan, _rows = case
    fast = evaluate(plan, {}, 0)
    saved = window._SLIDING
    window._SLIDING = frozenset()
    try:
        slow = evaluate(plan, {}, 0)
    finally:
        window._SLIDING = saved
    assert fast.rows == slow.rows and fast.errors == slow.errors
