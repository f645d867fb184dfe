"""PythonExecutor behaviours beyond the generic contract: imports, sinks, errors, peeks, drop."""

from __future__ import annotations

import pytest

from tidegate.spec.errors import (
    InvalidImport,
    InvalidInputRow,
    InvalidPlan,
    UnknownExport,
    UnsupportedTimestamp,
)
from tidegate.spec.executor import PythonExecutor
from tidegate.spec.frontier import Antichain, Product
from tidegate.spec.ids import GlobalId
from tidegate.spec.plan import (
    AggFunc,
    Aggregate,
    BinaryFunc,
    CallBinary,
    ColumnRef,
    Get,
    Literal,
    Map,
    Reduce,
    ScalarType,
    Schema,
)
from tidegate.spec.protocol.responses import PeekError, PeekRows
from tidegate.spec.protocol.types import (
    BuildDesc,
    ColumnOrder,
    DataflowDescription,
    IndexExport,
    IndexImport,
    MaterializedViewConnection,
    RowSetFinishing,
    SinkExport,
    SourceImport,
    SubscribeConnection,
)

U1 = GlobalId.user(1)
SCHEMA = Schema.of(("k", "string"), ("v", "int64", False))
AGG = Reduce(
    Get(U1, SCHEMA),
    (0,),
    (Aggregate(AggFunc.MIN, 1), Aggregate(AggFunc.MAX, 1), Aggregate(AggFunc.COUNT)),
)


def dataflow(plan=AGG, *, as_of: int = 0, sinks=(), until=None) -> DataflowDescription:  # type: ignore[no-untyped-def]
    obj = GlobalId.user(2)
    return DataflowDescription(
        "t",
        source_imports=(SourceImport(U1),),
        objects_to_build=(BuildDesc(obj, plan),),
        index_exports=(IndexExport(GlobalId.user(3), obj, (0,)),),
        sink_exports=tuple(sinks),
        as_of=Antichain([as_of]),
        until=until if until is not None else Antichain(),
    )


def test_min_max_follow_retractions_incrementally() -> None:
    ex = PythonExecutor()
    h = ex.install(dataflow())
    ix = GlobalId.user(3)
    ex.feed(h, U1, [(("a", 1), 0, 1), (("a", 5), 0, 1), (("a", 3), 0, 1)], Antichain([1]))
    ex.step()
    assert ex.peek(ix, 0) == PeekRows(((("a", 1, 5, 3), 1),))
    ex.feed(h, U1, [(("a", 1), 1, -1), (("a", 5), 1, -1)], Antichain([2]))
    (batch,) = ex.step()
    assert set(batch.updates) == {(("a", 1, 5, 3), 1, -1), (("a", 3, 3, 1), 1, 1)}
    assert ex.peek(ix, 1) == PeekRows(((("a", 3, 3, 1), 1),))
    assert ex.peek(ix, 0) == PeekRows(((("a", 1, 5, 3), 1),))  # history kept until compaction


def test_peek_with_key_lookup_and_finishing() -> None:
    ex = PythonExecutor()
    h = ex.install(dataflow())
    ix = GlobalId.user(3)
    ex.feed(h, U1, [(("a", 1), 0, 1), (("b", 2), 0, 1), (("c", 3), 0, 1)], Antichain([1]))
    ex.step()
    assert ex.peek(ix, 0, key_lookup=(("b",), ("z",))) == PeekRows(((("b", 2, 2, 1), 1),))
    fin = RowSetFinishing(order_by=(ColumnOrder(1, desc=True),), limit=2, project=(0,))
    assert ex.peek(ix, 0, fin) == PeekRows(((("c",), 1), (("b",), 1)))


def test_evaluation_errors_make_peeks_fail_until_retracted() -> None:
    plan = Map(
        Get(U1, SCHEMA),
        (CallBinary(BinaryFunc.DIV, Literal(6, ScalarType.INT64), ColumnRef(1)),),
        ("q",),
    )
    ex = PythonExecutor()
    h = ex.install(dataflow(plan))
    ix = GlobalId.user(3)
    ex.feed(h, U1, [(("a", 0), 0, 1), (("b", 2), 0, 1), (("a", 0), 1, -1)], Antichain([2]))
    (batch,) = ex.step()
    assert batch.errors == (("division by zero", 0, 1), ("division by zero", 1, -1))
    assert ex.peek(ix, 0) == PeekError("division by zero")
    assert ex.peek(ix, 1) == PeekRows(((("b", 2, 3), 1),))


