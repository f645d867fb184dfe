"""Temporal filters (``TemporalFilter``, Materialize's ``mz_now()`` in ``WHERE``): the
reference semantics, the PythonExecutor held to "the rows whose predicates hold at ``t``" at
every time of random histories (compacted, restarted), and examples Materialize documents.

The SparkExecutor runs the same law in ``tests/replica/spark/test_spark_temporal.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from tidegate.spec.errors import InvalidPlan, TypeMismatch
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    BinaryFunc,
    CallBinary,
    ColumnRef,
    Constant,
    Get,
    Literal,
    ScalarType,
    Schema,
    TemporalFilter,
    TemporalOp,
    evaluate,
    explain,
    typecheck,
)
from tidegate.spec.plan.serde import plan_from_dict, plan_to_dict
from tidegate.spec.protocol.responses import PeekRows
from tidegate.spec.protocol.types import BuildDesc, DataflowDescription, IndexExport, SourceImport
from tidegate.spec.testing.temporal import TemporalCase, check_temporal_case, temporal_cases

S = Schema.of(("k", "string"), ("ts", "int64"))
U1 = GlobalId.user(1)
HOUR = 3_600_000


def _last_hour() -> TemporalFilter:
    """``WHERE mz_now() >= ts AND mz_now() < ts + INTERVAL '1 hour'``."""
    plus_hour = CallBinary(BinaryFunc.ADD, ColumnRef(1), Literal(HOUR, ScalarType.INT64))
    return TemporalFilter(Get(U1, S), ((TemporalOp.GE, ColumnRef(1)), (TemporalOp.LT, plus_hour)))


@settings(max_examples=300, deadline=None)
@given(temporal_cases())
def test_the_python_executor_holds_the_rows_valid_at_every_time(case: TemporalCase) -> None:
    check_temporal_case(PythonExecutor, case)


def test_a_row_is_in_the_last_hour_from_its_time_until_an_hour_after() -> None:
    ups = [(("a", 1000), 0, 1), (("b", 5000), 2000, 1)]
    at = {t: set(evaluate(_last_hour(), {U1: ups}, t).rows) for t in (0, 999, 1000, 4999, 5000)}
    assert at == {
        0: set(),
        999: set(),  # not yet: its time is in the future
        1000: {("a", 1000)},
        4999: {("a", 1000)},  # b was inserted at 2000 but is valid only from 5000
        5000: {("a", 1000), ("b", 5000)},
    }
    assert set(evaluate(_last_hour(), {U1: ups}, 1000 + HOUR - 1).rows) == {
        ("a", 1000),
        ("b", 5000),
    }
    assert set(evaluate(_last_hour(), {U1: ups}, 1000 + HOUR).rows) == {("b", 5000)}
    assert evaluate(_last_hour(), {U1: ups}, 5000 + HOUR).rows == {}


def test_the_executor_retracts_at_the_upper_bound_with_no_new_input() -> None:
    desc = DataflowDescription(
        "last hour",
        source_imports=(SourceImport(U1),),
        objects_to_build=(BuildDesc(GlobalId.user(2), _last_hour()),),
        index_exports=(IndexExport(GlobalId.user(3), GlobalId.user(2), (0,)),),
        as_of=Antichain([0]),
    )
    ex = PythonExecutor()
    h = ex.install(desc)
    ex.feed(h, U1, [(("a", 10), 5, 1)], Antichain([11]))
    batches = ex.step()
    assert [b.updates for b in batches] == [((("a", 10), 10, 1),)]  # inserted when valid
    ex.feed(h, U1, [], Antichain([10 + HOUR]))  # time passes, no new input
    assert [b.updates for b in ex.step()] == [()]
    assert ex.peek(GlobalId.user(3), 10 + HOUR - 1) == PeekRows(((("a", 10), 1),))
    waiting = ex.state_records()[h]  # the index's row and the retraction waiting for its time
    ex.feed(h, U1, [], Antichain([11 + HOUR]))
    (batch,) = ex.step()
    assert batch.updates == ((("a", 10), 10 + HOUR, -1),)  # retracted exactly at the bound
    assert ex.peek(GlobalId.user(3), 10 + HOUR) == PeekRows(())
    assert ex.state_records()[h] == waiting - 1  # the retraction no longer waits


def test_bounds_null_negative_and_timestamps() -> None:
    import datetime as dt

    ts = Schema.of(("at", "timestamp"), ("n", "int64"))
    rows = (
        ((dt.datetime(1970, 1, 1, 0, 0, 1), 1), 1),  # 1000 ms
        ((None, 2), 1),  # NULL bound: never kept
        ((dt.datetime(1969, 12, 31), 3), 1),  # before 1970: an error, as Materialize's cast
    )
    plan = TemporalFilter(Constant(rows, ts), ((TemporalOp.LE, ColumnRef(0)),))
    early = evaluate(plan, {}, 1000)
    assert early.rows == {(dt.datetime(1970, 1, 1, 0, 0, 1), 1): 1}
    assert early.errors == {"mz_timestamp out of range": 1}
    assert evaluate(plan, {}, 1001).rows == {}


def test_typecheck_serde_and_explain() -> None:
    plan = _last_hour()
    assert typecheck(plan) == S
    assert plan_from_dict(plan_to_dict(plan)) == plan
    assert explain(plan).splitlines()[0] == (
        "TemporalFilter mz_now() >= #1{ts} AND mz_now() < (#1{ts} + 3600000)"
    )
    with pytest.raises(TypeMismatch):
        typecheck(TemporalFilter(Get(U1, S), ((TemporalOp.LT, ColumnRef(0)),)))
    with pytest.raises(InvalidPlan):
        typecheck(TemporalFilter(Get(U1, S), ()))


def test_the_dsl_writes_a_temporal_filter() -> None:
    from tidegate.dsl import col, table

    frame = table(U1, S).valid_during("ts", col("ts") + HOUR)
    assert frame.plan == _last_hour()
    open_ended = table(U1, S).valid_during(end=1000).plan
    assert isinstance(open_ended, TemporalFilter)
    assert open_ended.predicates == ((TemporalOp.LT, Literal(1000, ScalarType.INT64)),)
    with pytest.raises(InvalidPlan):
        table(U1, S).valid_during()
    with pytest.raises(TypeMismatch):
        table(U1, S).valid_during("k")