def test_index_import_reads_another_dataflows_index() -> None:
    ex = PythonExecutor()
    h = ex.install(dataflow())
    ex.feed(h, U1, [(("a", 1), 0, 1), (("a", 4), 2, 1)], Antichain([3]))
    ex.step()
    idx_schema = Schema.of(
        ("k", "string"), ("min_v", "int64"), ("max_v", "int64"), ("count", "int64", False)
    )
    reader = DataflowDescription(
        "reader",
        index_imports=(IndexImport(GlobalId.user(3), GlobalId.user(2), (0,)),),
        objects_to_build=(BuildDesc(GlobalId.user(4), Get(GlobalId.user(2), idx_schema)),),
        index_exports=(IndexExport(GlobalId.user(5), GlobalId.user(4), ()),),
        as_of=Antichain([1]),
    )
    ex.install(reader)
    ex.step()
    assert ex.upper(GlobalId.user(5)) == Antichain([3])
    assert ex.peek(GlobalId.user(5), 1) == PeekRows(((("a", 1, 1, 1), 1),))
    assert ex.peek(GlobalId.user(5), 2) == PeekRows(((("a", 1, 4, 2), 1),))
    ex.feed(h, U1, [(("a", 1), 3, -1)], Antichain([4]))
    ex.step()
    assert ex.peek(GlobalId.user(5), 3) == PeekRows(((("a", 4, 4, 1), 1),))


def test_an_index_import_whose_exporter_is_dropped_stalls_and_is_never_a_source() -> None:
    ex = PythonExecutor()
    h = ex.install(dataflow())
    ex.feed(h, U1, [(("a", 1), 0, 1)], Antichain([2]))
    ex.step()
    idx_schema = Schema.of(
        ("k", "string"), ("min_v", "int64"), ("max_v", "int64"), ("count", "int64", False)
    )
    reader = ex.install(
        DataflowDescription(
            "reader",
            index_imports=(IndexImport(GlobalId.user(3), GlobalId.user(2), (0,)),),
            objects_to_build=(BuildDesc(GlobalId.user(4), Get(GlobalId.user(2), idx_schema)),),
            index_exports=(IndexExport(GlobalId.user(5), GlobalId.user(4), ()),),
            as_of=Antichain([1]),
        )
    )
    ex.step()
    ex.drop(h)
    assert ex.source_inputs(reader) == ()
    with pytest.raises(UnknownExport):
        ex.feed(reader, GlobalId.user(3), [], Antichain([5]))
    assert ex.step() == []
    assert ex.upper(GlobalId.user(5)) == Antichain([2])
    assert ex.peek(GlobalId.user(5), 1) == PeekRows(((("a", 1, 1, 1), 1),))


def test_index_import_must_exist_and_be_readable_at_the_as_of() -> None:
    ex = PythonExecutor()
    ex.install(dataflow())
    ex.allow_compaction(GlobalId.user(3), Antichain([5]))
    reader = DataflowDescription(
        "reader",
        index_imports=(IndexImport(GlobalId.user(3), GlobalId.user(2), (0,)),),
        objects_to_build=(BuildDesc(GlobalId.user(4), Get(GlobalId.user(3), SCHEMA)),),
        index_exports=(IndexExport(GlobalId.user(5), GlobalId.user(4), ()),),
        as_of=Antichain([1]),
    )
    with pytest.raises(InvalidImport):
        ex.install(reader)
    with pytest.raises(InvalidImport):
        PythonExecutor().install(reader)


def test_sinks_honour_with_snapshot_and_up_to() -> None:
    sinks = (
        SinkExport(
            GlobalId.transient(1), GlobalId.user(2), SubscribeConnection(), with_snapshot=False
        ),
        SinkExport(
            GlobalId.user(7), GlobalId.user(2), MaterializedViewConnection(), up_to=Antichain([2])
        ),
    )
    ex = PythonExecutor()
    h = ex.install(dataflow(as_of=1, sinks=sinks))
    ex.feed(h, U1, [(("a", 1), 0, 1), (("b", 1), 1, 1), (("c", 1), 2, 1)], Antichain([3]))
    batches = {b.id: b for b in ex.step()}
    sub, mv = batches[GlobalId.transient(1)], batches[GlobalId.user(7)]
    assert [(r[0], t) for r, t, _ in sub.updates] == [("c", 2)]
    assert sorted((r[0], t) for r, t, _ in mv.updates) == [("a", 1), ("b", 1)]
    assert sub.lower == Antichain([1]) and sub.upper == Antichain([3])


def test_until_suppresses_later_times() -> None:
    ex = PythonExecutor()
    h = ex.install(dataflow(until=Antichain([2])))
    ex.feed(h, U1, [(("a", 1), 1, 1), (("b", 1), 2, 1)], Antichain([4]))
    (batch,) = ex.step()
    assert [t for _, t, _ in batch.updates] == [1]


def test_drop_by_compaction_to_the_empty_frontier() -> None:
    ex = PythonExecutor()
    h = ex.install(dataflow())
    ex.allow_compaction(GlobalId.user(3), Antichain())
    with pytest.raises(UnknownExport):
        ex.upper(GlobalId.user(3))
    with pytest.raises(UnknownExport):
        ex.feed(h, U1, [], Antichain([1]))
    ex.install(dataflow())  # the id is free again


def test_non_int_times_and_bad_rows_are_rejected_without_effect() -> None:
    ex = PythonExecutor()
    with pytest.raises(UnsupportedTimestamp):
        ex.install(dataflow().with_as_of(Antichain([Product(0, 0)])))
    with pytest.raises(InvalidPlan):
        ex.install(DataflowDescription("no as_of", objects_to_build=()))
    h = ex.install(dataflow())
    with pytest.raises(InvalidInputRow):
        ex.feed(h, U1, [(("a", None), 0, 1)], Antichain([1]))
    with pytest.raises(UnsupportedTimestamp):
        ex.feed(h, U1, [(("a", 1), Product(0, 0), 1)], Antichain([1]))
    ex.step()
    assert ex.upper(GlobalId.user(3)) == Antichain([0])
    assert ex.source_inputs(h) == (U1,)


def test_index_import_carries_the_error_collection() -> None:
    plan = Map(
        Get(U1, SCHEMA),
        (CallBinary(BinaryFunc.DIV, Literal(6, ScalarType.INT64), ColumnRef(1)),),
        ("q",),
    )
    ex = PythonExecutor()
    h = ex.install(dataflow(plan))
    ex.feed(h, U1, [(("a", 0), 0, 1)], Antichain([1]))
    ex.step()
    schema = Schema.of(("k", "string"), ("v", "int64", False), ("q", "int64"))
    reader = DataflowDescription(
        "reader",
        index_imports=(IndexImport(GlobalId.user(3), GlobalId.user(2), (0,)),),
        objects_to_build=(BuildDesc(GlobalId.user(4), Get(GlobalId.user(2), schema)),),
        index_exports=(IndexExport(GlobalId.user(5), GlobalId.user(4), ()),),
        as_of=Antichain([0]),
    )
    ex.install(reader)
    ex.step()
    assert ex.peek(GlobalId.user(5), 0) == PeekError("division by zero")
    ex.feed(h, U1, [(("a", 0), 1, -1)], Antichain([2]))
    ex.step()
    assert ex.peek(GlobalId.user(5), 1) == PeekRows(())


def test_sum_becomes_null_when_its_last_value_is_retracted_but_the_group_remains() -> None:
    schema = Schema.of(("k", "string"), ("v", "int64"))
    plan = Reduce(
        Get(U1, schema),
        (0,),
        (Aggregate(AggFunc.SUM, 1), Aggregate(AggFunc.AVG, 1), Aggregate(AggFunc.COUNT)),
    )
    ex = PythonExecutor()
    h = ex.install(dataflow(plan))
    ex.feed(h, U1, [(("a", 5), 0, 1), (("a", None), 0, 1), (("a", 5), 1, -1)], Antichain([2]))
    ex.step()
    assert ex.peek(GlobalId.user(3), 0) == PeekRows(((("a", 5, 5.0, 2), 1),))
    assert ex.peek(GlobalId.user(3), 1) == PeekRows(((("a", None, None, 1), 1),))
